// wallsim run --chakra: the per-rank Chakra files read back with the vendored schema's classes.
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_test_util.h"
#include "proto/et_def.pb.h"

namespace wallsim {
namespace {

namespace pb = ChakraProtoMsg;
using test::fresh_dir;
using test::run_wallsim;
using test::slurp;

struct RankFile {
  pb::GlobalMetadata meta;
  std::vector<pb::Node> nodes;
};

// One file: the metadata, then nodes to a clean end of file.
RankFile read_rank(const std::string& path) {
  RankFile f;
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return f;
  google::protobuf::io::FileInputStream in(fd);
  bool clean_eof = false;
  EXPECT_TRUE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&f.meta, &in, &clean_eof))
      << path;
  while (true) {
    pb::Node n;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&n, &in, &clean_eof)) {
      EXPECT_TRUE(clean_eof) << path << ": a truncated or malformed node after " << f.nodes.size();
      break;
    }
    f.nodes.push_back(std::move(n));
  }
  ::close(fd);
  return f;
}

const pb::AttributeProto* attr(const pb::Node& n, const std::string& name) {
  for (const auto& a : n.attr()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

// The attribute `name` of `n`, with the value type ASTRA-sim's feeders read.
const pb::AttributeProto& typed(const pb::Node& n, const std::string& name,
                                pb::AttributeProto::ValueCase want) {
  static const pb::AttributeProto none;
  const pb::AttributeProto* a = attr(n, name);
  EXPECT_NE(a, nullptr) << n.name() << " has no " << name;
  if (!a) return none;
  EXPECT_EQ(a->value_case(), want) << n.name() << "." << name;
  return *a;
}

std::string sha256(const std::string& path) {
  std::string out;
  FILE* p = ::popen(("sha256sum " + path).c_str(), "r");
  char buf[256];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  if (p) ::pclose(p);
  return out.substr(0, 64);
}

// Rank 0's (chip0.core0's) launches as its trace shows them: by launch index, the launch's
// begin and, for a plan span, its end and whether it ran asynchronously; in ns.
struct Launches {
  std::vector<double> begin;
  std::map<int64_t, std::pair<std::string, double>> sync, async;  // index -> (plan, end)
};

Launches rank0_launches(const nlohmann::json& trace) {
  Launches l;
  int64_t pid = -1;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name" &&
        e.at("args").at("name") == "chip0.core0")
      pid = e.at("pid").get<int64_t>();
  }
  EXPECT_GE(pid, 0) << "no chip0.core0 in the trace";
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("pid").get<int64_t>() != pid) continue;
    const double ts = e.at("ts").get<double>() * 1e3, end = ts + e.at("dur").get<double>() * 1e3;
    const int64_t tid = e.at("tid").get<int64_t>();
    if (tid == 0 && e.at("cat") == "launch") l.begin.push_back(ts);  // in launch order
    if (e.at("cat") != "plan") continue;
    const int64_t index = e.at("args").at("index").get<int64_t>();
    (tid == 1000 ? l.sync : l.async)[index] = {e.at("name").get<std::string>(), end};
  }
  return l;
}

// A run with --chakra; its files, per rank, and chakra.json.
struct Export {
  std::string dir;
  nlohmann::json summary, groups, stats;
  Launches launches;  // rank 0's, from the run's trace
  std::vector<RankFile> ranks;
  int64_t dims = 0;  // network.yml's dimensions
};

Export run_export(const std::string& name, const std::string& workload, const std::string& mode,
                  const std::string& more = "", const std::string& config = "configs/trn1.json") {
  Export e;
  const std::string base = fresh_dir("chakra", name);
  e.dir = base + "/c";
  std::string err;
  EXPECT_EQ(run_wallsim("run -c " + config + " -w " + workload + " -m " + mode + " " + more +
                            " --trace-level plans --chakra " + e.dir + " -o " + base + "/o",
                        &err),
            0)
      << err;
  e.summary = nlohmann::json::parse(slurp(e.dir + "/chakra.json"));
  e.stats = nlohmann::json::parse(slurp(base + "/o/stats.json"));
  e.launches = rank0_launches(nlohmann::json::parse(slurp(base + "/o/trace.json")));
  const std::string prefix = workload.substr(0, workload.find(':'));
  e.groups = nlohmann::json::parse(slurp(e.dir + "/" + prefix + ".comm_groups.json"));
  for (int64_t r = 0; r < e.summary.at("world").get<int64_t>(); ++r)
    e.ranks.push_back(read_rank(e.dir + "/" + prefix + "." + std::to_string(r) + ".et"));
  const std::string yml = slurp(e.dir + "/network.yml");
  const auto line = yml.substr(yml.find("npus_count:"));
  e.dims = std::count(line.begin(), line.begin() + line.find('\n'), ',') + 1;
  return e;
}

