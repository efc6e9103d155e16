// Collective algorithms as steps of sends, Neuron's size-based choice, and the closed forms.
#include "wallsim/collectives/schedule.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace wallsim::collectives {
namespace {

constexpr std::array<std::string_view, kNumAlgorithms> kAlgorithmNames = {"auto", "ring", "mesh",
                                                                          "rhd"};
constexpr std::array<std::string_view, kNumHierarchies> kHierarchyNames = {
    "auto", "flat", "instances", "dimensions"};
constexpr std::array<std::string_view, kNumCollectiveOps> kOpNames = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "permute", "send_recv"};

bool power_of_two(int p) { return p > 0 && (p & (p - 1)) == 0; }
int log2i(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}
int mod(int a, int p) { return ((a % p) + p) % p; }

// Every rank sends `bytes` to rank + `offset`.
Step shift(int p, int offset, double bytes, double reduce) {
  Step s;
  for (int r = 0; r < p; ++r) s.sends.push_back({r, mod(r + offset, p), bytes});
  s.reduce_bytes = reduce;
  return s;
}

// Every rank sends `bytes` to every other rank.
Step direct(int p, double bytes, double reduce) {
  Step s;
  for (int r = 0; r < p; ++r) {
    for (int k = 1; k < p; ++k) s.sends.push_back({r, mod(r + k, p), bytes});
  }
  s.reduce_bytes = reduce;
  return s;
}

// A ring step: every rank sends `bytes` to rank + 1, or with two directions half to rank + 1
// and half to rank - 1.
Step ring_step(int p, int directions, double bytes, double reduce) {
  if (directions < 2 || p < 3) return shift(p, 1, bytes, reduce);
  Step s = shift(p, 1, bytes / 2, reduce);
  for (int r = 0; r < p; ++r) s.sends.push_back({r, mod(r - 1, p), bytes / 2});
  return s;
}

// Every rank exchanges `bytes` with rank xor `distance`.
Step exchange(int p, int distance, double bytes, double reduce) {
  Step s;
  for (int r = 0; r < p; ++r) s.sends.push_back({r, r ^ distance, bytes});
  s.reduce_bytes = reduce;
  return s;
}

// Recursive halving: log2(p) exchanges at distance p/2, p/4, ... of half the remaining data,
// each reduced (a reduce-scatter of `n`).
void halving(Schedule& s, int p, double n, bool reduce) {
  double part = n;
  for (int d = p / 2; d >= 1; d /= 2) {
    part /= 2;
    s.steps.push_back(exchange(p, d, part, reduce ? part : 0));
  }
}

// Recursive doubling: log2(p) exchanges at distance 1, 2, ... of what each holds, doubling (an
// all-gather to `n` from n/p each).
void doubling(Schedule& s, int p, double n) {
  double part = n / p;
  for (int d = 1; d < p; d *= 2) {
    s.steps.push_back(exchange(p, d, part, 0));
    part *= 2;
  }
}

}  // namespace

std::string_view name_of(Algorithm a) { return kAlgorithmNames[static_cast<size_t>(a)]; }
std::string_view name_of(Hierarchy h) { return kHierarchyNames[static_cast<size_t>(h)]; }
std::string_view name_of(CollectiveOp op) { return kOpNames[static_cast<size_t>(op)]; }

std::optional<CollectiveOp> parse_collective_op(std::string_view s) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == s) return static_cast<CollectiveOp>(i);
  }
  return std::nullopt;
}

std::optional<CollectiveOp> collective_op_of(isa::Opcode op) {
  switch (op) {
    case isa::Opcode::all_reduce:
      return CollectiveOp::all_reduce;
    case isa::Opcode::all_gather:
      return CollectiveOp::all_gather;
    case isa::Opcode::reduce_scatter:
      return CollectiveOp::reduce_scatter;
    case isa::Opcode::all_to_all:
      return CollectiveOp::all_to_all;
    case isa::Opcode::permute:
      return CollectiveOp::permute;
    case isa::Opcode::send:
    case isa::Opcode::recv:
      return CollectiveOp::send_recv;
    default:
      return std::nullopt;
  }
}

Algorithm choose_algorithm(CollectiveOp op, int p, double bytes, const CollectivesConfig& c) {
  if (op == CollectiveOp::permute || op == CollectiveOp::send_recv) return Algorithm::mesh;
  Algorithm a = c.algorithm;
  if (a == Algorithm::automatic) {
    a = bytes < double(c.mesh_below_bytes)  ? Algorithm::mesh
        : bytes < double(c.rhd_below_bytes) ? Algorithm::rhd
                                            : Algorithm::ring;
  }
  if (op == CollectiveOp::all_to_all && a == Algorithm::rhd) a = Algorithm::ring;
  if (a == Algorithm::rhd && !power_of_two(p)) a = Algorithm::ring;
  return a;
}

