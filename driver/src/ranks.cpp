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

// A rank's time in collectives with no compute engine of its core busy, and with one busy
// (sim/comm_overlap.h), in whole ns.
int64_t exposed_ns(runtime::Session& s) {
  return s.device_core().comm_overlap().exposed_ps() / 1000;
}
int64_t overlapped_ns(runtime::Session& s) {
  return s.device_core().comm_overlap().overlapped_ps() / 1000;
}

// Whether the ranks are one SPMD class, or why not; every rank is simulated (folded runs are
// not built yet: issue 39 steps 6-8).
ordered_json fold_section(const runtime::FoldDecision& fold, int64_t world) {
  ordered_json out = {{"eligible", fold.eligible}};
  if (!fold.eligible) out["why_not"] = fold.why_not;
  out["classes"] = fold.classes();
  if (fold.eligible) {
    std::vector<int64_t> sizes(fold.representatives.size(), 0);
    for (int64_t c : fold.class_of) ++sizes[static_cast<size_t>(c)];
    out["representatives"] = fold.representatives;
    out["class_sizes"] = sizes;
  }
  out["simulated_ranks"] = world;
  return out;
}

}  // namespace

ordered_json distributed_section(const runtime::ProcessGroup& group,
                                 const std::vector<runtime::Session*>& sessions,
                                 const std::vector<RankSums>& sums, sim::System& system,
                                 bool shared_cache, const runtime::FoldDecision& fold) {
  const runtime::ParallelSizes& s = group.sizes();
  ordered_json out = {{"world", group.world()},
                      {"tp", s.tp},
                      {"pp", s.pp},
                      {"dp", s.dp},
                      {"chips", system.chips()},
                      {"compile_cache", shared_cache ? "shared" : "private"},
                      {"fold", fold_section(fold, group.world())}};
  // The whole run: a step ends when its slowest rank ends.
  std::vector<int64_t> step_ns;
  int64_t busy = 0, comm_wait = 0, collective = 0, exposed = 0, overlapped = 0, compile = 0,
          compiles = 0;
  for (size_t r = 0; r < sums.size(); ++r) {
    const auto& walls = sums[r].step_wall_ns;
    if (step_ns.size() < walls.size()) step_ns.resize(walls.size(), 0);
    for (size_t i = 0; i < walls.size(); ++i) step_ns[i] = std::max(step_ns[i], walls[i]);
    const runtime::StepRecord& t = sums[r].sum;
    busy += t.device_busy_ns;
    comm_wait += t.host_ns[static_cast<size_t>(runtime::HostState::comm_wait)];
    compile +=
        t.host_ns[static_cast<size_t>(runtime::HostState::compile)] +
        sessions[r]->startup_record().host_ns[static_cast<size_t>(runtime::HostState::compile)];
    compiles += t.counts.compiles + sessions[r]->startup_record().counts.compiles;
    collective += sessions[r]->collective_ns();
    exposed += exposed_ns(*sessions[r]);
    overlapped += overlapped_ns(*sessions[r]);
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
  ordered_json ranks = ordered_json::array();
  for (size_t r = 0; r < sums.size(); ++r) {
    const runtime::RankContext& c = sessions[r]->rank();
    ordered_json row = {{"rank", c.rank},
                        {"chip", c.chip},
                        {"core", c.core},
                        {"tp_rank", c.tp_rank},
                        {"pp_rank", c.pp_rank},
                        {"dp_rank", c.dp_rank},
                        {"collective_ns", sessions[r]->collective_ns()},
                        {"comm_exposed_ns", exposed_ns(*sessions[r])},
                        {"comm_overlapped_ns", overlapped_ns(*sessions[r])}};
    const runtime::StepRecord& st = sessions[r]->startup_record();
    row["startup_compile_ns"] = st.host_ns[static_cast<size_t>(runtime::HostState::compile)];
    row["startup_compiles"] = st.counts.compiles;
    put_figures(row, sums[r].sum);
    ranks.push_back(row);
  }
  out["ranks"] = ranks;
  return out;
}

}  // namespace wallsim::driver