// Ids unique, every dependency defined and earlier (ids are a topological order), no cycle
// (Kahn's algorithm visits every node), every node but the first with a control dependency.
void check_graph(const RankFile& f, const std::string& what) {
  EXPECT_EQ(f.meta.version(), "0.0.4") << what;
  std::map<uint64_t, const pb::Node*> by_id;
  for (const pb::Node& n : f.nodes) EXPECT_TRUE(by_id.emplace(n.id(), &n).second) << what;
  std::map<uint64_t, int> indegree;
  std::map<uint64_t, std::vector<uint64_t>> users;
  for (const pb::Node& n : f.nodes) {
    std::set<uint64_t> deps(n.ctrl_deps().begin(), n.ctrl_deps().end());
    deps.insert(n.data_deps().begin(), n.data_deps().end());
    for (uint64_t d : deps) {
      EXPECT_TRUE(by_id.count(d)) << what << ": " << n.name() << " depends on undefined " << d;
      EXPECT_LT(d, n.id()) << what << ": " << n.name();
      users[d].push_back(n.id());
    }
    indegree[n.id()] = static_cast<int>(deps.size());
    if (n.id() > 0) {
      EXPECT_GT(n.ctrl_deps_size(), 0) << what << ": " << n.name();
    }
  }
  std::vector<uint64_t> ready;
  for (const auto& [id, d] : indegree) {
    if (d == 0) ready.push_back(id);
  }
  EXPECT_FALSE(ready.empty()) << what << ": no dependency-free node";
  size_t visited = 0;
  while (!ready.empty()) {
    const uint64_t id = ready.back();
    ready.pop_back();
    ++visited;
    for (uint64_t u : users[id]) {
      if (--indegree[u] == 0) ready.push_back(u);
    }
  }
  EXPECT_EQ(visited, f.nodes.size()) << what << ": a cycle";
}

// Every node's attributes with the types ASTRA-sim's feeders read (docs/CHAKRA.md).
void check_attributes(const Export& e, const RankFile& f) {
  using V = pb::AttributeProto;
  for (const pb::Node& n : f.nodes) {
    EXPECT_FALSE(typed(n, "is_cpu_op", V::kBoolVal).bool_val()) << n.name();
    typed(n, "duration_ns", V::kUint64Val);
    switch (n.type()) {
      case pb::COMP_NODE:
        EXPECT_GE(typed(n, "num_ops", V::kInt64Val).int64_val(), 0);
        typed(n, "tensor_size", V::kUint64Val);
        break;
      case pb::MEM_LOAD_NODE:
      case pb::MEM_STORE_NODE:
        EXPECT_GT(typed(n, "tensor_size", V::kUint64Val).uint64_val(), 0u) << n.name();
        break;
      case pb::COMM_COLL_NODE: {
        const int64_t t = typed(n, "comm_type", V::kInt64Val).int64_val();
        EXPECT_TRUE(t == pb::ALL_REDUCE || t == pb::ALL_GATHER || t == pb::REDUCE_SCATTER ||
                    t == pb::ALL_TO_ALL)
            << n.name();
        EXPECT_GT(typed(n, "comm_size", V::kInt64Val).int64_val(), 0) << n.name();
        EXPECT_EQ(typed(n, "involved_dim", V::kBoolList).bool_list().values_size(), e.dims);
        if (const V* pg = attr(n, "pg_name")) {
          EXPECT_EQ(pg->value_case(), V::kStringVal);
        }
        break;
      }
      default:
        ADD_FAILURE() << n.name() << ": type " << pb::NodeType_Name(n.type());
    }
  }
}

