// `wallsim run -w serve` end to end: same seed, same report; every request gets each of its
// tokens exactly once under both schedulers; continuous batching stays within its KV memory
// (preempting when it must); schedulers and modes compute the same tokens; bad parameters are
// one-line errors with exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <sys/wait.h>
#include "cli_test_util.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace wallsim {
namespace {

using test::slurp;
using Json = nlohmann::json;
namespace fs = std::filesystem;

int run(const std::string& args, std::string* err = nullptr) {
  return test::run_wallsim(args, err);
}
std::string out_dir(const std::string& name) { return test::fresh_dir("serve", name); }

// A small model on the tiny chip: 12 requests of a few to a few dozen tokens.
const std::string kSmall =
    "serve:requests=12,layers=2,d_model=64,heads=4,d_ff=128,vocab=100,context=64,max_prompt=32,"
    "prompt_mean=12,max_batch=4,block=4";

Json serve(const std::string& params, const std::string& mode, const std::string& name,
           const std::string& extra = "") {
  const std::string dir = out_dir(name);
  std::string err;
  const std::string out_len =
      params.find("output_mean") == std::string::npos ? ",output_mean=12" : "";
  EXPECT_EQ(run("run -c configs/tiny.json -w " + kSmall + out_len + params + " --mode " + mode +
                    " --trace-level none " + extra + " --out " + dir,
                &err),
            0)
      << err;
  return Json::parse(slurp(dir + "/stats.json"));
}

// Every request got exactly its output tokens, once each (the run itself stops with an internal
// error on a second token), and the totals agree.
void expect_each_token_once(const Json& r) {
  const Json& s = r["serving"];
  int64_t sum = 0;
  for (const auto& q : s["per_request"]) {
    EXPECT_EQ(q["tokens"], q["output"]) << q.dump();
    EXPECT_GE(q["ttft_ns"].get<int64_t>(), 0);
    EXPECT_GE(q["latency_ns"].get<int64_t>(), q["ttft_ns"].get<int64_t>());
    sum += q["output"].get<int64_t>();
  }
  EXPECT_EQ(s["output_tokens"], sum);
  EXPECT_EQ(s["per_request"].size(), 12u);
}

TEST(Serve, SameSeedGivesIdenticalReports) {
  Json a = serve(",rate=2000", "fused", "seed_a"), b = serve(",rate=2000", "fused", "seed_b");
  Json c = serve(",rate=2000", "fused", "seed_c", "--set runtime.seed=9");
  a.erase("measured");
  b.erase("measured");
  EXPECT_EQ(a.dump(), b.dump());
  EXPECT_NE(a["serving"]["per_request"].dump(), c["serving"]["per_request"].dump());
  // Requests arrive over time: the server idles between them, and no first token comes before
  // its request.
  EXPECT_GT(a["totals"]["idle_ns"].get<int64_t>(), 0);
  EXPECT_GT(a["serving"]["per_request"][11]["arrival_ns"].get<int64_t>(), 0);
  expect_each_token_once(a);
}

TEST(Serve, StaticBatchingPadsAndRunsEachBatchToItsLongest) {
  Json r = serve(",scheduler=static", "native", "static");
  expect_each_token_once(r);
  const Json& s = r["serving"];
  EXPECT_EQ(s["scheduler"], "static");
  // Padded prompts and KV, finished sequences riding along: waste the continuous run avoids.
  Json c = serve("", "native", "static_vs");
  EXPECT_GT(r["totals"]["padding_flop_fraction"].get<double>(),
            c["totals"]["padding_flop_fraction"].get<double>());
  EXPECT_GT(s["iterations"]["mean_decode_padding_rows"].get<double>(), 0);
  EXPECT_LT(s["kv"]["mean_utilization"].get<double>(),
            c["serving"]["kv"]["mean_utilization"].get<double>());
  EXPECT_EQ(c["serving"]["iterations"]["prefill"], 12);  // one per request, none preempted
}

TEST(Serve, ContinuousStaysWithinItsKvMemoryByPreempting) {
  Json r = serve(",kv_blocks=16,output_mean=40", "native", "tight");
  expect_each_token_once(r);
  const Json& kv = r["serving"]["kv"];
  EXPECT_EQ(kv["pool_blocks"], 16);
  EXPECT_LE(kv["peak_blocks"].get<int64_t>(), 16);
  EXPECT_GT(kv["preemptions"].get<int64_t>(), 0);
  // A preempted request is prefilled again (recomputing its tokens' keys), generating none twice.
  EXPECT_EQ(r["serving"]["iterations"]["prefill"].get<int64_t>(),
            12 + kv["preemptions"].get<int64_t>());
}

// The same requests give the same token values whatever the batching, padding, masking or
// execution mode: rows are independent and padded keys are masked.
TEST(Serve, SchedulersAndModesComputeTheSameTokens) {
  const Json base = serve("", "native", "f_base", "--functional");
  struct Variant {
    std::string params, mode;
  };
  for (const Variant& v :
       {Variant{",scheduler=static", "aot"}, Variant{",dynamic=bounded", "fused"},
        Variant{",dynamic=bucketed,kv_blocks=16", "eager"}}) {
    const Json other = serve(v.params, v.mode, "f_other", "--functional");
    const auto& a = base["serving"]["per_request"];
    const auto& b = other["serving"]["per_request"];
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i]["output"] != b[i]["output"]) continue;  // output_mean changed the stream
      ASSERT_EQ(a[i]["values"].size(), b[i]["values"].size());
      for (size_t k = 0; k < a[i]["values"].size(); ++k) {
        // Within two bf16 steps of the value: a whole-step compile lowers the attention spelt
        // out in ops as the fused kernel, which rounds once where the ops round each result.
        const double x = a[i]["values"][k].get<double>();
        EXPECT_NEAR(x, b[i]["values"][k].get<double>(), std::max(0.05, std::abs(x) / 64))
            << v.params << " " << v.mode << " request " << i << " token " << k;
      }
    }
  }
}

