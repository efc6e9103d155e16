// The compile cache and the on-disk plan cache.
#include "wallsim/runtime/compile_cache.h"

#include <filesystem>

#include "wallsim/base/params.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"

namespace wallsim::runtime {

std::shared_ptr<CompiledPlan> CompileCache::find(uint64_t hash) {
  auto hit = m_index.find(hash);
  if (hit == m_index.end()) return nullptr;
  m_lru.splice(m_lru.end(), m_lru, hit->second);
  return hit->second->second;
}

int64_t CompileCache::insert(uint64_t hash, const std::shared_ptr<CompiledPlan>& c) {
  m_lru.emplace_back(hash, c);
  m_index[hash] = std::prev(m_lru.end());
  int64_t evicted = 0;
  while (static_cast<int64_t>(m_lru.size()) > m_capacity) {
    auto victim = m_lru.front();
    m_index.erase(victim.first);
    m_lru.pop_front();
    drop_body(*victim.second);  // a launch still running holds its own reference
    ++evicted;
  }
  return evicted;
}

void CompileCache::hold_body(const std::shared_ptr<CompiledPlan>& c) {
  if (c->m_body_at) {
    m_bodies.splice(m_bodies.end(), m_bodies, *c->m_body_at);
  } else {
    c->m_body_bytes =
        static_cast<int64_t>(sizeof(isa::Plan)) +
        c->plan->instruction_count() * static_cast<int64_t>(sizeof(isa::Instruction)) +
        static_cast<int64_t>(c->plan->buffers.size() * sizeof(isa::BufferDecl));
    c->m_body_at = m_bodies.insert(m_bodies.end(), c);
    m_body_bytes += c->m_body_bytes;
  }
  while (m_body_bytes > m_body_budget && m_bodies.size() > 1) drop_body(*m_bodies.front());
}

void CompileCache::drop_body(CompiledPlan& c) {
  if (!c.m_body_at) return;
  m_bodies.erase(*c.m_body_at);
  c.m_body_at.reset();
  m_body_bytes -= c.m_body_bytes;
  c.plan.reset();
}

const std::string* CompileCache::failure(uint64_t hash) const {
  auto f = m_failed.find(hash);
  return f == m_failed.end() ? nullptr : &f->second;
}

bool CompileCache::note_compile(uint64_t shape_free, uint64_t hash) {
  auto [seen, fresh] = m_shape_free_seen.emplace(shape_free, hash);
  return !fresh && seen->second != hash;
}

std::optional<isa::Plan> DiskPlanCache::load(const std::string& hex,
                                             const isa::ArchSpec& arch) const {
  const std::string f = file(hex);
  if (!enabled() || !std::filesystem::exists(f)) return std::nullopt;
  try {
    isa::PlanSequence seq = isa::read_plan_file(f);
    if (seq.plans.size() != 1 || !isa::verify(seq.plans[0], arch).empty()) return std::nullopt;
    return std::move(seq.plans[0]);
  } catch (const base::InputError&) {
    return std::nullopt;  // unreadable: compile instead, and overwrite it
  }
}

void DiskPlanCache::store(const std::string& hex, const isa::Plan& plan) const {
  std::filesystem::create_directories(m_dir);
  isa::PlanSequence seq;
  seq.plans.push_back(plan);
  isa::write_plan_file(seq, file(hex));
}

}  // namespace wallsim::runtime
