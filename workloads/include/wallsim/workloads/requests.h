// A seeded stream of serving requests: arrival times and prompt / output lengths. The same
// spec and seed give the same stream on every platform (the draws use std::mt19937_64 with a
// fixed mapping, not the standard library's distributions, whose output is not specified).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wallsim::workloads {

struct Request {
  int64_t id = 0;
  int64_t arrival_ns = 0;  // after the serving run starts
  int64_t prompt = 0;      // tokens
  int64_t output = 0;      // tokens to generate (>= 1)
};

struct RequestSpec {
  int64_t count = 200;
  // Arrivals: a Poisson process at `rate` requests per second; rate 0: all at time 0.
  double rate = 0;
  // Lengths: log-normal with these means and `sigma` (the log-space standard deviation), or
  // `empirical`: (prompt, output) pairs drawn uniformly with replacement.
  double prompt_mean = 161;  // ShareGPT means (vLLM paper, arXiv:2309.06180, Fig. 11)
  double output_mean = 338;
  double sigma = 1.0;
  std::vector<std::pair<int64_t, int64_t>> empirical;
  // Limits: a prompt is cut to `max_prompt`, then the output to `max_total - prompt`.
  int64_t max_prompt = 768;
  int64_t max_total = 1024;
};

// The stream, in arrival order (ids 0, 1, ...). Throws base::InputError for an impossible spec
// (max_prompt >= max_total, no empirical pairs, ...).
std::vector<Request> generate_requests(const RequestSpec& spec, uint64_t seed);

// (prompt, output) pairs from a CSV file: one pair per line, an optional header line.
// Throws base::InputError naming the file and line for anything it cannot read.
std::vector<std::pair<int64_t, int64_t>> read_length_pairs(const std::string& path);

}  // namespace wallsim::workloads