// The simulator may drop compiled plans to bound its memory and rebuild them on their next
// cache hit: the results, trace included, do not change.
TEST(Serve, DroppingPlanBodiesChangesNothing) {
  const std::string a = out_dir("keep"), b = out_dir("drop");
  std::string err;
  const std::string cmd = "run -c configs/tiny.json -w " + kSmall +
                          ",output_mean=12,dynamic=bucketed --mode fused --plan-memory ";
  ASSERT_EQ(run(cmd + "2048 --out " + a, &err), 0) << err;
  ASSERT_EQ(run(cmd + "0 --out " + b, &err), 0) << err;
  Json sa = Json::parse(slurp(a + "/stats.json")), sb = Json::parse(slurp(b + "/stats.json"));
  EXPECT_EQ(sa["measured"]["plans_rebuilt"], 0);
  EXPECT_GT(sb["measured"]["plans_rebuilt"].get<int64_t>(), 0);
  sa.erase("measured");
  sb.erase("measured");
  EXPECT_EQ(sa.dump(), sb.dump());
  EXPECT_EQ(slurp(a + "/trace.json"), slurp(b + "/trace.json"));
}

TEST(Serve, BoundedShapesCompileOncePerPlan) {
  Json exact = serve("", "fused", "exact"), bounded = serve(",dynamic=bounded", "fused", "bounded");
  // The groups of one prefill and one decode at the bound: only two iterations compile, against
  // a new shape most iterations.
  int64_t compiling = 0;
  for (const Json& s : bounded["steps"]) compiling += s["compiles"].get<int64_t>() > 0;
  EXPECT_EQ(compiling, 2);
  EXPECT_GT(exact["totals"]["compiles"].get<int64_t>(),
            4 * bounded["totals"]["compiles"].get<int64_t>());
  EXPECT_GT(bounded["totals"]["masked_flop_fraction"].get<double>(), 0.5);
}

TEST(Serve, BadParametersExit2WithOneLine) {
  const std::string never = out_dir("never");
  const std::string bad_csv = ::testing::TempDir() + "/serve_bad_" + std::to_string(::getpid());
  std::ofstream(bad_csv) << "1,2\nthree,4\n";
  struct Case {
    std::string params, message;
  };
  for (const Case& c : {
           Case{"serve:context=64,max_prompt=64", "serve.max_prompt: 64 leaves no room"},
           Case{"serve:context=64,kv_blocks=3,block=16", "serve.kv_blocks: 3 blocks of 16 rows"},
           Case{"serve:scheduler=static,dynamic=bounded", "serve.dynamic: the static scheduler"},
           Case{"serve:rate=-1", "serve.rate: -1 is outside"},
           Case{"serve:rate=fast", "serve.rate: expected a number, got 'fast'"},
           Case{"serve:lengths=" + bad_csv, bad_csv + ":2: expected 'prompt,output'"},
           Case{"serve:schedule=static", "unknown parameter 'schedule' of serve"},
       }) {
    std::string err;
    EXPECT_EQ(run("run -c configs/tiny.json -w " + c.params + " --out " + never, &err), 2)
        << c.params;
    EXPECT_NE(err.find(c.message), std::string::npos) << c.params << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_FALSE(fs::exists(never));
  }
}

}  // namespace
}  // namespace wallsim