// Per communicator (pg_name, or the whole world), the members' (comm_type, comm_size)
// sequences are equal, and comm_groups.json names exactly the members that use it.
void check_collectives(const Export& e) {
  std::map<std::string, std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>>> seqs;
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    for (const pb::Node& n : e.ranks[r].nodes) {
      if (n.type() != pb::COMM_COLL_NODE) continue;
      const auto* pg = attr(n, "pg_name");
      seqs[pg ? pg->string_val() : "world"][static_cast<int64_t>(r)].push_back(
          {attr(n, "comm_type")->int64_val(), attr(n, "comm_size")->int64_val()});
    }
  }
  for (const auto& [group, by_rank] : seqs) {
    std::vector<int64_t> members;
    for (const auto& [r, seq] : by_rank) {
      members.push_back(r);
      EXPECT_EQ(seq, by_rank.begin()->second) << "group " << group << " rank " << r;
    }
    if (group == "world") {
      EXPECT_EQ(members.size(), e.ranks.size());
    } else {
      EXPECT_EQ(e.groups.at(group).get<std::vector<int64_t>>(), members) << group;
    }
  }
  EXPECT_EQ(e.groups.size(), seqs.size() - seqs.count("world"));
}

// The launch index in a node's name (<plan>@L<index>[#part][.send|.recv]).
int64_t launch_of(const pb::Node& n) {
  return std::stoll(n.name().substr(n.name().rfind("@L") + 2));
}

uint64_t duration_ns(const pb::Node& n) { return attr(n, "duration_ns")->uint64_val(); }

// Per rank, the COMP nodes' durations sum to the rank's simulated compute time: in ns exactly,
// in whole microseconds rounded once. The compute time is the time its core spent in its plans
// that are not asynchronous, host copies excluded: each from its launch's begin to its last
// result, less its own collectives. Checked for rank 0 against the run's trace (its launch
// slices and plan spans), which the exporter does not read.
void check_compute(const Export& e) {
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    const nlohmann::json& row = e.summary.at("ranks").at(r);
    int64_t ns = 0, micros = 0, comps = 0;
    for (const pb::Node& n : e.ranks[r].nodes) {
      if (n.type() != pb::COMP_NODE) continue;
      ++comps;
      ns += static_cast<int64_t>(duration_ns(n));
      micros += static_cast<int64_t>(n.duration_micros());
    }
    EXPECT_GT(comps, 0);
    EXPECT_GT(ns, 0);
    EXPECT_EQ(ns, row.at("compute_ns").get<int64_t>()) << "rank " << r;
    EXPECT_EQ(micros, std::llround(double(ns) / 1e3)) << "rank " << r;
    EXPECT_EQ(row.at("nodes").get<size_t>(), e.ranks[r].nodes.size());
    EXPECT_EQ(row.value("async_launches", int64_t{0}), 0 + int64_t(e.launches.async.size()))
        << "rank " << r;  // SPMD: every rank launches what rank 0 does
  }
  // Rank 0 against the trace: one launch per plan the core launched (stats.json too); a node
  // of every launch, an asynchronous launch's nodes all COMM nodes; the COMP nodes' time is the
  // plan spans' (launch begin to end) less the collectives inside them, to a ns per node.
  const RankFile& f = e.ranks.at(0);
  const Launches& l = e.launches;
  const nlohmann::json& core = e.stats.at("chip0").at("core0");
  ASSERT_EQ(int64_t(l.begin.size()), core.at("plans_launched").get<int64_t>());
  ASSERT_EQ(l.sync.size() + l.async.size(), l.begin.size());
  std::set<int64_t> launches;
  double comp = 0, coll_in_sync = 0;
  for (const pb::Node& n : f.nodes) {
    const int64_t i = launch_of(n);
    launches.insert(i);
    const bool async = l.async.count(i) > 0;
    const bool comm = n.type() == pb::COMM_COLL_NODE || n.type() == pb::COMM_SEND_NODE ||
                      n.type() == pb::COMM_RECV_NODE;
    if (async) {
      EXPECT_TRUE(comm) << n.name() << ": a node of an asynchronous launch";
    }
    if (n.type() == pb::COMP_NODE) comp += double(duration_ns(n));
    if (comm && !async) coll_in_sync += double(duration_ns(n));
  }
  EXPECT_EQ(launches.size(), l.begin.size());
  double spans = 0;
  for (const auto& [i, plan_end] : l.sync) {
    if (plan_end.first.rfind("copy_", 0) != 0)
      spans += plan_end.second - l.begin.at(static_cast<size_t>(i));
  }
  EXPECT_NEAR(comp + coll_in_sync, spans, double(f.nodes.size())) << "COMP + sync COMM vs trace";
  // Without asynchronous launches no two launches overlap: every node's time together is the
  // core's busy time (the union of its launches' spans) plus its launch overhead.
  if (l.async.empty()) {
    double all_ns = 0;
    for (const pb::Node& n : f.nodes) all_ns += double(duration_ns(n));
    const double busy = e.stats.at("device_busy").at("busy_ns").get<double>();
    EXPECT_NEAR(all_ns, busy + core.at("launch_overhead_ns").get<double>(), double(f.nodes.size()));
  }
}

