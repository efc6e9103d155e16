// Chakra export: retired launches to Chakra nodes, streamed to one file per rank.
#include "wallsim/chakra/export.h"

#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "proto/et_def.pb.h"
#include "wallsim/traces/write_error.h"

namespace wallsim::chakra {

namespace pb = ChakraProtoMsg;
using sc_core::sc_time;

namespace {

int64_t ns(const sc_time& t) { return std::llround(t.to_seconds() * 1e9); }

void attr_bool(pb::Node& n, const char* name, bool v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_bool_val(v);
}
void attr_int64(pb::Node& n, const char* name, int64_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}
void attr_int32(pb::Node& n, const char* name, int32_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int32_val(v);
}
void attr_uint64(pb::Node& n, const char* name, uint64_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_uint64_val(v);
}

// comm_type of a collective opcode (et_def.proto CollectiveCommType); -1: not a COMM_COLL.
int comm_type(isa::Opcode op) {
  switch (op) {
    case isa::Opcode::all_reduce:
      return pb::ALL_REDUCE;
    case isa::Opcode::all_gather:
      return pb::ALL_GATHER;
    case isa::Opcode::reduce_scatter:
      return pb::REDUCE_SCATTER;
    case isa::Opcode::all_to_all:
      return pb::ALL_TO_ALL;
    default:
      return -1;
  }
}

// One collective instruction of a launch, at this rank's arrival and end.
struct Collective {
  const isa::Instruction* in;
  int64_t start_ns, end_ns;
};

}  // namespace

// One rank's file: node ids 0, 1, ... in launch order. Control dependencies follow the core's
// launcher: a launch's first node depends on the last node of the last launch before it that is
// not asynchronous (engines::Launch::async) and, for an asynchronous launch, also on the last
// asynchronous launch's (they run in order on one queue); the nodes of a launch are chained. Data
// dependencies: the last writer of each HBM tensor the launch reads, and the asynchronous launches
// it waited for (engines::Launch::after, recorded by the runtime when it issued the launch).
class RankRecorder {
 public:
  RankRecorder(Exporter& owner, int64_t rank, const std::string& path)
      : m_owner(owner), m_rank(rank), m_path(path), m_out(path, std::ios::binary) {
    if (!m_out) throw traces::WriteError(path, traces::errno_reason(errno));
    pb::GlobalMetadata meta;
    meta.set_version("0.0.4");  // what ASTRA-sim's own generators write; never empty
    const ExportInfo& info = owner.info();
    auto add = [&](const char* name, const std::string& v) {
      auto* a = meta.add_attr();
      a->set_name(name);
      a->set_string_val(v);
    };
    add("generator", "wallsim");
    add("workload", info.workload);
    add("mode", info.mode);
    auto* r = meta.add_attr();
    r->set_name("rank");
    r->set_int64_val(rank);
    auto* w = meta.add_attr();
    w->set_name("world");
    w->set_int64_val(info.world);
    write(meta);
  }

  void record(const engines::Launch& l) {
    const isa::Plan& p = *l.plan;
    // The first node's control dependencies (then each node's the node before it).
    m_ctrl.clear();
    if (m_sync_last) m_ctrl.push_back(*m_sync_last);
    if (l.async && m_async_last && m_async_last != m_sync_last) m_ctrl.push_back(*m_async_last);
    std::sort(m_ctrl.begin(), m_ctrl.end());
    const auto tensor = [&](size_t i) -> const std::string& {
      return i < l.tensor_names.size() && !l.tensor_names[i].empty() ? l.tensor_names[i]
                                                                     : p.tensors[i].name;
    };
    // Data dependencies of the launch: the last writers of what it reads.
    std::vector<uint64_t> reads;
    for (size_t i = 0; i < p.tensors.size(); ++i) {
      const isa::TensorRole role = p.tensors[i].role;
      if (role != isa::TensorRole::input && role != isa::TensorRole::inout) continue;
      const auto it = m_writer.find(tensor(i));
      if (it != m_writer.end()) reads.push_back(it->second);
    }
    for (size_t index : l.after) {
      const auto it = m_async_end.find(index);
      if (it == m_async_end.end())
        throw std::runtime_error("chakra: rank " + std::to_string(m_rank) + " launch " +
                                 std::to_string(l.index) + " waits for launch " +
                                 std::to_string(index) +
                                 ", which is not an asynchronous one before it");
      reads.push_back(it->second);
    }
    std::sort(reads.begin(), reads.end());
    reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
    const std::string base = l.name + "@L" + std::to_string(l.index);
    const int64_t begin = ns(l.launch_begin), end = std::max(begin, ns(l.end_time));

    if (const auto host = host_copy(p)) {
      pb::Node n = node(base, *host, reads);
      n.set_duration_micros(micros_of(end - begin));
      attr_bool(n, "is_cpu_op", false);
      attr_uint64(n, "tensor_size", static_cast<uint64_t>(copy_bytes(p)));
      attr_uint64(n, "duration_ns", static_cast<uint64_t>(end - begin));
      write_node(n);
    } else {
      emit_plan(l, base, begin, end, reads);
    }
    for (size_t i = 0; i < p.tensors.size(); ++i) {
      const isa::TensorRole role = p.tensors[i].role;
      if (role == isa::TensorRole::output || role == isa::TensorRole::inout)
        m_writer[tensor(i)] = m_next - 1;
    }
    if (l.async) {
      m_async_last = m_next - 1;
      m_async_end[static_cast<size_t>(l.index)] = m_next - 1;
      ++m_async_launches;
    } else {
      m_sync_last = m_next - 1;
    }
  }

