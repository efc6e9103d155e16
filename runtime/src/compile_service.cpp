// The compile service: signature, compile cache, disk cache, failures (real or injected),
// tensor binding, the modelled compile latency and the background compiler.
#include "wallsim/runtime/compile_service.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "session_util.h"
#include "wallsim/base/host_memory.h"
#include "wallsim/compiler_stub/cost_model.h"
#include "wallsim/compiler_stub/estimate.h"
#include "wallsim/compiler_stub/signature.h"

namespace wallsim::runtime {

using namespace session_detail;
using sc_core::sc_time;

namespace {

// What the disk plan cache's key holds of the tuning cache (compiler.tune.cache): a plan
// compiled with the cache's answers depends on its contents, not on the file's name (tuning again
// into the same file changes them). Nothing without one; an absent file is an empty cache.
std::string tuning_key(const Config& config) {
  const std::string& path = config.compiler.tune.cache;
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (in) bytes << in.rdbuf();
  return "\ntuning cache " + std::to_string(compiler_stub::fnv1a64(bytes.str()));
}

}  // namespace

CompileService::CompileService(const Config& config, const ExecutionMode& mode,
                               int64_t plan_memory_bytes, bool memory_check, HostTimeline& host,
                               StepLog& log, std::shared_ptr<SharedPlans> shared, int64_t rank)
    : m_config(config),
      m_mode(mode),
      m_memory_check(memory_check),
      m_host(host),
      m_log(log),
      m_arch_fp(compiler_stub::arch_fingerprint(config.chip.arch)),
      m_cache(config.runtime.cache_capacity, plan_memory_bytes),
      m_shared(std::move(shared)),
      m_rank(rank),
      m_disk(mode.uses_disk_cache() ? config.runtime.aot.disk_cache : std::string(),
             // The plan depends on the compiler's options, its build, and the timing figures its
             // schedule search ranks by (isa::CostHints come from the chip's timing section).
             base::write_params(config.compiler).dump() + "\ntiming " +
                 base::write_params(config.chip.timing).dump() + "\nbuild " +
                 compiler_stub::build_id() + tuning_key(config)),
      m_options(config.compiler) {
  m_tuning = setup_tuning(config, m_options, false);
}

sc_time CompileService::background_done(int64_t ns) {
  const sc_time now = sc_core::sc_time_stamp();
  m_compiler_free = std::max(now, m_compiler_free) + sc_time(double(ns), sc_core::SC_NS);
  return m_compiler_free;
}

void CompileService::check_plan_memory(const Graph& sub, const std::vector<int32_t>& ids) const {
  if (!m_memory_check) return;
  const int64_t instructions = compiler_stub::min_plan_instructions(sub, ids, m_config.chip.arch);
  const int64_t need = compiler_stub::min_compile_host_bytes(sub, ids, m_config.chip.arch);
  if (need < base::kUncheckedHostBytes) return;
  base::check_host_memory(need,
                          "the plan for " + group_name(sub, ids) + " (at least " +
                              std::to_string(instructions) + " instructions)",
                          "--no-memory-check");
}

CompileService::Outcome CompileService::compile(const Graph& sub, bool tracing) {
  Outcome out;
  StepRecord& record = m_log.record();
  std::vector<int32_t> ids;
  for (const Node& n : sub.nodes) {
    if (n.op != OpKind::input) ids.push_back(n.id);
  }
  const int64_t inputs = static_cast<int64_t>(sub.nodes.size() - ids.size());
  const bool counted = m_mode.compiles();
  // Finding the plan: a graph hash (lazy modes) or a key of the inputs' shapes (AOT).
  if (counted && !tracing) {
    m_host.charge(HostState::dispatch,
                  m_mode.plan_key_ns(m_config.runtime, static_cast<int64_t>(ids.size()), inputs));
  }
  const auto sig = compiler_stub::group_signature(sub, ids, m_arch_fp);
  if (counted) m_host.charge(HostState::dispatch, m_config.runtime.cache_lookup_ns);
  auto entry = m_entry_of.find(sig.hash);
  if (counted && entry != m_entry_of.end()) m_entries[entry->second].requests++;
  if (std::shared_ptr<CompiledPlan> c = m_cache.find(sig.hash)) {
    if (counted) record.counts.cache_hits++;
    if (counted && entry != m_entry_of.end()) m_entries[entry->second].hits++;
    // The body was dropped: unpacked, or else rebuilt (the same plan), at no modelled cost.
    if (!c->plan) {
      if (!m_cache.restore(*c)) {
        auto again = compiler_stub::compile_graph(sub, m_config.chip.arch,
                                                  compiler_stub::GroupPolicy::whole, {}, m_options);
        auto& cg = std::get<compiler_stub::CompiledGraph>(again);
        m_compiler_seconds += cg.compile_wall_seconds;
        c->plan = std::make_shared<const isa::Plan>(std::move(cg.plans.plans.at(0)));
      }
      ++m_bodies_rebuilt;
    }
    m_cache.hold_body(c);
    out.plan = c;
    return out;
  }
  if (counted) record.counts.cache_misses++;
  // A group that failed before fails again: remembered, not recompiled.
  if (const CompileCache::Failure* f = m_cache.failure(sig.hash)) {
    out.error = f->error;
    out.node = f->node;
    return out;
  }

  // Another rank compiled it (a shared cache): a hit, once that compile is done.
  if (m_shared && counted) {
    auto it = m_shared->plans.find(sig.hash);
    if (it != m_shared->plans.end()) {
      SharedPlans::Entry& e = it->second;
      const int64_t now_ps = HostTimeline::now_ps();
      auto c = std::make_shared<CompiledPlan>(*e.plan);
      const bool foreground = !(m_config.runtime.compile_in_background && !tracing);
      if (e.foreground && foreground && e.requested_ps == now_ps && e.ready_ps > now_ps &&
          m_rank < e.compiler_rank) {
        // Requested at the same picosecond by a lower rank: the compile is this rank's. The
        // compiler still waits in it (ready_ps is ahead), so its step record is the same.
        e.compiler->yield_compile(sig.hash);
        if (e.trace_args) *e.trace_args = traces::TraceArgs();
        count_compile(record, sub, sig.hash, sig.shape_free, sig.hex(), *c, e.compile_ns);
        traces::TraceArgs args;
        std::string ops;
        e.compiler_rank = m_rank;
        e.compiler = this;
        e.trace_args = m_host.traced() ? &args : nullptr;
        charge_compile(sub, ids, sig.hex(), *c, e.compile_ns, args, ops);
        record.counts.cache_evictions += m_cache.insert(sig.hash, c);
        m_cache.hold_body(c);
        out.plan = c;
        return out;
      }
      const int64_t wait_ps = e.ready_ps - now_ps;
      if (wait_ps > 0) m_host.charge(HostState::compile, (wait_ps + 999) / 1000);
      record.counts.cache_misses--;
      record.counts.cache_hits++;
      record.counts.cache_evictions += m_cache.insert(sig.hash, c);
      m_cache.hold_body(c);
      out.plan = c;
      return out;
    }
  }
  // A plan compiled by an earlier run is loaded from disk instead (a hit, at a load cost).
  std::variant<compiler_stub::CompiledGraph, compiler_stub::CompileError> result;
  bool loaded = false;
  if (std::optional<isa::Plan> plan = m_disk.load(sig.hex(), sig.text, m_config.chip.arch)) {
    compiler_stub::CompiledGraph cg;
    cg.plans.plans.push_back(std::move(*plan));
    cg.groups.push_back({});
    cg.groups.back().instructions = cg.plans.plans[0].instruction_count();
    result = std::move(cg);
    loaded = true;
    record.counts.cache_misses--;
    record.counts.cache_hits++;
    record.counts.disk_hits++;
    m_host.charge(HostState::other,
                  static_cast<int64_t>(std::llround(m_config.runtime.aot.cache_load_ms * 1e6)));
  }
  if (!loaded) {
    if (auto why = injected_failure(sub, ids)) {
      result = *why;
    } else {
      check_plan_memory(sub, ids);
      result = compiler_stub::compile_graph(sub, m_config.chip.arch,
                                            compiler_stub::GroupPolicy::whole, {}, m_options);
    }
    if (auto* ok = std::get_if<compiler_stub::CompiledGraph>(&result))
      m_compiler_seconds += ok->compile_wall_seconds;
  }
  const auto& curve = m_config.runtime.compile_cost.active();
  if (auto* err = std::get_if<compiler_stub::CompileError>(&result)) {
    if (counted) {
      record.counts.compiles++;
      record.counts.compile_failures++;
      m_host.charge(
          HostState::compile,
          static_cast<int64_t>(std::llround(
              compiler_stub::compile_latency_ms(
                  curve, compiler_stub::CompileWork{static_cast<int64_t>(ids.size()), 0, 0}) *
              1e6)));
    }
    out.error = err->message();
    out.node = err->node;
    m_cache.remember_failure(sig.hash, {out.error, out.node});
    return out;
  }
  auto& cg = std::get<compiler_stub::CompiledGraph>(result);
  auto c = std::make_shared<CompiledPlan>();
  c->plan = std::make_shared<const isa::Plan>(std::move(cg.plans.plans.at(0)));
  c->stats = cg.groups.at(0);
  c->nodes = static_cast<int64_t>(ids.size());
  c->macs = macs_of(sub, ids);
  // Bind the plan's tensors: group inputs, group outputs, or scratch (allocated per launch).
  std::map<std::string, PlanBinding> role;
  size_t k_in = 0;
  for (const Node& n : sub.nodes) {
    if (n.op == OpKind::input) role[n.name] = PlanBinding::input(k_in++);
  }
  for (size_t k = 0; k < sub.outputs.size(); ++k) {
    const std::string name = compiler_stub::value_name(sub, sub.outputs[k]);
    if (!role.count(name)) role[name] = PlanBinding::output(k);
  }
  for (const auto& t : c->plan->tensors) {
    auto it = role.find(t.name);
    c->binding.push_back(it != role.end() ? it->second : PlanBinding::scratch());
  }
  if (!loaded && m_disk.enabled()) m_disk.store(sig.hex(), sig.text, *c->plan);
  if (counted && !loaded) {
    const compiler_stub::CompileWork work{c->nodes, c->stats.instructions, c->stats.spill_bytes};
    const int64_t ns =
        static_cast<int64_t>(std::llround(compiler_stub::compile_latency_ms(curve, work) * 1e6));
    count_compile(record, sub, sig.hash, sig.shape_free, sig.hex(), *c, ns);
    const bool background = m_config.runtime.compile_in_background && !tracing;
    traces::TraceArgs args;
    std::string ops;
    if (m_shared) {
      // A pristine copy: each rank's cache keeps its own entry (and drops its own bodies).
      auto copy = std::make_shared<CompiledPlan>();
      copy->plan = c->plan;
      copy->stats = c->stats;
      copy->nodes = c->nodes;
      copy->binding = c->binding;
      copy->macs = c->macs;
      const int64_t now_ps = HostTimeline::now_ps();
      SharedPlans::Entry& e = m_shared->plans[sig.hash];
      e = SharedPlans::Entry{};
      e.plan = copy;
      e.ready_ps = now_ps + ns * 1000;
      e.requested_ps = now_ps;
      e.compile_ns = ns;
      e.compiler_rank = m_rank;
      e.foreground = !background;
      e.compiler = this;
      e.trace_args = m_host.traced() ? &args : nullptr;
    }
    if (background) {
      out.background_ns = ns;  // the caller holds the launch behind the compiler
    } else {
      charge_compile(sub, ids, sig.hex(), *c, ns, args, ops);
    }
  }
  // Into the cache; the least recently used plan leaves when it is full.
  record.counts.cache_evictions += m_cache.insert(sig.hash, c);
  m_cache.hold_body(c);
  out.plan = c;
  return out;
}

void CompileService::count_compile(StepRecord& record, const Graph& sub, uint64_t hash,
                                   uint64_t shape_free, const std::string& hex,
                                   const CompiledPlan& c, int64_t ns) {
  Counted k;
  k.hash = hash;
  k.shape_free = shape_free;
  k.record = &record;
  k.shape_free_fresh = !m_cache.noted(shape_free);
  if (auto it = m_entry_of.find(hash); it != m_entry_of.end()) k.entry_before = it->second;
  if (auto it = m_latest_of_shape_free.find(shape_free); it != m_latest_of_shape_free.end())
    k.latest_before = it->second;
  record.counts.compiles++;
  k.recompile = m_cache.note_compile(shape_free, hash) && m_log.in_step();
  if (k.recompile) record.counts.recompiles++;
  const size_t recompiles_before = m_recompiles.size();
  note_entry(sub, hash, shape_free, hex, c, ns, k.recompile);
  k.recompile_logged = m_recompiles.size() > recompiles_before;
  m_counted = k;
}

void CompileService::yield_compile(uint64_t hash) {
  Counted& k = m_counted;
  if (k.hash != hash || !k.record || m_entries.empty())
    throw std::logic_error("shared compile taken over from a rank that did not count it last");
  StepRecord& record = *k.record;
  record.counts.compiles--;
  record.counts.cache_misses--;
  record.counts.cache_hits++;
  if (k.recompile) record.counts.recompiles--;
  if (k.recompile_logged) m_recompiles.pop_back();
  m_entries.pop_back();
  if (k.entry_before) {
    m_entry_of[hash] = *k.entry_before;
  } else {
    m_entry_of.erase(hash);
  }
  if (k.latest_before) {
    m_latest_of_shape_free[k.shape_free] = *k.latest_before;
  } else {
    m_latest_of_shape_free.erase(k.shape_free);
  }
  if (k.shape_free_fresh) m_cache.forget_compile(k.shape_free);
  k = Counted{};
}

void CompileService::charge_compile(const Graph& sub, const std::vector<int32_t>& ids,
                                    const std::string& hex, const CompiledPlan& c, int64_t ns,
                                    traces::TraceArgs& args, std::string& ops) {
  if (!m_host.traced()) {
    m_host.charge(HostState::compile, ns);
    return;
  }
  // Modelled figures only: wall-clock compile times stay in stats.json's `measured`.
  ops = op_list(sub, ids);
  args.add("plan", c.plan->name)
      .add("nodes", c.nodes)
      .add("ops", ops)
      .add("signature", hex)
      .add("instructions", c.stats.instructions)
      .add("modelled_ns", ns);
  m_host.charge(HostState::compile, ns, &args);
}

void CompileService::note_entry(const Graph& sub, uint64_t hash, uint64_t shape_free,
                                const std::string& hex, const CompiledPlan& c, int64_t compile_ns,
                                bool recompile) {
  CacheEntryRecord e;
  e.signature = hex;
  e.plan = c.plan->name;
  e.step = m_log.current_index();
  e.work = {c.nodes, c.stats.instructions, c.stats.spill_bytes};
  e.compile_ns = compile_ns;
  e.requests = 1;  // the lookup that missed
  for (const Node& n : sub.nodes) e.types.push_back(n.type);
  auto prev = m_latest_of_shape_free.find(shape_free);
  if (recompile && prev != m_latest_of_shape_free.end()) {
    const CacheEntryRecord& p = m_entries[prev->second];
    RecompileRecord r{e.step, e.plan, hex, p.signature, "shapes differ"};
    for (size_t k = 0; k < e.types.size() && k < p.types.size(); ++k) {
      const auto& now = e.types[k].dims;
      const auto& was = p.types[k].dims;
      if (now == was) continue;
      const Node& n = sub.nodes[k];
      std::string where = n.op == OpKind::input
                              ? "input " + n.name
                              : "node " + std::to_string(k) + " (" +
                                    std::string(compiler_stub::name_of(n.op)) + ")";
      if (now.size() != was.size()) {
        r.reason =
            where + " rank " + std::to_string(was.size()) + " -> " + std::to_string(now.size());
      } else {
        for (size_t d = 0; d < now.size(); ++d) {
          if (now[d] == was[d]) continue;
          r.reason = where + " dim " + std::to_string(d) + ": " + compiler_stub::to_string(was[d]) +
                     " -> " + compiler_stub::to_string(now[d]);
          break;
        }
      }
      break;
    }
    m_recompiles.push_back(std::move(r));
  }
  m_entry_of[hash] = m_entries.size();
  m_latest_of_shape_free[shape_free] = m_entries.size();
  m_entries.push_back(std::move(e));
}

std::optional<compiler_stub::CompileError> CompileService::injected_failure(
    const Graph& sub, const std::vector<int32_t>& ids) const {
  const InjectConfig& inject = m_config.runtime.inject;
  // A fail_ops op is rejected inside a fused group; alone it compiles (a per-op kernel).
  for (int32_t id : ids) {
    const Node& n = *sub.find(id);
    for (OpKind op : inject.fail_ops) {
      if (n.op == op && ids.size() > 1) {
        return compiler_stub::CompileError{
            n.id, std::string(compiler_stub::name_of(op)),
            "injected failure: the op is not supported inside a fused group"};
      }
    }
  }
  if (inject.fail_groups_over > 0 && static_cast<int64_t>(ids.size()) > inject.fail_groups_over) {
    return compiler_stub::CompileError{
        -1, "",
        "injected failure: a group of " + std::to_string(ids.size()) +
            " ops does not fit on chip (runtime.inject.fail_groups_over is " +
            std::to_string(inject.fail_groups_over) + ")"};
  }
  return std::nullopt;
}

}  // namespace wallsim::runtime
