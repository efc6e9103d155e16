// The request generator: seeded and reproducible, Poisson arrivals at the rate, log-normal
// lengths with the configured means, clipping, empirical pairs, and errors for bad specs.
#include "wallsim/workloads/requests.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "wallsim/base/params.h"

namespace wallsim::workloads {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const base::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Requests, SameSeedSameStreamOtherSeedAnother) {
  RequestSpec spec;
  spec.rate = 5;
  auto a = generate_requests(spec, 7), b = generate_requests(spec, 7),
       c = generate_requests(spec, 8);
  ASSERT_EQ(a.size(), 200u);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_ns, b[i].arrival_ns);
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].output, b[i].output);
    differs |= a[i].prompt != c[i].prompt || a[i].arrival_ns != c[i].arrival_ns;
  }
  EXPECT_TRUE(differs);
}

TEST(Requests, PoissonArrivalsAtTheRateAndLogNormalMeans) {
  RequestSpec spec;
  spec.count = 20000;
  spec.rate = 50;
  spec.max_prompt = 1 << 20;
  spec.max_total = 1 << 21;
  auto r = generate_requests(spec, 1);
  // Mean inter-arrival 1/rate = 20 ms; mean lengths 161 and 338 (sigma 1: within a few %).
  EXPECT_NEAR(double(r.back().arrival_ns) / 1e9 / double(r.size()), 0.02, 0.001);
  double p = 0, o = 0;
  for (size_t i = 1; i < r.size(); ++i) EXPECT_GE(r[i].arrival_ns, r[i - 1].arrival_ns);
  for (const auto& q : r) {
    p += double(q.prompt);
    o += double(q.output);
  }
  EXPECT_NEAR(p / double(r.size()), 161, 161 * 0.05);
  EXPECT_NEAR(o / double(r.size()), 338, 338 * 0.05);
}

TEST(Requests, AllAtOnceAndClippedToTheLimits) {
  RequestSpec spec;
  spec.count = 2000;
  spec.max_prompt = 100;
  spec.max_total = 256;
  for (const auto& q : generate_requests(spec, 3)) {
    EXPECT_EQ(q.arrival_ns, 0);
    EXPECT_GE(q.prompt, 1);
    EXPECT_LE(q.prompt, 100);
    EXPECT_GE(q.output, 1);
    EXPECT_LE(q.prompt + q.output, 256);
  }
}

TEST(Requests, EmpiricalPairsFromACsvFile) {
  const std::string path = ::testing::TempDir() + "/lengths_" + std::to_string(::getpid());
  std::ofstream(path) << "prompt,output\n10,20\n30,40\n";
  RequestSpec spec;
  spec.count = 50;
  spec.empirical = read_length_pairs(path);
  ASSERT_EQ(spec.empirical.size(), 2u);
  int seen10 = 0;
  for (const auto& q : generate_requests(spec, 5)) {
    EXPECT_TRUE((q.prompt == 10 && q.output == 20) || (q.prompt == 30 && q.output == 40));
    seen10 += q.prompt == 10;
  }
  EXPECT_GT(seen10, 0);
  EXPECT_LT(seen10, 50);
  std::ofstream(path) << "10,20\n30,x\n";
  EXPECT_EQ(error_of([&] { read_length_pairs(path); }),
            path + ":2: expected 'prompt,output' (two integers), got '30,x'");
  std::ofstream(path) << "10,0\n";
  EXPECT_EQ(error_of([&] { read_length_pairs(path); }), path + ":1: lengths must be at least 1");
  std::filesystem::remove(path);
  EXPECT_EQ(error_of([&] { read_length_pairs(path); }), path + ": cannot open file");
  // Issue 20, defect 26: a directory said "no (prompt, output) pairs".
  EXPECT_EQ(error_of([&] { read_length_pairs(::testing::TempDir()); }),
            ::testing::TempDir() + ": is a directory, not a file");
}

TEST(Requests, ImpossibleSpecsAreErrors) {
  RequestSpec spec;
  spec.max_prompt = 1024;
  EXPECT_EQ(error_of([&] { generate_requests(spec, 1); }),
            "requests: max_prompt 1024 must be in [1, max_total 1024)");
  spec = {};
  spec.count = 0;
  EXPECT_EQ(error_of([&] { generate_requests(spec, 1); }), "requests: count must be at least 1");
}

}  // namespace
}  // namespace wallsim::workloads
