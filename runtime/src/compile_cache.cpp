// The compile cache and the on-disk plan cache.
#include "wallsim/runtime/compile_cache.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/signature.h"
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
    drop_body(*victim.second, false);  // a launch still running holds its own reference
    if (victim.second->m_packed) {
      m_packed_bytes -= victim.second->m_packed->bytes();
      victim.second->m_packed.reset();
    }
    ++evicted;
  }
  return evicted;
}

namespace {

// The host memory a plan body holds: its instruction arrays and each instruction's semaphore
// lists (with the allocator's 16 bytes per block), its buffers' and nodes' declarations.
int64_t plan_body_bytes(const isa::Plan& plan) {
  auto block = [](size_t bytes) { return bytes ? static_cast<int64_t>(bytes) + 16 : 0; };
  int64_t bytes = sizeof(isa::Plan);
  for (const isa::Stream& s : plan.streams) {
    bytes += sizeof(isa::Stream) + block(s.instructions.capacity() * sizeof(isa::Instruction));
    for (const isa::Instruction& in : s.instructions) {
      bytes += block(in.waits.capacity() * sizeof(isa::SemWait)) +
               block(in.signals.capacity() * sizeof(isa::SemSignal));
    }
  }
  bytes += static_cast<int64_t>(plan.buffers.size() * sizeof(isa::BufferDecl) +
                                plan.nodes.size() * sizeof(isa::NodeInfo) +
                                plan.tensors.size() * sizeof(isa::TensorDecl));
  return bytes;
}

}  // namespace

void CompileCache::hold_body(const std::shared_ptr<CompiledPlan>& c) {
  if (c->m_body_at) {
    m_bodies.splice(m_bodies.end(), m_bodies, *c->m_body_at);
  } else {
    c->m_body_bytes = plan_body_bytes(*c->plan);
    c->m_body_at = m_bodies.insert(m_bodies.end(), c);
    m_body_bytes += c->m_body_bytes;
  }
  while (m_body_bytes > m_body_budget && m_bodies.size() > 1) drop_body(*m_bodies.front(), true);
}

bool CompileCache::restore(CompiledPlan& c) {
  if (c.plan) return true;
  if (!c.m_packed) return false;
  c.plan = std::make_shared<const isa::Plan>(c.m_packed->unpack());
  return true;
}

void CompileCache::drop_body(CompiledPlan& c, bool keep) {
  if (!c.m_body_at) return;
  if (keep && !c.m_packed) {
    c.m_packed = std::make_shared<const isa::PackedPlan>(*c.plan);
    m_packed_bytes += c.m_packed->bytes();
  }
  m_bodies.erase(*c.m_body_at);
  c.m_body_at.reset();
  m_body_bytes -= c.m_body_bytes;
  c.plan.reset();
}

const CompileCache::Failure* CompileCache::failure(uint64_t hash) const {
  auto f = m_failed.find(hash);
  return f == m_failed.end() ? nullptr : &f->second;
}

bool CompileCache::note_compile(uint64_t shape_free, uint64_t hash) {
  auto [seen, fresh] = m_shape_free_seen.emplace(shape_free, hash);
  return !fresh && seen->second != hash;
}

namespace {
constexpr const char* kEntryFormat = "wallsim-plan-cache-entry";
constexpr int kEntryVersion = 1;

std::string checksum(const std::string& text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(compiler_stub::fnv1a64(text)));
  return buf;
}
}  // namespace

DiskPlanCache::DiskPlanCache(std::string dir, std::string fingerprint)
    : m_dir(std::move(dir)), m_fingerprint(std::move(fingerprint)) {
  std::error_code ec;
  if (enabled() && std::filesystem::exists(m_dir, ec) &&
      !std::filesystem::is_directory(m_dir, ec)) {
    throw base::InputError("runtime.aot.disk_cache", m_dir + " exists and is not a directory");
  }
}

std::string DiskPlanCache::key(const std::string& sig_text) const {
  return sig_text + "\ncompiler " + m_fingerprint + "\nplan format " +
         std::to_string(isa::kPlanFormatVersion);
}

std::optional<isa::Plan> DiskPlanCache::load(const std::string& hex, const std::string& sig_text,
                                             const isa::ArchSpec& arch) const {
  const std::string f = file(hex);
  std::error_code ec;
  if (!enabled() || !std::filesystem::exists(f, ec)) return std::nullopt;
  // Anything wrong with the entry (unreadable, not a regular file, another key, a checksum that
  // does not match, a plan that does not verify): compile instead, and overwrite it.
  try {
    const base::Json j = base::read_json_file(f, isa::kMaxPlanFileBytes);
    if (!j.is_object() || j.value("format", "") != kEntryFormat ||
        j.value("version", 0) != kEntryVersion || !j.contains("plan") ||
        j.value("key", "") != key(sig_text) ||
        j.value("checksum", "") != checksum(j["plan"].dump())) {
      return std::nullopt;
    }
    isa::PlanSequence seq = isa::plan_sequence_from_json(j["plan"]);
    if (seq.plans.size() != 1 || !isa::verify(seq.plans[0], arch).empty()) return std::nullopt;
    return std::move(seq.plans[0]);
  } catch (const base::InputError&) {
    return std::nullopt;
  }
}

void DiskPlanCache::store(const std::string& hex, const std::string& sig_text,
                          const isa::Plan& plan) const {
  std::error_code ec;
  std::filesystem::create_directories(m_dir, ec);
  if (ec) throw base::InputError("runtime.aot.disk_cache", m_dir + ": " + ec.message());
  isa::PlanSequence seq;
  seq.plans.push_back(plan);
  base::Json j = base::Json::object();
  j["format"] = kEntryFormat;
  j["version"] = kEntryVersion;
  j["key"] = key(sig_text);
  base::Json body = isa::to_json(seq);
  j["checksum"] = checksum(body.dump());
  j["plan"] = std::move(body);
  const std::string path = file(hex), tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump() << "\n";
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      throw base::InputError("runtime.aot.disk_cache", path + ": cannot write the entry");
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw base::InputError("runtime.aot.disk_cache", path + ": cannot write the entry");
  }
}

}  // namespace wallsim::runtime
