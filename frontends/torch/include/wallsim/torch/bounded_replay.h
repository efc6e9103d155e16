// The bounded replay of a program (bound=NAME<=MAX;...): tensors run with each named axis at
// MAX, the real extent a run-time scalar; ops that reduce or contract over such an axis mask
// what lies past the real extent first, so one plan serves every length. BoundedReplay decides,
// once per program and without a runtime, how each op runs at the bounds and which run-time
// scalars the masks read; an op whose bounded replay would not be exact is refused with a
// one-line error. With no bounds every op runs as captured.
//
// Shards (a data-parallel replay, dp=N): each axis named a sharded dim (or a composite of it)
// runs at exactly its captured extent / N, this rank's rows: no padding, so no masks (a matmul or
// reduction over the rows is this rank's partial sum). A slice of such an axis must take all of
// it, and a concat along it or a position relative to it is refused (a row index is global).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wallsim/torch/program.h"

namespace wallsim::torch {

// Input `input`'s axis `axis` is filled with `fill` past its real extent before the op.
struct BoundedMask {
  size_t input = 0;
  size_t axis = 0;
  float fill = 0;
};

// A slice of one position relative to a bounded axis' real extent (x[:, -1]): the row at the
// run-time position, picked by a mask and a sum along the axis (no dynamic slice op).
struct BoundedGather {
  size_t axis = 0;
  int64_t at = 0;  // the captured position (the dim's real extent + the relative offset)
};

// How one op event runs: its attributes (bounded: shapes at the bounds), masks and gather.
struct BoundedOp {
  std::map<std::string, compiler_stub::AttrValue> attrs;
  std::vector<BoundedMask> masks;
  std::optional<BoundedGather> gather;
};

class BoundedReplay {
 public:
  // `bounds`: MAX per dim name, each a dim the program names. Throws base::InputError
  // (program.file, "events[i] (kind ...): ...") for an extent over its bound or an op whose
  // bounded replay would not be exact. `program` must outlive this.
  BoundedReplay(const Program& program, std::map<std::string, int64_t> bounds,
                std::map<std::string, int64_t> shards = {});

  const std::map<std::string, int64_t>& bounds() const { return m_bounds; }
  const BoundedOp& op(size_t event_index) const { return m_ops.at(event_index); }
  // Every tensor the program defines, by id.
  const ProgramTensor& tensor(int32_t id) const { return m_defs.at(id); }

  // The axis' bound, or -1 when it runs at its captured extent. A named axis of extent 1 (the
  // position a select picked, a new token) runs at its extent.
  // A composite name, "F*seq" or "seq*F", is an axis a reshape merged from a named axis and
  // others of F elements in all (nn.Linear's [B, T, D] -> [B*T, D]): it runs at F times the
  // bound, the padded rows of each of the F blocks inside it.
  int64_t bound_of(const ProgramTensor& t, size_t axis) const;
  // The axis' sharding (N of its dim's shard), or 1.
  int64_t shards_of(const ProgramTensor& t, size_t axis) const;
  // The extent the axis runs at: its bound, its captured extent / N when sharded, or its
  // captured extent.
  int64_t run_extent(const ProgramTensor& t, size_t axis) const;
  std::vector<int64_t> run_shape(const ProgramTensor& t) const;

  // Scalars are named by the offset of a tensor's real extent from its step's base extent (the
  // largest of that dim defined in the step), so steps of one structure share plans.
  std::string scalar_name(const std::string& dim, int64_t offset) const;
  int64_t base_extent(size_t step, const std::string& dim) const { return m_base[step].at(dim); }
  // Per bounded dim, the offsets of the scalars the masks and gathers read.
  const std::map<std::string, std::set<int64_t>>& scalar_offsets() const {
    return m_scalar_offsets;
  }
  // The bounded dim a one-position slice's start is relative to.
  static const std::string& gather_dim(const Event& e);

 private:
  [[noreturn]] void fail(const Event& e, const std::string& problem) const;
  static std::pair<std::string, int64_t> split_composite(const std::string& n);
  bool composite_bounded(const ProgramTensor& t, size_t axis) const;
  bool any_bounded(const ProgramTensor& t) const;
  bool any_sharded(const ProgramTensor& t) const;
  BoundedOp plan_op(const Event& e);
  void plan_sharded(const Event& e, BoundedOp& r) const;
  size_t step_of(size_t event) const;
  void check_extents();
  void check_bounded_types();

  const Program& m_program;
  std::map<std::string, int64_t> m_bounds;
  std::map<std::string, int64_t> m_shards;             // dim name -> N
  std::map<size_t, BoundedOp> m_ops;                   // by op event index
  std::unordered_map<int32_t, ProgramTensor> m_defs;   // every tensor, by id
  std::vector<std::map<std::string, int64_t>> m_base;  // per step: base extent per bounded dim
  std::map<std::string, std::set<int64_t>> m_scalar_offsets;
};

}  // namespace wallsim::torch