  // Closes the file; the rank's figures for chakra.json.
  nlohmann::ordered_json finish() {
    m_out.close();
    if (!m_out) throw traces::WriteError(m_path, traces::errno_reason(errno));
    nlohmann::ordered_json by_type = nlohmann::ordered_json::object();
    for (const auto& [t, count] : m_counts) by_type[pb::NodeType_Name(t)] = count;
    nlohmann::ordered_json row = {{"rank", m_rank},
                                  {"nodes", m_next},
                                  {"nodes_by_type", by_type},
                                  {"compute_ns", m_compute_ns},
                                  {"compute_micros", m_compute_micros}};
    // Written only where there were some, so that a run without them writes what it did before.
    if (m_async_launches > 0) row["async_launches"] = m_async_launches;
    return row;
  }

 private:
  // MEM_LOAD_NODE for a copy from host memory, MEM_STORE_NODE for one to it; else none.
  static std::optional<pb::NodeType> host_copy(const isa::Plan& p) {
    if (p.name.rfind("copy_", 0) != 0 || p.tensors.size() != 2) return std::nullopt;
    if (p.tensors[0].space == isa::MemSpace::host) return pb::MEM_LOAD_NODE;
    if (p.tensors[1].space == isa::MemSpace::host) return pb::MEM_STORE_NODE;
    return std::nullopt;
  }
  static int64_t copy_bytes(const isa::Plan& p) {
    return p.tensors[1].elements() * isa::dtype_bytes(p.tensors[1].dtype);
  }

  // COMP segments between the launch's collectives, each collective a COMM node; the plan's
  // FLOPs and DMA bytes shared among the COMP segments by their time. An asynchronous launch is
  // its COMM nodes alone: its launch overhead and gaps ran beside the compute, not as compute.
  void emit_plan(const engines::Launch& l, const std::string& base, int64_t begin, int64_t end,
                 const std::vector<uint64_t>& reads) {
    const isa::Plan& p = *l.plan;
    std::vector<Collective> colls;
    for (size_t s = 0; s < p.streams.size(); ++s) {
      const auto& ins = p.streams[s].instructions;
      for (size_t i = 0; i < ins.size(); ++i) {
        if (!isa::is_collective(ins[i].op)) continue;
        const engines::InstructionTimes& t = l.times[l.stream_offset[s] + i];
        const int64_t a = std::clamp(ns(t.start), begin, end);
        colls.push_back({&ins[i], a, std::clamp(ns(t.end), a, end)});
      }
    }
    std::stable_sort(colls.begin(), colls.end(), [](const Collective& a, const Collective& b) {
      return a.start_ns < b.start_ns;
    });
    // COMP segments: [begin, end] minus the union of the collectives' intervals.
    std::vector<std::pair<int64_t, int64_t>> comp;
    int64_t at = begin;
    for (const Collective& c : colls) {
      if (c.start_ns > at) comp.push_back({at, c.start_ns});
      at = std::max(at, c.end_ns);
    }
    if (end > at) comp.push_back({at, end});
    if (l.async && !colls.empty()) comp.clear();
    if (comp.empty() && colls.empty()) comp.push_back({begin, begin});  // every launch a node
    int64_t comp_ns = 0;
    for (const auto& [a, b] : comp) comp_ns += b - a;
    double macs = 0;
    int64_t bytes = 0;
    for (const engines::NodeTotals& t : l.nodes) {
      macs += t.macs;
      bytes += t.dma_bytes;
    }
    std::vector<uint64_t> deps = reads;  // the first node of the launch carries them
    size_t ci = 0, si = 0;
    int part = 0;
    auto name = [&] { return base + "#" + std::to_string(part++); };
    // Segments and collectives in time order (a segment ends where a collective starts).
    while (si < comp.size() || ci < colls.size()) {
      if (si < comp.size() && (ci == colls.size() || comp[si].first <= colls[ci].start_ns)) {
        const int64_t d = comp[si].second - comp[si].first;
        pb::Node n = node(name(), pb::COMP_NODE, deps);
        n.set_duration_micros(micros_of(d, true));
        const double share = comp_ns > 0 ? double(d) / double(comp_ns) : 0.0;
        attr_bool(n, "is_cpu_op", false);
        attr_int64(n, "num_ops", std::llround(2 * macs * share));
        attr_uint64(n, "tensor_size", static_cast<uint64_t>(std::llround(double(bytes) * share)));
        attr_uint64(n, "duration_ns", static_cast<uint64_t>(d));
        m_compute_ns += d;
        write_node(n);
        ++si;
      } else {
        emit_collective(l, *colls[ci].in, name(), colls[ci].end_ns - colls[ci].start_ns, deps);
        ++ci;
      }
      deps.clear();
    }
  }