// The dependencies of a run with asynchronous launches (rank 0, whose launches the trace names):
// the nodes of launches that are not asynchronous form one control chain, each on the one before
// it, and no later node of such a launch has a control dependency on an asynchronous launch's
// node: those depend on it through data_deps only (the tensors they share). Returns how many of
// rank 0's asynchronous collective nodes have a successor outside asynchronous launches (all of
// them through data), and at least one.
int64_t check_async_dependencies(const Export& e) {
  const RankFile& f = e.ranks.at(0);
  const auto is_async = [&](const pb::Node& n) { return e.launches.async.count(launch_of(n)) > 0; };
  std::map<uint64_t, const pb::Node*> by_id;
  for (const pb::Node& n : f.nodes) by_id[n.id()] = &n;
  std::map<uint64_t, int> sync_ctrl_users, sync_data_users;
  const pb::Node* prev_sync = nullptr;
  for (const pb::Node& n : f.nodes) {
    for (uint64_t d : n.ctrl_deps()) {
      sync_ctrl_users[d] += !is_async(n);
      if (!is_async(n) && launch_of(n) != launch_of(*by_id.at(d))) {
        EXPECT_FALSE(is_async(*by_id.at(d)))
            << n.name() << " has a control dependency on asynchronous " << by_id.at(d)->name();
      }
    }
    for (uint64_t d : n.data_deps()) sync_data_users[d] += !is_async(n);
    if (is_async(n)) continue;
    if (prev_sync) {
      EXPECT_EQ(std::vector<uint64_t>(n.ctrl_deps().begin(), n.ctrl_deps().end()),
                std::vector<uint64_t>{prev_sync->id()})
          << n.name();
    }
    prev_sync = &n;
  }
  int64_t data_only = 0, async_colls = 0;
  for (const pb::Node& n : f.nodes) {
    if (!is_async(n) || n.type() != pb::COMM_COLL_NODE) continue;
    ++async_colls;
    EXPECT_EQ(sync_ctrl_users[n.id()], 0) << n.name();
    data_only += sync_ctrl_users[n.id()] == 0 && sync_data_users[n.id()] > 0;
  }
  EXPECT_GT(async_colls, 0) << "no asynchronous collective";
  EXPECT_GT(data_only, 0) << "no asynchronous collective with a data successor";
  return data_only;
}

int64_t count_type(const RankFile& f, pb::NodeType t) {
  return std::count_if(f.nodes.begin(), f.nodes.end(),
                       [t](const pb::Node& n) { return n.type() == t; });
}

TEST(ChakraExport, VendoredSchemaIsThePublishedOne) {
  EXPECT_EQ(sha256(std::string(WALLSIM_SOURCE_DIR) + "/chakra/proto/et_def.proto"),
            "46b67392c6192561c146c14718cae5336c644d43cf5f96a1466028a89f3ab890");
}

// TP=2 x DP=2: TP all-reduces on {0,1} and {2,3}, host transfers, one COMP per plan launch.
TEST(ChakraExport, TpDpTransformerGraphCollectivesAndComputeTime) {
  const Export e = run_export(
      "tpdp", "transformer:layers=1,d_model=256,heads=8,d_ff=512,seq=128,batch=2,tp=2,dp=2",
      "fused");
  ASSERT_EQ(e.ranks.size(), 4u);
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    check_graph(e.ranks[r], "rank " + std::to_string(r));
    check_attributes(e, e.ranks[r]);
    EXPECT_GT(count_type(e.ranks[r], pb::COMM_COLL_NODE), 0);
    EXPECT_GT(count_type(e.ranks[r], pb::MEM_LOAD_NODE), 0);
    EXPECT_GT(count_type(e.ranks[r], pb::MEM_STORE_NODE), 0);
  }
  check_collectives(e);
  EXPECT_EQ(e.groups, nlohmann::json::parse(R"({"1":[0,1],"2":[2,3]})"));
  check_compute(e);
  // Fused launches the TP all-reduces asynchronously (runtime.async_collectives' default).
  EXPECT_GT(check_async_dependencies(e), 0);
}

