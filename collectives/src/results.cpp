// The functional meaning of each collective.
#include "wallsim/collectives/results.h"

#include <cmath>

namespace wallsim::collectives {
namespace {

float combine(isa::AluOp alu, float a, float b) {
  switch (alu) {
    case isa::AluOp::max:
      return std::fmax(a, b);
    case isa::AluOp::min:
      return std::fmin(a, b);
    default:
      return a + b;
  }
}

// The element-wise reduction of every rank's input, in rank order.
std::vector<float> reduce(isa::AluOp alu, const std::vector<std::vector<float>>& in) {
  std::vector<float> acc = in.at(0);
  for (size_t r = 1; r < in.size(); ++r) {
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = combine(alu, acc[i], in[r][i]);
  }
  return acc;
}

}  // namespace

std::vector<std::vector<float>> collective_results(CollectiveOp op, isa::AluOp alu, int peer,
                                                   const std::vector<std::vector<float>>& in) {
  const size_t p = in.size();
  std::vector<std::vector<float>> out(p);
  if (p == 0) return out;
  const size_t n = in[0].size();
  switch (op) {
    case CollectiveOp::all_reduce: {
      const std::vector<float> sum = reduce(alu, in);
      for (auto& o : out) o = sum;
      break;
    }
    case CollectiveOp::all_gather:
      for (auto& o : out) {
        for (const auto& x : in) o.insert(o.end(), x.begin(), x.end());
      }
      break;
    case CollectiveOp::reduce_scatter: {
      const std::vector<float> sum = reduce(alu, in);
      const size_t m = n / p;
      for (size_t r = 0; r < p; ++r) out[r].assign(sum.begin() + r * m, sum.begin() + (r + 1) * m);
      break;
    }
    case CollectiveOp::all_to_all: {
      const size_t m = n / p;
      for (size_t r = 0; r < p; ++r) {
        for (size_t j = 0; j < p; ++j) {
          out[r].insert(out[r].end(), in[j].begin() + r * m, in[j].begin() + (r + 1) * m);
        }
      }
      break;
    }
    case CollectiveOp::permute: {
      const int ip = static_cast<int>(p);
      for (int r = 0; r < ip; ++r) out[r] = in[((r - peer) % ip + ip) % ip];
      break;
    }
    case CollectiveOp::send_recv:
      out = in;
      break;
  }
  return out;
}

}  // namespace wallsim::collectives
