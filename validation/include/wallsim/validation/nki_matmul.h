// The NKI matrix-multiplication tutorial's kernels as wallsim plans: the four versions AWS
// measured on a Trn1 NeuronCore (aws-neuron/aws-neuron-sdk, nki/tutorials/
// matrix_multiplication.rst, the table present from SDK 2.20 to late 2025), rebuilt from their
// loop structure — tile and block sizes, loop order, which loads sit in which loop, copies,
// stores — with NkiKernel. result[M, N] = lhsT[K, M]^T . rhs[K, N].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/isa/arch_spec.h"
#include "wallsim/isa/plan.h"

namespace wallsim::validation {

enum class NkiMatmul {
  tiled,          // nki_matmul_tiled_: both tiles loaded in the innermost k loop
  hoisted,        // nki_matmul_hoist_load_: lhsT tiles per m, rhs tiles per n
  blocked_free,   // nki_matmul_block_free_dimension_: 2 x 128 of M, 2 x 512 of N per block
  fully_blocked,  // nki_matmul_fully_optimized_: blocks of 16 M, 2 N and 8 K tiles,
                  // partial sums accumulated in SBUF, two result tiles stored as one
};
std::vector<NkiMatmul> all_nki_matmuls();
std::string name_of(NkiMatmul k);  // the tutorial's kernel name, e.g. "nki_matmul_tiled_"

struct NkiMatmulShape {
  int64_t k = 8192, m = 4096, n = 8192;  // the tutorial's benchmark: [4096,8192] @ [8192,8192]
  isa::DType dtype = isa::DType::bf16;   // inputs and result; PSUM accumulates in fp32
};

// The kernel as a plan: tensors "lhsT" [K, M] and "rhs" [K, N] (inputs), "result" [M, N]
// (output). A tile declared inside a loop gets up to `buffers` rotating buffers, fewer where
// SBUF has no room, PSUM tiles one per bank. The Neuron compiler's own choice is not published;
// four keeps the DMA queues busy, as the profiles of the Trn2 guide show them (the tiled kernel
// on Trn2: DMA active 99.93 %; with two buffers, its loads wait for buffers). Throws
// std::invalid_argument when a dimension is not a multiple of the kernel's block.
isa::Plan nki_matmul_plan(NkiMatmul kernel, const NkiMatmulShape& shape, const isa::ArchSpec& arch,
                          int buffers = 4);

// Bytes every launch of the kernel reads from HBM (operand tiles, as loaded) and writes.
struct NkiTraffic {
  int64_t read = 0, written = 0;
};
NkiTraffic nki_matmul_traffic(NkiMatmul kernel, const NkiMatmulShape& shape);

}  // namespace wallsim::validation