Schedule make_schedule(CollectiveOp op, Algorithm a, int p, double n, int peer,
                       int ring_directions) {
  if (p < 1) throw std::invalid_argument("make_schedule: a collective needs a rank");
  if (a == Algorithm::automatic)
    throw std::invalid_argument("make_schedule: choose the algorithm first");
  Schedule s;
  s.algorithm = a;
  if (op == CollectiveOp::send_recv) {
    s.algorithm = Algorithm::mesh;
    s.steps.push_back({{{0, 1, n}}, 0});
    return s;
  }
  if (p == 1) return s;  // one rank: nothing moves
  if (op == CollectiveOp::permute) {
    s.algorithm = Algorithm::mesh;
    if (mod(peer, p) != 0) s.steps.push_back(shift(p, peer, n, 0));
    return s;
  }
  if (a == Algorithm::rhd && !power_of_two(p)) {
    throw std::invalid_argument(
        "make_schedule: recursive halving/doubling needs a power-of-two "
        "rank count, not " +
        std::to_string(p));
  }
  const double chunk = n / p;
  switch (op) {
    case CollectiveOp::all_reduce:
      if (a == Algorithm::ring) {
        for (int i = 0; i < p - 1; ++i)
          s.steps.push_back(ring_step(p, ring_directions, chunk, chunk));
        for (int i = 0; i < p - 1; ++i) s.steps.push_back(ring_step(p, ring_directions, chunk, 0));
      } else if (a == Algorithm::mesh) {
        s.steps.push_back(direct(p, chunk, chunk * (p - 1)));
        s.steps.push_back(direct(p, chunk, 0));
      } else {
        halving(s, p, n, true);
        doubling(s, p, n);
      }
      break;
    case CollectiveOp::all_gather:
      if (a == Algorithm::ring) {
        for (int i = 0; i < p - 1; ++i) s.steps.push_back(ring_step(p, ring_directions, chunk, 0));
      } else if (a == Algorithm::mesh) {
        s.steps.push_back(direct(p, chunk, 0));
      } else {
        doubling(s, p, n);
      }
      break;
    case CollectiveOp::reduce_scatter:
      if (a == Algorithm::ring) {
        for (int i = 0; i < p - 1; ++i)
          s.steps.push_back(ring_step(p, ring_directions, chunk, chunk));
      } else if (a == Algorithm::mesh) {
        s.steps.push_back(direct(p, chunk, chunk * (p - 1)));
      } else {
        halving(s, p, n, true);
      }
      break;
    case CollectiveOp::all_to_all:
      if (a == Algorithm::mesh) {
        s.steps.push_back(direct(p, chunk, 0));
      } else {
        // Pairwise: in step k every rank sends its block for rank + k.
        s.algorithm = Algorithm::ring;
        for (int k = 1; k < p; ++k) s.steps.push_back(shift(p, k, chunk, 0));
      }
      break;
    case CollectiveOp::permute:
    case CollectiveOp::send_recv:
      break;
  }
  return s;
}

double closed_form_seconds(CollectiveOp op, Algorithm a, int p, double n, const AlphaBeta& ab,
                           double launch_s) {
  const double be = ab.beta_s_per_byte, ga = ab.gamma_s_per_byte;
  // One peer's step: alpha and one handshake.
  const double one = ab.alpha_s + ab.handshake_s;
  if (op == CollectiveOp::send_recv) return launch_s + one + n * be;
  if (p == 1) return launch_s;
  if (op == CollectiveOp::permute) return launch_s + one + n * be;
  const double f = double(p - 1) / p;  // the share of the data a rank sends (per pass)
  const double lg = log2i(p);
  // Steps per pass: p - 1 for ring (pairwise), 1 for mesh, log2(p) for rhd; each costs alpha
  // plus a handshake per peer: p - 1 for mesh, the ring's directions, else 1.
  const double steps = a == Algorithm::ring ? p - 1 : a == Algorithm::mesh ? 1 : lg;
  const int dirs = ab.ring_directions >= 2 && p > 2 ? 2 : 1;
  const double peers = a == Algorithm::mesh ? p - 1 : a == Algorithm::ring ? dirs : 1;
  const double al = ab.alpha_s + peers * ab.handshake_s;
  switch (op) {
    case CollectiveOp::all_reduce:
      return launch_s + 2 * steps * al + 2 * f * n * be + f * n * ga;
    case CollectiveOp::all_gather:
      return launch_s + steps * al + f * n * be;
    case CollectiveOp::reduce_scatter:
      return launch_s + steps * al + f * n * (be + ga);
    case CollectiveOp::all_to_all:
      // Pairwise: one peer per step whatever the ring's directions.
      return launch_s + (a == Algorithm::mesh ? al : (p - 1) * one) + f * n * be;
    case CollectiveOp::permute:
    case CollectiveOp::send_recv:
      break;
  }
  return launch_s + one + n * be;
}