  void emit_collective(const engines::Launch& l, const isa::Instruction& in,
                       const std::string& name, int64_t duration,
                       const std::vector<uint64_t>& deps) {
    // The communicator's ranks, as bound at launch.
    std::vector<int64_t> members;
    for (const auto& [chip, core] : l.comm_ranks.at(static_cast<size_t>(in.comm)))
      members.push_back(m_owner.info().rank_of(chip, core));
    const int64_t size = static_cast<int64_t>(members.size());
    const auto me = std::find(members.begin(), members.end(), m_rank);
    if (me == members.end())
      throw std::runtime_error("chakra: rank " + std::to_string(m_rank) + " runs " + name +
                               " outside its communicator");
    const int64_t my = me - members.begin();
    if (in.op == isa::Opcode::permute) {
      // Every rank sends to (my + peer) and receives from (my - peer): a SEND and a RECV.
      const int64_t to = members[static_cast<size_t>(((my + in.peer) % size + size) % size)];
      const int64_t from = members[static_cast<size_t>(((my - in.peer) % size + size) % size)];
      p2p(pb::COMM_SEND_NODE, name + ".send", to, in.src[0].bytes(), duration, deps);
      p2p(pb::COMM_RECV_NODE, name + ".recv", from, in.dst.bytes(), 0, {});
      return;
    }
    if (in.op == isa::Opcode::send || in.op == isa::Opcode::recv) {
      const bool send = in.op == isa::Opcode::send;
      const int64_t peer = members.at(static_cast<size_t>(in.peer));
      p2p(send ? pb::COMM_SEND_NODE : pb::COMM_RECV_NODE, name, peer,
          send ? in.src[0].bytes() : in.dst.bytes(), duration, deps);
      return;
    }
    pb::Node n = node(name, pb::COMM_COLL_NODE, deps);
    n.set_duration_micros(micros_of(duration));
    attr_bool(n, "is_cpu_op", false);  // written: ASTRA-sim's feeders read its presence
    attr_int64(n, "comm_type", comm_type(in.op));
    attr_int64(n, "comm_size", in.src[0].bytes());
    std::vector<int64_t> sorted = members;
    std::sort(sorted.begin(), sorted.end());
    if (size != m_owner.info().world) {
      auto* a = n.add_attr();
      a->set_name("pg_name");
      a->set_string_val(std::to_string(m_owner.group_id(sorted)));
    }
    // involved_dim: the network dimensions along which the members' coordinates differ.
    auto* inv = n.add_attr();
    inv->set_name("involved_dim");
    auto* list = inv->mutable_bool_list();
    int64_t stride = 1;
    for (const NetworkDim& d : m_owner.info().dims) {
      bool varies = false;
      for (int64_t r : sorted) varies |= (r / stride) % d.npus != (sorted[0] / stride) % d.npus;
      list->add_values(varies);
      stride *= d.npus;
    }
    attr_uint64(n, "duration_ns", static_cast<uint64_t>(duration));
    write_node(n);
  }

  void p2p(pb::NodeType type, const std::string& name, int64_t peer, int64_t bytes,
           int64_t duration, const std::vector<uint64_t>& deps) {
    const bool send = type == pb::COMM_SEND_NODE;
    pb::Node n = node(name, type, deps);
    n.set_duration_micros(micros_of(duration));
    attr_bool(n, "is_cpu_op", false);
    attr_int32(n, "comm_src", static_cast<int32_t>(send ? m_rank : peer));
    attr_int32(n, "comm_dst", static_cast<int32_t>(send ? peer : m_rank));
    attr_int64(n, "comm_size", bytes);
    // Sends and receives match on (src, dst, tag): the pair's sequence number.
    const auto key = send ? std::make_pair(m_rank, peer) : std::make_pair(peer, m_rank);
    attr_int32(n, "comm_tag", static_cast<int32_t>(m_tags[key]++));
    attr_uint64(n, "duration_ns", static_cast<uint64_t>(duration));
    write_node(n);
  }

