// Reading and writing plan files: strict JSON with paths in every error, exact round trips.
#include "wallsim/isa/plan_io.h"

#include "wallsim/base/file_write.h"
#include "wallsim/base/json_object.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace wallsim::isa {

using base::abbreviate;
using base::InputError;
using base::Json;
using base::json_index;
using base::JsonObject;
using base::read_json_file;
namespace {

// Bounds that keep all later arithmetic far from overflow.
constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr int64_t kMaxOffset = int64_t{1} << 48;
constexpr int64_t kMaxCommSize = (int64_t{1} << 15) - 1;  // ranks of a communicator

using Obj = JsonObject;

std::string idx(const std::string& path, size_t i) { return json_index(path, i); }

const Json& pair_at(const Json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 2) {
    throw InputError(path, "expected a two-element array, got " + abbreviate(v));
  }
  return v;
}

template <class E, class Parse>
E parse_enum(const Json& v, const std::string& path, Parse parse, std::string_view what) {
  std::string s = Obj::as_str(v, path);
  auto e = parse(s);
  if (!e) throw InputError(path, "unknown " + std::string(what) + " \"" + s + "\"");
  return *e;
}

// ---- reading ---------------------------------------------------------------------------------

class PlanReader {
 public:
  explicit PlanReader(Plan& plan) : m_plan(plan) {}

  void read(const Json& j, const std::string& path) {
    Obj o(j, path);
    m_plan.name = o.str("name");
    if (const Json* a = o.array_opt("scalars")) {
      for (size_t i = 0; i < a->size(); ++i) read_scalar((*a)[i], idx(o.at("scalars"), i));
    }
    if (const Json* a = o.array_opt("comms")) {
      for (size_t i = 0; i < a->size(); ++i) read_comm((*a)[i], idx(o.at("comms"), i));
    }
    if (const Json* a = o.array_opt("semaphores")) {
      for (size_t i = 0; i < a->size(); ++i) {
        std::string p = idx(o.at("semaphores"), i);
        std::string name = Obj::as_str((*a)[i], p);
        if (!m_sems.emplace(name, static_cast<int>(m_plan.semaphores.size())).second)
          throw InputError(p, "duplicate semaphore \"" + name + "\"");
        m_plan.semaphores.push_back(name);
      }
    }
    if (const Json* a = o.array_opt("tensors")) {
      for (size_t i = 0; i < a->size(); ++i) read_tensor((*a)[i], idx(o.at("tensors"), i));
    }
    if (const Json* a = o.array_opt("buffers")) {
      for (size_t i = 0; i < a->size(); ++i) read_buffer((*a)[i], idx(o.at("buffers"), i));
    }
    if (const Json* a = o.array_opt("nodes")) {
      for (size_t i = 0; i < a->size(); ++i) {
        Obj n((*a)[i], idx(o.at("nodes"), i));
        NodeInfo info;
        info.id = static_cast<int32_t>(n.integer("id", 0, INT32_MAX));
        info.name = n.str("name");
        info.op = n.str("op");
        n.finish();
        m_plan.nodes.push_back(std::move(info));
      }
    }
    const Json& streams = o.array("streams");
    for (size_t i = 0; i < streams.size(); ++i) read_stream(streams[i], idx(o.at("streams"), i));
    o.finish();
  }

 private:
  void read_scalar(const Json& j, const std::string& path) {
    Obj o(j, path);
    ScalarDecl s;
    s.name = o.str("name");
    s.min = o.integer("min", -kMaxOffset, kMaxOffset);
    s.max = o.integer("max", -kMaxOffset, kMaxOffset);
    o.finish();
    if (!m_scalars.emplace(s.name, static_cast<int>(m_plan.scalars.size())).second)
      o.fail("duplicate scalar \"" + s.name + "\"");
    if (s.min > s.max)
      o.fail("min " + std::to_string(s.min) + " exceeds max " + std::to_string(s.max));
    m_plan.scalars.push_back(std::move(s));
  }