// AOT puts a data-parallel step's all-reduces inside one plan: the launch splits into COMP
// segments around its collectives, over the whole world (no pg_name).
TEST(ChakraExport, AotCollectivesInsideAPlanSplitItsCompute) {
  const Export e = run_export("aot", "train:batch=256,d_model=64,d_ff=128,layers=2,dp=4", "aot");
  ASSERT_EQ(e.ranks.size(), 4u);
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    check_graph(e.ranks[r], "rank " + std::to_string(r));
    check_attributes(e, e.ranks[r]);
    int64_t segments = 0;
    for (const pb::Node& n : e.ranks[r].nodes) segments += n.name().find("#1") != std::string::npos;
    EXPECT_GT(segments, 0) << "no launch split around a collective";
  }
  check_collectives(e);
  EXPECT_TRUE(e.groups.empty());
  check_compute(e);
}

// Data-parallel training under native with gradient buckets: each bucket's all-reduce is an
// asynchronous launch that runs beside the backward plans after it (the trace shows the spans
// overlap). Its node has no control successor outside asynchronous launches, and the COMP nodes
// still sum to the compute time. With runtime.async_collectives off, one control chain again.
TEST(ChakraExport, AsynchronousCollectivesKeepTheRunsDependencies) {
  const std::string w = "train:dp=2,layers=4,bucket_mb=10";
  const Export e = run_export("async", w, "native", "--steps 2", "configs/trn2.json");
  ASSERT_EQ(e.ranks.size(), 2u);
  int64_t overlapping = 0;  // asynchronous spans that a later plan's launch begins inside
  for (const auto& [i, a] : e.launches.async) {
    for (const auto& [j, s] : e.launches.sync)
      overlapping += j > i && e.launches.begin.at(static_cast<size_t>(j)) < a.second;
  }
  EXPECT_GT(overlapping, 0) << "no launch overlaps an asynchronous one";
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    check_graph(e.ranks[r], "rank " + std::to_string(r));
    check_attributes(e, e.ranks[r]);
  }
  check_collectives(e);
  check_compute(e);
  EXPECT_GT(check_async_dependencies(e), 0);

  const Export off =
      run_export("async_off", w, "native", "--steps 2 --set runtime.async_collectives=off",
                 "configs/trn2.json");
  EXPECT_TRUE(off.launches.async.empty());
  for (const RankFile& f : off.ranks) {
    check_graph(f, "off");
    for (const pb::Node& n : f.nodes) {
      if (n.id() > 0) {
        EXPECT_EQ(std::vector<uint64_t>(n.ctrl_deps().begin(), n.ctrl_deps().end()),
                  std::vector<uint64_t>{n.id() - 1})
            << n.name();
      }
    }
  }
  check_compute(off);
  EXPECT_FALSE(off.summary.at("ranks").at(0).contains("async_launches"));
}

TEST(ChakraExport, SameRunGivesByteIdenticalFiles) {
  const std::string w =
      "transformer:layers=1,d_model=256,heads=8,d_ff=512,seq=128,batch=2,tp=2,dp=2";
  const Export a = run_export("same_a", w, "fused");
  const Export b = run_export("same_b", w, "fused");
  for (int r = 0; r < 4; ++r) {
    const std::string f = "/transformer." + std::to_string(r) + ".et";
    EXPECT_EQ(slurp(a.dir + f), slurp(b.dir + f)) << f;
  }
  EXPECT_EQ(slurp(a.dir + "/chakra.json"), slurp(b.dir + "/chakra.json"));
}

// A path that cannot be the export's directory: one line, exit 2, nothing written.
TEST(ChakraExport, BadDirectoryIsOneLineExitTwoAndNothingWritten) {
  const std::string base = fresh_dir("chakra", "bad");
  std::filesystem::create_directories(base);
  std::ofstream(base + "/file") << "x";
  std::filesystem::create_directories(base + "/mine");
  std::ofstream(base + "/mine/notes.txt") << "user's";
  for (const std::string& bad : {base + "/file", base + "/file/sub", base + "/mine"}) {
    std::string err;
    EXPECT_EQ(run_wallsim("run -c configs/trn1.json -w transformer:layers=1,seq=128,tp=2 "
                          "--chakra " +
                              bad + " -o " + base + "/out",
                          &err),
              2)
        << bad;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("--chakra"), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(base + "/out")) << bad;
  }
  EXPECT_EQ(slurp(base + "/mine/notes.txt"), "user's");
  size_t entries = 0;
  for (const auto& d : std::filesystem::directory_iterator(base)) entries += !d.path().empty();
  EXPECT_EQ(entries, 2u);  // file and mine: no staging directory left
}

}  // namespace
}  // namespace wallsim