  // A node with the next id, its control dependencies (m_ctrl), `deps` as data deps.
  pb::Node node(const std::string& name, pb::NodeType type, const std::vector<uint64_t>& deps) {
    pb::Node n;
    n.set_id(m_next);
    n.set_name(name);
    n.set_type(type);
    for (uint64_t c : m_ctrl) n.add_ctrl_deps(c);
    for (uint64_t d : deps) {  // a control dependency already orders it
      if (std::find(m_ctrl.begin(), m_ctrl.end(), d) == m_ctrl.end()) n.add_data_deps(d);
    }
    return n;
  }

  // Whole microseconds with the error carried on, COMP nodes apart from the others: the rank's
  // COMP durations sum to its compute nanoseconds rounded once.
  uint64_t micros_of(int64_t d, bool comp = false) {
    int64_t& sum = comp ? m_comp_rounded_ns : m_rounded_ns;
    const int64_t before = (sum + 500) / 1000;
    sum += d;
    return static_cast<uint64_t>((sum + 500) / 1000 - before);
  }

  void write_node(const pb::Node& n) {
    if (n.type() == pb::COMP_NODE) m_compute_micros += static_cast<int64_t>(n.duration_micros());
    ++m_counts[n.type()];
    write(n);
    m_ctrl.assign(1, m_next);  // the launch's next node follows this one
    ++m_next;
  }

  void write(const google::protobuf::MessageLite& m) {
    if (!google::protobuf::util::SerializeDelimitedToOstream(m, &m_out) || !m_out)
      throw traces::WriteError(m_path, traces::errno_reason(errno));
  }

  Exporter& m_owner;
  int64_t m_rank;
  std::string m_path;
  std::ofstream m_out;
  uint64_t m_next = 0;
  int64_t m_rounded_ns = 0, m_comp_rounded_ns = 0;
  int64_t m_compute_ns = 0, m_compute_micros = 0;
  std::map<pb::NodeType, int64_t> m_counts;
  std::unordered_map<std::string, uint64_t> m_writer;  // HBM tensor -> its last writer
  std::vector<uint64_t> m_ctrl;                        // the next node's control dependencies
  // The last node of the last launch that is not asynchronous, of the last asynchronous one, and
  // of each asynchronous launch by launch index (Launch::after's targets).
  std::optional<uint64_t> m_sync_last, m_async_last;
  std::unordered_map<size_t, uint64_t> m_async_end;
  int64_t m_async_launches = 0;
  std::map<std::pair<int64_t, int64_t>, int64_t> m_tags;
};

Exporter::Exporter(std::string dir, ExportInfo info)
    : m_dir(std::move(dir)), m_info(std::move(info)) {
  for (int64_t r = 0; r < m_info.world; ++r) {
    m_ranks.push_back(std::make_unique<RankRecorder>(
        *this, r, m_dir + "/" + m_info.name + "." + std::to_string(r) + ".et"));
  }
}

Exporter::~Exporter() = default;

void Exporter::record(int64_t rank, const engines::Launch& launch) {
  m_ranks.at(static_cast<size_t>(rank))->record(launch);
}

int64_t Exporter::group_id(const std::vector<int64_t>& members) {
  const auto it = m_groups.find(members);
  if (it != m_groups.end()) return it->second;
  const int64_t id = static_cast<int64_t>(m_groups.size()) + 1;
  m_groups.emplace(members, id);
  return id;
}

void Exporter::finish() {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (auto& r : m_ranks) ranks.push_back(r->finish());
  // Comm groups by id, as ASTRA-sim's --comm-group-configuration reads them.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> by_id;
  for (const auto& [members, id] : m_groups) by_id.push_back({id, members});
  std::sort(by_id.begin(), by_id.end());
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (const auto& [id, members] : by_id) groups[std::to_string(id)] = members;
  const std::string groups_path = m_dir + "/" + m_info.name + ".comm_groups.json";
  std::ofstream g(groups_path);
  g << groups.dump() << "\n";
  nlohmann::ordered_json summary = {{"schema", "wallsim-chakra/1"},
                                    {"chakra_version", "0.0.4"},
                                    {"name", m_info.name},
                                    {"workload", m_info.workload},
                                    {"mode", m_info.mode},
                                    {"world", m_info.world},
                                    {"ranks", ranks}};
  std::ofstream s(m_dir + "/chakra.json");
  s << summary.dump(2) << "\n";
  if (!g || !s) throw traces::WriteError(m_dir, traces::errno_reason(errno));
}

}  // namespace wallsim::chakra