  void read_comm(const Json& j, const std::string& path) {
    Obj o(j, path);
    CommDecl c;
    c.name = o.str("name");
    c.size = o.integer("size", 1, kMaxCommSize);
    o.finish();
    if (static_cast<int64_t>(m_plan.comms.size()) >= kMaxCommSize) o.fail("too many communicators");
    if (!m_comms.emplace(c.name, static_cast<int>(m_plan.comms.size())).second)
      o.fail("duplicate communicator \"" + c.name + "\"");
    m_plan.comms.push_back(std::move(c));
  }

  void read_tensor(const Json& j, const std::string& path) {
    Obj o(j, path);
    TensorDecl t;
    t.name = o.str("name");
    t.space = parse_enum<MemSpace>(o.req("space"), o.at("space"), parse_mem_space, "memory space");
    if (is_on_chip(t.space))
      throw InputError(o.at("space"), "tensors live in hbm or host; on-chip regions are buffers");
    t.dtype = parse_enum<DType>(o.req("dtype"), o.at("dtype"), parse_dtype, "dtype");
    const Json& shape = o.array("shape");
    for (size_t i = 0; i < shape.size(); ++i) {
      t.shape.push_back(Obj::as_int(shape[i], idx(o.at("shape"), i), 0, kMaxSize));
    }
    t.role = parse_enum<TensorRole>(o.req("role"), o.at("role"), parse_tensor_role, "tensor role");
    o.finish();
    if (m_buffers.count(t.name) ||
        !m_tensors.emplace(t.name, static_cast<int>(m_plan.tensors.size())).second) {
      o.fail("duplicate name \"" + t.name + "\"");
    }
    if (t.elements() > kMaxSize) o.fail("tensor has more than 2^40 elements");
    m_plan.tensors.push_back(std::move(t));
  }

  void read_buffer(const Json& j, const std::string& path) {
    Obj o(j, path);
    BufferDecl b;
    b.name = o.str("name");
    b.space = parse_enum<MemSpace>(o.req("space"), o.at("space"), parse_mem_space, "memory space");
    if (!is_on_chip(b.space))
      throw InputError(o.at("space"), "buffers live in sbuf or psum; off-chip data are tensors");
    const Json& parts = pair_at(o.req("partitions"), o.at("partitions"));
    b.partition_start =
        static_cast<int32_t>(Obj::as_int(parts[0], o.at("partitions[0]"), 0, 1 << 20));
    b.partitions = static_cast<int32_t>(Obj::as_int(parts[1], o.at("partitions[1]"), 1, 1 << 20));
    b.offset_bytes = o.integer_or("offset", 0, kMaxSize, 0);
    b.bytes = o.integer("bytes", 1, kMaxSize);
    o.finish();
    if (m_tensors.count(b.name) ||
        !m_buffers.emplace(b.name, static_cast<int>(m_plan.buffers.size())).second) {
      o.fail("duplicate name \"" + b.name + "\"");
    }
    m_plan.buffers.push_back(std::move(b));
  }

  void read_stream(const Json& j, const std::string& path) {
    Obj o(j, path);
    Stream s;
    s.engine = parse_enum<Engine>(o.req("engine"), o.at("engine"), parse_engine, "engine");
    if (s.engine == Engine::dma) {
      s.name = o.str("name");
      s.dma_engine = static_cast<int32_t>(o.integer("dma_engine", 0, 1 << 20));
    } else {
      s.name = std::string(name_of(s.engine));
    }
    const Json& instrs = o.array("instructions");
    s.instructions.reserve(instrs.size());
    for (size_t i = 0; i < instrs.size(); ++i) {
      s.instructions.push_back(read_instruction(instrs[i], idx(o.at("instructions"), i)));
    }
    o.finish();
    m_plan.streams.push_back(std::move(s));
  }

