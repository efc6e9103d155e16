// A distributed run's system, per-rank sums and report section.
#include "wallsim/driver/ranks.h"

#include <algorithm>
#include <map>

#include "wallsim/sim/comm_overlap.h"

namespace wallsim::driver {

using nlohmann::ordered_json;

sim::SystemConfig system_for_ranks(const sim::SystemConfig& configured, int64_t world) {
  sim::SystemConfig s = configured;
  const int64_t chips = (world + s.chip.cores - 1) / s.chip.cores;
  if (chips <= 1) {
    s.topology.torus_x = s.topology.torus_y = 1;
    s.topology.instances = 1;
  } else if (!s.topology.instance_ring) {
    const int64_t per = s.chips_per_instance();
    s.topology.instances = std::min(s.topology.instances, (chips + per - 1) / per);
  }
  return s;
}

void RankSums::add(const runtime::StepRecord& r) {
  runtime::add_figures(sum, r);
  step_wall_ns.push_back(r.wall_ns);
}

namespace {

// A record's figures as JSON, each described once (step_log.h), those shown only when nonzero
// left out when zero.
void put_figures(ordered_json& out, runtime::StepRecord r) {
  runtime::for_each_figure(r, [&](std::string_view key, int64_t& v, runtime::Shown shown) {
    // The row states its own start; its exposed communication is the whole run's (the device's
    // total, start-up included), not the steps' sum.
    if (key == "start_ns" || key == "comm_exposed_ns") return;
    if (shown == runtime::Shown::when_nonzero && v == 0) return;
    out[std::string(key)] = v;
  });
}

// Bytes carried per link kind: NeuronLink (torus x and y), the instance ring, EFA (sent).
ordered_json link_bytes(sim::System& system) {
  std::map<std::string, int64_t> by;
  for (const auto& [l, r] : system.links()) {
    const char* kind = l.kind == sim::LinkKind::ring     ? "ring"
                       : l.kind == sim::LinkKind::efa_tx ? "efa"
                       : l.kind == sim::LinkKind::efa_rx ? nullptr
                                                         : "neuronlink";
    if (kind) by[kind] += system.network().bytes(r);
  }
  ordered_json out = ordered_json::object();
  for (const char* k : {"neuronlink", "ring", "efa"}) out[k] = by.count(k) ? by.at(k) : 0;
  return out;
}

// Whether the ranks are one SPMD class, or why not, and whether the run folded them (then only
// rank 0 is simulated), or why not.
ordered_json fold_section(const runtime::FoldDecision& fold, const FoldPlan& plan) {
  ordered_json out = {{"eligible", fold.eligible}};
  if (!fold.eligible) out["why_not"] = fold.why_not;
  out["classes"] = fold.classes();
  if (fold.eligible) {
    std::vector<int64_t> sizes(fold.representatives.size(), 0);
    for (int64_t c : fold.class_of) ++sizes[static_cast<size_t>(c)];
    out["representatives"] = fold.representatives;
    out["class_sizes"] = sizes;
  }
  out["folded"] = plan.folded;
  if (plan.why_unfolded) out["why_unfolded"] = *plan.why_unfolded;
  out["simulated_ranks"] = plan.simulated_ranks();
  return out;
}

}  // namespace

RankFigures rank_figures(runtime::Session& session, RankSums sums) {
  RankFigures f;
  f.rank = session.rank();
  f.sums = std::move(sums);
  f.startup = session.startup_record();
  f.collective_ns = session.collective_ns();
  // Whole ns of the core's collectives with no compute engine busy, and with one busy.
  f.exposed_ns = session.device_core().comm_overlap().exposed_ps() / 1000;
  f.overlapped_ns = session.device_core().comm_overlap().overlapped_ps() / 1000;
  return f;
}

ordered_json distributed_section(const runtime::ProcessGroup& group,
                                 const std::vector<RankFigures>& ranks, sim::System& system,
                                 bool shared_cache, const runtime::FoldDecision& fold,
                                 const FoldPlan& plan) {
  const runtime::ParallelSizes& s = group.sizes();
  ordered_json out = {{"world", group.world()},
                      {"tp", s.tp},
                      {"pp", s.pp},
                      {"dp", s.dp},
                      {"chips", system.chips()},
                      {"compile_cache", shared_cache ? "shared" : "private"},
                      {"fold", fold_section(fold, plan)}};
  // The whole run: a step ends when its slowest rank ends.
  std::vector<int64_t> step_ns;
  int64_t busy = 0, comm_wait = 0, collective = 0, exposed = 0, overlapped = 0, compile = 0,
          compiles = 0;
  const auto compile_state = static_cast<size_t>(runtime::HostState::compile);
  for (const RankFigures& f : ranks) {
    const auto& walls = f.sums.step_wall_ns;
    if (step_ns.size() < walls.size()) step_ns.resize(walls.size(), 0);
    for (size_t i = 0; i < walls.size(); ++i) step_ns[i] = std::max(step_ns[i], walls[i]);
    const runtime::StepRecord& t = f.sums.sum;
    busy += t.device_busy_ns;
    comm_wait += t.host_ns[static_cast<size_t>(runtime::HostState::comm_wait)];
    compile += t.host_ns[compile_state] + f.startup.host_ns[compile_state];
    compiles += t.counts.compiles + f.startup.counts.compiles;
    collective += f.collective_ns;
    exposed += f.exposed_ns;
    overlapped += f.overlapped_ns;
  }
  int64_t wall = 0;
  for (int64_t ns : step_ns) wall += ns;
  out["whole_run"] = {{"wall_ns", wall},
                      {"step_wall_ns", step_ns},
                      {"device_busy_ns", busy},
                      {"comm_wait_ns", comm_wait},
                      {"collective_ns", collective},
                      {"comm_exposed_ns", exposed},
                      {"comm_overlapped_ns", overlapped},
                      {"compile_ns", compile},
                      {"compiles", compiles},
                      {"link_bytes", link_bytes(system)}};
  ordered_json rows = ordered_json::array();
  for (const RankFigures& f : ranks) {
    const runtime::RankContext& c = f.rank;
    ordered_json row = {{"rank", c.rank},
                        {"chip", c.chip},
                        {"core", c.core},
                        {"tp_rank", c.tp_rank},
                        {"pp_rank", c.pp_rank},
                        {"dp_rank", c.dp_rank},
                        {"collective_ns", f.collective_ns},
                        {"comm_exposed_ns", f.exposed_ns},
                        {"comm_overlapped_ns", f.overlapped_ns}};
    row["startup_compile_ns"] = f.startup.host_ns[compile_state];
    row["startup_compiles"] = f.startup.counts.compiles;
    put_figures(row, f.sums.sum);
    rows.push_back(row);
  }
  out["ranks"] = rows;
  return out;
}

}  // namespace wallsim::driver
