// CompileCache: the runtime's compiled plans by group signature — least-recently-used
// eviction, remembered failures, recompile detection, a memory budget for plan bodies and the
// on-disk plan cache. Plain C++: no SystemC, no host time (the Session charges the costs).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wallsim/compiler_stub/lower.h"
#include "wallsim/isa/arch_spec.h"
#include "wallsim/isa/plan.h"
#include "wallsim/isa/plan_pack.h"

namespace wallsim::runtime {

// How one plan tensor binds at launch: the group's k-th input, its k-th output, or scratch
// allocated per launch.
struct PlanBinding {
  enum class Kind : uint8_t { input, output, scratch };
  Kind kind = Kind::scratch;
  size_t index = 0;  // input or output position (unused for scratch)
  static PlanBinding input(size_t k) { return {Kind::input, k}; }
  static PlanBinding output(size_t k) { return {Kind::output, k}; }
  static PlanBinding scratch() { return {Kind::scratch, 0}; }
};

// A compiled group: its plan and how the plan's tensors bind to device tensors.
struct CompiledPlan {
  // The plan body: null while dropped to bound the simulator's memory (the modelled cache entry
  // stays, with the body packed; a hit unpacks it, CompileCache::restore).
  std::shared_ptr<const isa::Plan> plan;
  compiler_stub::LowerStats stats;
  int64_t nodes = 0;
  std::vector<PlanBinding> binding;  // per plan tensor
  double macs = 0;

 private:
  friend class CompileCache;
  int64_t m_body_bytes = 0;
  std::optional<std::list<std::shared_ptr<CompiledPlan>>::iterator> m_body_at;
  std::shared_ptr<const isa::PackedPlan> m_packed;  // made when the body is first dropped
};

class CompileCache {
 public:
  // `capacity`: plans kept (the modelled cache); `body_budget_bytes`: simulator memory for plan
  // bodies (over it the least recently used bodies are dropped; rebuilt on their next hit).
  CompileCache(int64_t capacity, int64_t body_budget_bytes)
      : m_capacity(capacity), m_body_budget(body_budget_bytes) {}

  // The cached plan for `hash` (now the most recently used), or null. Its body may be dropped:
  // the caller rebuilds it, then calls hold_body().
  std::shared_ptr<CompiledPlan> find(uint64_t hash);
  // Caches `c` as the most recently used; returns how many plans were evicted to make room.
  int64_t insert(uint64_t hash, const std::shared_ptr<CompiledPlan>& c);
  // Keeps `c`'s body (most recently used), dropping the oldest bodies over the budget: a
  // dropped body is kept packed (isa::PackedPlan, a fifth to a tenth of its size).
  void hold_body(const std::shared_ptr<CompiledPlan>& c);
  // Unpacks a dropped body of a cached plan; false when it has none packed (the caller
  // compiles the group again).
  bool restore(CompiledPlan& c);

  // Failed signatures fail again without a compile: the compiler's error and the group-local
  // node it named (-1: the group).
  struct Failure {
    std::string error;
    int32_t node = -1;
  };
  void remember_failure(uint64_t hash, Failure f) { m_failed.emplace(hash, std::move(f)); }
  const Failure* failure(uint64_t hash) const;

  // Records a compile of (shape-free, full) signatures: true if the same group was compiled
  // before at other shapes (a recompile).
  bool note_compile(uint64_t shape_free, uint64_t hash);
  // Whether a compile of the shape-free signature was noted; forgets it (a compile undone).
  bool noted(uint64_t shape_free) const { return m_shape_free_seen.count(shape_free) != 0; }
  void forget_compile(uint64_t shape_free) { m_shape_free_seen.erase(shape_free); }

  int64_t size() const { return static_cast<int64_t>(m_lru.size()); }
  int64_t body_bytes() const { return m_body_bytes; }
  int64_t packed_bytes() const { return m_packed_bytes; }

 private:
  // Drops `c`'s body; packs it first when `keep` (the entry stays cached).
  void drop_body(CompiledPlan& c, bool keep);

  int64_t m_capacity;
  int64_t m_body_budget;
  std::list<std::pair<uint64_t, std::shared_ptr<CompiledPlan>>> m_lru;  // least recent first
  std::unordered_map<uint64_t, decltype(m_lru)::iterator> m_index;
  std::unordered_map<uint64_t, uint64_t> m_shape_free_seen;  // shape-free hash -> full hash
  std::unordered_map<uint64_t, Failure> m_failed;            // failed signature -> its error
  std::list<std::shared_ptr<CompiledPlan>> m_bodies;         // least recent first
  int64_t m_body_bytes = 0;
  int64_t m_packed_bytes = 0;
};

// Plans kept across runs in a directory, one file per signature. Empty directory: none.
// An entry carries its full key (the group signature's text, which holds the shapes and the
// arch fingerprint; the compiler options; the plan format version) and a checksum of the plan:
// an entry copied over another, edited or truncated is not used (the group is compiled and the
// entry rewritten).
class DiskPlanCache {
 public:
  // `fingerprint`: what else the plans depend on (the compiler options and
  // compiler_stub::build_id()), as text. Throws
  // base::InputError when `dir` exists and is not a directory.
  DiskPlanCache(std::string dir, std::string fingerprint);
  bool enabled() const { return !m_dir.empty(); }
  // The plan stored for signature `sig_text` (file named by `hex`), if its file is an entry for
  // exactly this key, its checksum matches and it holds one plan that verifies on `arch`.
  std::optional<isa::Plan> load(const std::string& hex, const std::string& sig_text,
                                const isa::ArchSpec& arch) const;
  void store(const std::string& hex, const std::string& sig_text, const isa::Plan& plan) const;

 private:
  std::string file(const std::string& hex) const { return m_dir + "/" + hex + ".plan.json"; }
  std::string key(const std::string& sig_text) const;
  std::string m_dir;
  std::string m_fingerprint;
};

}  // namespace wallsim::runtime