  Instruction read_instruction(const Json& j, const std::string& path) {
    Obj o(j, path);
    Instruction in;
    in.op = parse_enum<Opcode>(o.req("op"), o.at("op"), parse_opcode, "opcode");
    const OpcodeInfo& oi = info(in.op);
    if (in.uses(F_Dst)) in.dst = read_ap(o.req("dst"), o.at("dst"));
    for (int k = 0; k < 3; ++k) {
      if (in.uses(static_cast<OpField>(F_Src0 << k))) {
        in.src[k] = read_ap(o.req(oi.src_roles[k]), o.at(oi.src_roles[k]));
      }
    }
    if (in.uses(F_Accum)) in.accum = read_ap(o.req("accum"), o.at("accum"));
    if (in.uses(F_Alu))
      in.alu = parse_enum<AluOp>(o.req("alu"), o.at("alu"), parse_alu_op, "alu op");
    if (in.uses(F_Act)) {
      in.act = parse_enum<ActFn>(o.req("act"), o.at("act"), parse_act_fn, "activation function");
      in.scale = o.real_or("scale", 1.0);
      in.bias = o.real_or("bias", 0.0);
    }
    if (in.uses(F_Scalar)) {
      const Json& v = o.req("scalar");
      if (v.is_number()) {
        in.scalar.imm = v.get<double>();
      } else if (v.is_string()) {
        in.scalar.scalar = lookup_scalar(v.get<std::string>(), o.at("scalar"));
      } else {
        throw InputError(o.at("scalar"),
                         "expected a number or a run-time scalar name, got " + abbreviate(v));
      }
    }
    if (in.uses(F_Reverse)) in.reverse = o.boolean_or("reverse", false);
    if (in.uses(F_Value) || in.uses(F_Iota)) {
      const Json& v = o.req("value");
      if (!v.is_number())
        throw InputError(o.at("value"), "expected a number, got " + abbreviate(v));
      in.value = v.get<double>();
    }
    if (in.uses(F_Iota)) {
      in.partition_step = o.real_or("partition_step", 0.0);
      in.step = o.real_or("step", 0.0);
    }
    if (in.uses(F_MatmulFlags)) {
      in.start = o.boolean_or("start", true);
      in.stop = o.boolean_or("stop", true);
    }
    if (in.uses(F_Comm)) {
      const std::string name = Obj::as_str(o.req("comm"), o.at("comm"));
      in.comm = static_cast<int16_t>(find(m_comms, name));
      if (in.comm < 0) throw InputError(o.at("comm"), "no communicator named \"" + name + "\"");
    }
    if (in.uses(F_Peer)) {
      in.peer = static_cast<int16_t>(o.integer("peer", -kMaxCommSize, kMaxCommSize));
    }
    if (const Json* w = o.array_opt("wait")) {
      for (size_t i = 0; i < w->size(); ++i) {
        std::string p = idx(o.at("wait"), i);
        const Json& pr = pair_at((*w)[i], p);
        in.waits.push_back(
            {lookup_semaphore(pr[0], p + "[0]"), Obj::as_int(pr[1], p + "[1]", 0, kMaxOffset)});
      }
    }
    if (const Json* s = o.array_opt("signal")) {
      for (size_t i = 0; i < s->size(); ++i) {
        std::string p = idx(o.at("signal"), i);
        const Json& pr = pair_at((*s)[i], p);
        in.signals.push_back(
            {lookup_semaphore(pr[0], p + "[0]"), Obj::as_int(pr[1], p + "[1]", 1, kMaxOffset)});
      }
    }
    in.node = static_cast<int32_t>(o.integer_or("node", -1, INT32_MAX, -1));
    o.finish();
    return in;
  }

