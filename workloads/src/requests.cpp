// The request generator: Poisson arrivals, log-normal or empirical lengths, clipped.
#include "wallsim/workloads/requests.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "wallsim/base/params.h"

namespace wallsim::workloads {

namespace {

// Uniform in (0, 1): 53 random bits, never 0.
double uniform(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller (one of the pair).
double normal(std::mt19937_64& rng) {
  const double u = uniform(rng), v = uniform(rng);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

// A log-normal draw with the given mean: mu = ln(mean) - sigma^2 / 2. At least 1.
int64_t lognormal(std::mt19937_64& rng, double mean, double sigma) {
  const double mu = std::log(mean) - sigma * sigma / 2;
  const double x = std::exp(mu + sigma * normal(rng));
  return std::max<int64_t>(1, std::llround(std::min(x, 1e12)));
}

}  // namespace

std::vector<Request> generate_requests(const RequestSpec& spec, uint64_t seed) {
  const std::string where = "requests";
  if (spec.count < 1) throw base::InputError(where, "count must be at least 1");
  if (spec.max_prompt < 1 || spec.max_prompt >= spec.max_total) {
    throw base::InputError(where, "max_prompt " + std::to_string(spec.max_prompt) +
                                      " must be in [1, max_total " +
                                      std::to_string(spec.max_total) + ")");
  }
  if (spec.rate < 0) throw base::InputError(where, "rate must not be negative");
  const bool empirical = !spec.empirical.empty();
  if (!empirical && (spec.prompt_mean < 1 || spec.output_mean < 1 || spec.sigma < 0)) {
    throw base::InputError(where, "length means must be >= 1 and sigma >= 0");
  }
  std::mt19937_64 arrivals(seed * 2 + 1), lengths(seed * 2 + 2);
  std::vector<Request> out;
  double t_s = 0;
  for (int64_t i = 0; i < spec.count; ++i) {
    Request r;
    r.id = i;
    if (spec.rate > 0) {
      t_s += -std::log(uniform(arrivals)) / spec.rate;
      r.arrival_ns = static_cast<int64_t>(std::llround(t_s * 1e9));
    }
    int64_t prompt, output;
    if (empirical) {
      const auto& pair = spec.empirical[static_cast<size_t>(lengths() % spec.empirical.size())];
      prompt = pair.first;
      output = pair.second;
    } else {
      prompt = lognormal(lengths, spec.prompt_mean, spec.sigma);
      output = lognormal(lengths, spec.output_mean, spec.sigma);
    }
    r.prompt = std::clamp<int64_t>(prompt, 1, spec.max_prompt);
    r.output = std::clamp<int64_t>(output, 1, spec.max_total - r.prompt);
    out.push_back(r);
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> read_length_pairs(const std::string& path) {
  // read_input_file: a directory, FIFO or device is refused by name, and the size is bounded.
  std::istringstream in(base::read_input_file(path, int64_t{64} << 20));
  std::vector<std::pair<int64_t, int64_t>> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string a, b, extra;
    const bool two = std::getline(fields, a, ',') && std::getline(fields, b, ',') &&
                     !std::getline(fields, extra, ',');
    auto number = [](const std::string& s, int64_t* v) {
      size_t used = 0;
      try {
        *v = std::stoll(s, &used);
      } catch (const std::exception&) {
        return false;
      }
      while (used < s.size() && std::isspace(static_cast<unsigned char>(s[used]))) ++used;
      return used == s.size();
    };
    int64_t p = 0, o = 0;
    if (two && number(a, &p) && number(b, &o)) {
      if (p < 1 || o < 1) {
        throw base::InputError(path + ":" + std::to_string(n), "lengths must be at least 1");
      }
      out.emplace_back(p, o);
    } else if (!(n == 1 && two)) {  // a header line is allowed first
      throw base::InputError(path + ":" + std::to_string(n),
                             "expected 'prompt,output' (two integers), got '" + line + "'");
    }
  }
  if (out.empty()) throw base::InputError(path, "no (prompt, output) pairs");
  return out;
}

}  // namespace wallsim::workloads