int peers_per_step(const Step& step) {
  std::map<int, int> sends;
  int most = 0;
  for (const Send& s : step.sends) most = std::max(most, ++sends[s.from]);
  return most;
}

std::string Schedule::label() const {
  if (stages.empty()) return std::string(name_of(algorithm));
  std::string s = "hier:";
  for (size_t i = 0; i < stages.size(); ++i) {
    s += (i ? "/" : "") + std::string(name_of(stages[i].algorithm));
  }
  return s;
}

std::vector<Stage> hierarchical_stages(CollectiveOp op, const std::vector<int>& all_levels,
                                       double n) {
  // Levels of one rank take no stage; their numbering stays that of `all_levels`.
  std::vector<int> at;
  for (size_t l = 0; l < all_levels.size(); ++l) {
    if (all_levels[l] < 1) throw std::invalid_argument("hierarchical_stages: a level of no rank");
    if (all_levels[l] > 1) at.push_back(static_cast<int>(l));
  }
  std::vector<Stage> out;
  if (at.empty()) return out;
  const auto size = [&](int l) { return all_levels[static_cast<size_t>(l)]; };
  switch (op) {
    case CollectiveOp::all_reduce: {
      double part = n;
      for (size_t i = 0; i + 1 < at.size(); ++i) {
        out.push_back({CollectiveOp::reduce_scatter, at[i], size(at[i]), part});
        part /= size(at[i]);
      }
      out.push_back({CollectiveOp::all_reduce, at.back(), size(at.back()), part});
      for (size_t i = at.size() - 1; i-- > 0;) {
        part *= size(at[i]);
        out.push_back({CollectiveOp::all_gather, at[i], size(at[i]), part});
      }
      break;
    }
    case CollectiveOp::reduce_scatter: {
      double part = n;
      for (int l : at) {
        out.push_back({CollectiveOp::reduce_scatter, l, size(l), part});
        part /= size(l);
      }
      break;
    }
    case CollectiveOp::all_gather: {
      double part = n;
      for (int l : at) part /= size(l);
      for (size_t i = at.size(); i-- > 0;) {
        part *= size(at[i]);
        out.push_back({CollectiveOp::all_gather, at[i], size(at[i]), part});
      }
      break;
    }
    default:
      throw std::invalid_argument("hierarchical_stages: " + std::string(name_of(op)) +
                                  " has no hierarchical form");
  }
  return out;
}

Schedule make_hierarchical_schedule(CollectiveOp op, const std::vector<int>& levels, double n,
                                    const std::function<Algorithm(const Stage&)>& choose,
                                    int ring_directions) {
  Schedule s;
  s.stages = hierarchical_stages(op, levels, n);
  int p = 1;
  for (int d : levels) p *= d;
  for (Stage& st : s.stages) {
    st.algorithm = choose(st);
    const Schedule sub =
        make_schedule(st.op, st.algorithm, st.group_size, st.bytes, 1, ring_directions);
    st.algorithm = sub.algorithm;
    int stride = 1;
    for (int l = 0; l < st.level; ++l) stride *= levels[static_cast<size_t>(l)];
    // The groups of this level: every rank whose index along the level is 0 leads one.
    std::vector<int> bases;
    for (int r = 0; r < p; ++r) {
      if (r / stride % st.group_size == 0) bases.push_back(r);
    }
    for (const Step& step : sub.steps) {
      Step merged;
      merged.reduce_bytes = step.reduce_bytes;
      for (int base : bases) {
        for (const Send& x : step.sends) {
          merged.sends.push_back({base + x.from * stride, base + x.to * stride, x.bytes});
        }
      }
      s.steps.push_back(std::move(merged));
    }
  }
  if (!s.stages.empty()) s.algorithm = s.stages.front().algorithm;
  return s;
}

double hierarchical_closed_form_seconds(const std::vector<Stage>& stages,
                                        const std::vector<AlphaBeta>& per_level, double launch_s) {
  double t = launch_s;
  for (const Stage& st : stages) {
    t += closed_form_seconds(st.op, st.algorithm, st.group_size, st.bytes,
                             per_level.at(static_cast<size_t>(st.level)));
  }
  return t;
}

double busbw_factor(CollectiveOp op, int p) {
  switch (op) {
    case CollectiveOp::all_reduce:
      return 2.0 * (p - 1) / p;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      return double(p - 1) / p;
    case CollectiveOp::permute:
    case CollectiveOp::send_recv:
      break;
  }
  return 1.0;
}

}  // namespace wallsim::collectives