  AccessPattern read_ap(const Json& j, const std::string& path) {
    Obj o(j, path);
    AccessPattern ap;
    std::string name = o.str("buf");
    if (int b = find(m_buffers, name); b >= 0) {
      ap.space = m_plan.buffers[b].space;
      ap.buffer = b;
    } else if (int t = find(m_tensors, name); t >= 0) {
      ap.space = m_plan.tensors[t].space;
      ap.buffer = t;
    } else {
      throw InputError(o.at("buf"), "no buffer or tensor named \"" + name + "\"");
    }
    ap.dtype = parse_enum<DType>(o.req("dtype"), o.at("dtype"), parse_dtype, "dtype");
    if (is_on_chip(ap.space)) {
      const Json& p = pair_at(o.req("partitions"), o.at("partitions"));
      ap.partition_start =
          static_cast<int32_t>(Obj::as_int(p[0], o.at("partitions[0]"), 0, 1 << 20));
      ap.partitions = static_cast<int32_t>(Obj::as_int(p[1], o.at("partitions[1]"), 1, 1 << 20));
    } else {
      const Json& r = pair_at(o.req("rows"), o.at("rows"));
      ap.partitions = static_cast<int32_t>(Obj::as_int(r[0], o.at("rows[0]"), 1, 1 << 30));
      ap.partition_stride = Obj::as_int(r[1], o.at("rows[1]"), -kMaxOffset, kMaxOffset);
    }
    ap.offset = o.integer_or("offset", -kMaxOffset, kMaxOffset, 0);
    if (const Json* f = o.array_opt("free")) {
      if (f->size() > kMaxFreeDims) {
        throw InputError(o.at("free"), "at most " + std::to_string(kMaxFreeDims) +
                                           " free dims, got " + std::to_string(f->size()));
      }
      for (size_t i = 0; i < f->size(); ++i) {
        std::string p = idx(o.at("free"), i);
        const Json& d = pair_at((*f)[i], p);
        ap.free[i] = {Obj::as_int(d[0], p + "[0]", 1, kMaxSize),
                      Obj::as_int(d[1], p + "[1]", -kMaxOffset, kMaxOffset)};
      }
      ap.num_free = static_cast<uint8_t>(f->size());
    }
    if (const Json* s = o.opt("scalar")) {
      std::string p = o.at("scalar");
      const Json& pr = pair_at(*s, p);
      ap.scalar = lookup_scalar(Obj::as_str(pr[0], p + "[0]"), p + "[0]");
      ap.scalar_stride = Obj::as_int(pr[1], p + "[1]", -kMaxOffset, kMaxOffset);
    }
    o.finish();
    return ap;
  }

  int32_t lookup_scalar(const std::string& name, const std::string& path) const {
    int s = find(m_scalars, name);
    if (s < 0) throw InputError(path, "no run-time scalar named \"" + name + "\"");
    return s;
  }
  int32_t lookup_semaphore(const Json& v, const std::string& path) const {
    std::string name = Obj::as_str(v, path);
    int s = find(m_sems, name);
    if (s < 0) throw InputError(path, "no semaphore named \"" + name + "\"");
    return s;
  }

  // Name -> index, so that reading is linear in the declarations (Plan::find_* scan).
  using Index = std::unordered_map<std::string, int>;
  static int find(const Index& m, const std::string& name) {
    auto it = m.find(name);
    return it == m.end() ? -1 : it->second;
  }

  Plan& m_plan;
  Index m_sems, m_scalars, m_comms, m_tensors, m_buffers;
};

// ---- writing ---------------------------------------------------------------------------------

Json pair(const Json& a, const Json& b) { return Json::array({a, b}); }

Json instruction_json(const Instruction& in, const Plan& plan) {
  const OpcodeInfo& oi = info(in.op);
  Json j = Json::object();
  j["op"] = std::string(oi.name);
  if (in.uses(F_Dst)) j["dst"] = to_json(in.dst, plan);
  for (int k = 0; k < 3; ++k) {
    if (in.uses(static_cast<OpField>(F_Src0 << k)))
      j[std::string(oi.src_roles[k])] = to_json(in.src[k], plan);
  }
  if (in.uses(F_Accum)) j["accum"] = to_json(in.accum, plan);
  if (in.uses(F_Alu)) j["alu"] = std::string(name_of(in.alu));
  if (in.uses(F_Act)) {
    j["act"] = std::string(name_of(in.act));
    if (in.scale != 1.0) j["scale"] = in.scale;
    if (in.bias != 0.0) j["bias"] = in.bias;
  }
  if (in.uses(F_Scalar)) {
    j["scalar"] =
        in.scalar.scalar >= 0 ? Json(plan.scalars[in.scalar.scalar].name) : Json(in.scalar.imm);
  }
  if (in.uses(F_Reverse) && in.reverse) j["reverse"] = true;
  if (in.uses(F_Value) || in.uses(F_Iota)) j["value"] = in.value;
  if (in.uses(F_Iota)) {
    if (in.partition_step != 0.0) j["partition_step"] = in.partition_step;
    if (in.step != 0.0) j["step"] = in.step;
  }
  if (in.uses(F_MatmulFlags)) {
    if (!in.start) j["start"] = false;
    if (!in.stop) j["stop"] = false;
  }
  if (in.uses(F_Comm)) j["comm"] = plan.comms[static_cast<size_t>(in.comm)].name;
  if (in.uses(F_Peer)) j["peer"] = in.peer;
  if (!in.waits.empty()) {
    Json w = Json::array();
    for (const auto& x : in.waits) w.push_back(pair(plan.semaphores[x.sem], x.value));
    j["wait"] = std::move(w);
  }
  if (!in.signals.empty()) {
    Json s = Json::array();
    for (const auto& x : in.signals) s.push_back(pair(plan.semaphores[x.sem], x.add));
    j["signal"] = std::move(s);
  }
  if (in.node >= 0) j["node"] = in.node;
  return j;
}

