// Functional semantics of the compute instructions, on float tiles (Eigen).
#include "wallsim/engines/functional.h"

#include <cmath>
#include <limits>

namespace wallsim::engines {
namespace {

using isa::Opcode;
using memory::Tile;

float scalar_value(const isa::Instruction& in, const memory::MemoryMap& mem) {
  if (in.scalar.scalar < 0) return static_cast<float>(in.scalar.imm);
  return static_cast<float>((*mem.scalars)[in.scalar.scalar]);
}

template <class F>
void map_binary(const Tile& a, const Tile& b, Tile& out, F f) {
  out.resize(a.rows(), a.cols());
  const float* pa = a.data();
  const float* pb = b.data();
  float* po = out.data();
  for (Eigen::Index i = 0, n = a.size(); i < n; ++i) po[i] = f(pa[i], pb[i]);
}

void binary(isa::AluOp op, const Tile& a, const Tile& b, Tile& out) {
  switch (op) {
    case isa::AluOp::add:
      out = a + b;
      return;
    case isa::AluOp::sub:
      out = a - b;
      return;
    case isa::AluOp::mul:
      out = a.cwiseProduct(b);
      return;
    default:
      map_binary(a, b, out, [op](float x, float y) { return apply_alu(op, x, y); });
  }
}

}  // namespace

float apply_alu(isa::AluOp op, float a, float b) {
  switch (op) {
    case isa::AluOp::add:
      return a + b;
    case isa::AluOp::sub:
      return a - b;
    case isa::AluOp::mul:
      return a * b;
    case isa::AluOp::div:
      return a / b;
    case isa::AluOp::max:
      return std::fmax(a, b);
    case isa::AluOp::min:
      return std::fmin(a, b);
    case isa::AluOp::eq:
      return a == b ? 1.0f : 0.0f;
    case isa::AluOp::ne:
      return a != b ? 1.0f : 0.0f;
    case isa::AluOp::lt:
      return a < b ? 1.0f : 0.0f;
    case isa::AluOp::le:
      return a <= b ? 1.0f : 0.0f;
    case isa::AluOp::gt:
      return a > b ? 1.0f : 0.0f;
    case isa::AluOp::ge:
      return a >= b ? 1.0f : 0.0f;
  }
  return 0.0f;
}

float apply_activation(isa::ActFn fn, float x) {
  switch (fn) {
    case isa::ActFn::identity:
      return x;
    case isa::ActFn::relu:
      return x > 0.0f ? x : 0.0f;
    case isa::ActFn::gelu:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case isa::ActFn::silu:
      return x / (1.0f + std::exp(-x));
    case isa::ActFn::exp:
      return std::exp(x);
    case isa::ActFn::log:
      return std::log(x);
    case isa::ActFn::tanh:
      return std::tanh(x);
    case isa::ActFn::sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case isa::ActFn::rsqrt:
      return 1.0f / std::sqrt(x);
    case isa::ActFn::sqrt:
      return std::sqrt(x);
    case isa::ActFn::square:
      return x * x;
    case isa::ActFn::reciprocal:
      return 1.0f / x;
    case isa::ActFn::abs:
      return std::fabs(x);
  }
  return x;
}

void execute_compute(const isa::Instruction& in, const memory::MemoryMap& mem) {
  Tile a, b, c, out;
  switch (in.op) {
    case Opcode::matmul: {
      memory::read_tile(mem, in.src[0], a);  // stationary [K x M]
      memory::read_tile(mem, in.src[1], b);  // moving [K x N]
      out.noalias() = a.transpose() * b;     // [M x N], fp32 accumulation
      if (!in.start) {
        memory::read_tile(mem, in.dst, c);
        out += c;
      }
      break;
    }
    case Opcode::transpose:
      memory::read_tile(mem, in.src[0], a);
      out = a.transpose();
      break;
    case Opcode::tensor_tensor:
      memory::read_tile(mem, in.src[0], a);
      memory::read_tile(mem, in.src[1], b);
      binary(in.alu, a, b, out);
      break;
    case Opcode::tensor_scalar: {
      memory::read_tile(mem, in.src[0], a);
      const float s = scalar_value(in, mem);
      out.resize(a.rows(), a.cols());
      const isa::AluOp op = in.alu;
      for (Eigen::Index i = 0; i < a.size(); ++i) {
        out.data()[i] = in.reverse ? apply_alu(op, s, a.data()[i]) : apply_alu(op, a.data()[i], s);
      }
      break;
    }
    case Opcode::tensor_reduce: {
      memory::read_tile(mem, in.src[0], a);
      const isa::AccessPattern& src = in.src[0];
      const Eigen::Index inner = src.num_free ? src.free[src.num_free - 1].size : 1;
      Eigen::Map<const Tile> rows(a.data(), a.size() / inner, inner);
      Tile reduced(rows.rows(), 1);
      if (in.alu == isa::AluOp::add) {
        reduced = rows.rowwise().sum();
      } else if (in.alu == isa::AluOp::max) {
        reduced = rows.rowwise().maxCoeff();
      } else {
        reduced = rows.rowwise().minCoeff();
      }
      out = Eigen::Map<Tile>(reduced.data(), a.rows(), a.cols() / inner);
      break;
    }
    case Opcode::tensor_copy:
      memory::read_tile(mem, in.src[0], out);
      break;
    case Opcode::memset:
      out.setConstant(in.dst.partitions, in.dst.free_elements(), static_cast<float>(in.value));
      break;
    case Opcode::iota: {
      out.resize(in.dst.partitions, in.dst.free_elements());
      for (Eigen::Index p = 0; p < out.rows(); ++p) {
        for (Eigen::Index i = 0; i < out.cols(); ++i) {
          out(p, i) =
              static_cast<float>(in.value + in.partition_step * double(p) + in.step * double(i));
        }
      }
      break;
    }
    case Opcode::select:
      memory::read_tile(mem, in.src[0], a);
      memory::read_tile(mem, in.src[1], b);
      memory::read_tile(mem, in.src[2], c);
      out = (a.array() != 0.0f).select(b, c);
      break;
    case Opcode::activation:
    case Opcode::activation_reduce: {
      memory::read_tile(mem, in.src[0], a);
      const float scale = static_cast<float>(in.scale), bias = static_cast<float>(in.bias);
      out.resize(a.rows(), a.cols());
      for (Eigen::Index i = 0; i < a.size(); ++i) {
        out.data()[i] = apply_activation(in.act, a.data()[i] * scale + bias);
      }
      if (in.op == Opcode::activation_reduce) {
        Tile sums = out.rowwise().sum();
        memory::write_tile(mem, in.accum, sums);
      }
      break;
    }
    case Opcode::dma_copy:
    case Opcode::dma_gather:
    case Opcode::dma_scatter:
    case Opcode::all_reduce:
    case Opcode::all_gather:
    case Opcode::reduce_scatter:
    case Opcode::all_to_all:
    case Opcode::permute:
    case Opcode::send:
    case Opcode::recv:
      throw memory::MemoryError("DMA instruction issued to a compute engine");
  }
  memory::write_tile(mem, in.dst, out);
}

}  // namespace wallsim::engines