Json plan_json(const Plan& p) {
  Json j = Json::object();
  j["name"] = p.name;
  if (!p.scalars.empty()) {
    Json a = Json::array();
    for (const auto& s : p.scalars) a.push_back({{"name", s.name}, {"min", s.min}, {"max", s.max}});
    j["scalars"] = std::move(a);
  }
  if (!p.comms.empty()) {
    Json a = Json::array();
    for (const auto& c : p.comms) a.push_back({{"name", c.name}, {"size", c.size}});
    j["comms"] = std::move(a);
  }
  if (!p.semaphores.empty()) j["semaphores"] = p.semaphores;
  if (!p.tensors.empty()) {
    Json a = Json::array();
    for (const auto& t : p.tensors) {
      a.push_back({{"name", t.name},
                   {"space", std::string(name_of(t.space))},
                   {"dtype", std::string(name_of(t.dtype))},
                   {"shape", t.shape},
                   {"role", std::string(name_of(t.role))}});
    }
    j["tensors"] = std::move(a);
  }
  if (!p.buffers.empty()) {
    Json a = Json::array();
    for (const auto& b : p.buffers) {
      Json bj = {{"name", b.name},
                 {"space", std::string(name_of(b.space))},
                 {"partitions", pair(b.partition_start, b.partitions)}};
      if (b.offset_bytes != 0) bj["offset"] = b.offset_bytes;
      bj["bytes"] = b.bytes;
      a.push_back(std::move(bj));
    }
    j["buffers"] = std::move(a);
  }
  if (!p.nodes.empty()) {
    Json a = Json::array();
    for (const auto& n : p.nodes) a.push_back({{"id", n.id}, {"name", n.name}, {"op", n.op}});
    j["nodes"] = std::move(a);
  }
  Json streams = Json::array();
  for (const auto& s : p.streams) {
    Json sj = {{"engine", std::string(name_of(s.engine))}};
    if (s.engine == Engine::dma) {
      sj["name"] = s.name;
      sj["dma_engine"] = s.dma_engine;
    }
    Json instrs = Json::array();
    for (const auto& in : s.instructions) instrs.push_back(instruction_json(in, p));
    sj["instructions"] = std::move(instrs);
    streams.push_back(std::move(sj));
  }
  j["streams"] = std::move(streams);
  return j;
}

// Renders `j` on one line with a space after each separator.
void inline_into(const Json& j, std::string& out) {
  if (!j.is_structured()) {
    out += j.dump();
    return;
  }
  bool obj = j.is_object();
  out += obj ? "{" : "[";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ", ";
    first = false;
    if (obj) out += Json(it.key()).dump() + ": ";
    inline_into(*it, out);
  }
  out += obj ? "}" : "]";
}

void format_into(const Json& j, int column, int indent, int width, std::string& out) {
  std::string flat;
  inline_into(j, flat);
  if (!j.is_structured() || j.empty() || column + static_cast<int>(flat.size()) <= width) {
    out += flat;
    return;
  }
  bool obj = j.is_object();
  std::string pad(indent + 2, ' ');
  out += obj ? "{\n" : "[\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out += pad;
    int used = indent + 2;
    if (obj) {
      std::string key = Json(it.key()).dump() + ": ";
      out += key;
      used += static_cast<int>(key.size());
    }
    format_into(*it, used, indent + 2, width, out);
  }
  out += "\n" + std::string(indent, ' ') + (obj ? "}" : "]");
}

}  // namespace

Json to_json(const AccessPattern& ap, const Plan& plan) {
  Json j = Json::object();
  j["buf"] = std::string(plan.target_name(ap));
  j["dtype"] = std::string(name_of(ap.dtype));
  if (is_on_chip(ap.space)) {
    j["partitions"] = pair(ap.partition_start, ap.partitions);
  } else {
    j["rows"] = pair(ap.partitions, ap.partition_stride);
  }
  if (ap.offset != 0) j["offset"] = ap.offset;
  if (ap.num_free) {
    Json f = Json::array();
    for (int d = 0; d < ap.num_free; ++d) f.push_back(pair(ap.free[d].size, ap.free[d].stride));
    j["free"] = std::move(f);
  }
  if (ap.scalar >= 0) j["scalar"] = pair(plan.scalars[ap.scalar].name, ap.scalar_stride);
  return j;
}

PlanSequence plan_sequence_from_json(const Json& j) {
  Obj o(j, "(root)");
  std::string format = o.str("format");
  if (format != "wallsim-plan") {
    throw InputError(o.at("format"), "expected \"wallsim-plan\", got " + abbreviate(format));
  }
  int64_t version = o.integer("version", 0, INT32_MAX);
  if (version != kPlanFormatVersion) {
    throw InputError(o.at("version"), "unsupported plan format version " + std::to_string(version) +
                                          " (this build reads version " +
                                          std::to_string(kPlanFormatVersion) + ")");
  }
  const Json& plans = o.array("plans");
  if (plans.empty()) throw InputError(o.at("plans"), "a plan file holds at least one plan");
  o.finish();
  PlanSequence seq;
  seq.plans.resize(plans.size());
  bool placed = false;
  for (const Json& p : plans) placed = placed || (p.is_object() && p.contains("core"));
  for (size_t i = 0; i < plans.size(); ++i) {
    if (!placed) {
      PlanReader(seq.plans[i]).read(plans[i], idx("plans", i));
      continue;
    }
    Json p = plans[i];
    std::pair<int, int> core{0, 0};
    if (p.is_object() && p.contains("core")) {
      const Json& c = p["core"];
      const bool ok = c.is_array() && c.size() == 2 && c[0].is_number_integer() &&
                      c[1].is_number_integer() && c[0].get<int64_t>() >= 0 &&
                      c[1].get<int64_t>() >= 0 && c[0].get<int64_t>() < (1 << 20) &&
                      c[1].get<int64_t>() < (1 << 20);
      if (!ok)
        throw InputError(idx("plans", i) + ".core", "expected [chip, core], two integers >= 0");
      core = {c[0].get<int>(), c[1].get<int>()};
      p.erase("core");
    }
    PlanReader(seq.plans[i]).read(p, idx("plans", i));
    seq.cores.push_back(core);
  }
  return seq;
}

Json to_json(const PlanSequence& seq) {
  Json j = Json::object();
  j["format"] = "wallsim-plan";
  j["version"] = kPlanFormatVersion;
  Json plans = Json::array();
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    Json p = plan_json(seq.plans[i]);
    if (i < seq.cores.size()) p["core"] = {seq.cores[i].first, seq.cores[i].second};
    plans.push_back(std::move(p));
  }
  j["plans"] = std::move(plans);
  return j;
}

std::string format_json(const Json& j, int width) {
  std::string out;
  format_into(j, 0, 0, width, out);
  out += "\n";
  return out;
}

PlanSequence read_plan_file(const std::string& path) {
  try {
    Json j = read_json_file(path, kMaxPlanFileBytes);
    return plan_sequence_from_json(j);
  } catch (const InputError& e) {
    if (e.path() == path) throw;
    throw InputError(path, e.what());
  }
}

void write_plan_file(const PlanSequence& seq, const std::string& path) {
  base::write_file_atomically(path, format_json(to_json(seq)));
}

}  // namespace wallsim::isa
