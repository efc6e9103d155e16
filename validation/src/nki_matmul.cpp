// The NKI matmul tutorial's four kernels, loop for loop (nki_matmul.h).
#include "wallsim/validation/nki_matmul.h"

#include <stdexcept>

#include "wallsim/validation/nki_kernel.h"

namespace wallsim::validation {

using isa::MemSpace;

namespace {

constexpr int64_t kTileK = 128;  // nl.tile_size.pmax
constexpr int64_t kTileM = 128;  // nl.tile_size.gemm_stationary_fmax
constexpr int64_t kTileN = 512;  // nl.tile_size.gemm_moving_fmax

// Buffer counts for a kernel's pools: every pool gets one buffer, then, level by level (a
// second buffer for each before a third for any) and within a level in the order added (each
// kernel adds the tiles of its innermost loop first), more up to `most` while SBUF still has
// room; PSUM pools up to its bank count.
struct Budget {
  struct Want {
    MemSpace space;
    int64_t bytes;  // per partition, one copy
    int copies = 1;
  };
  std::vector<Want> wants;
  size_t add(MemSpace space, int64_t bytes) {
    wants.push_back({space, bytes});
    return wants.size() - 1;
  }
  void solve(const isa::ArchSpec& arch, int most) {
    auto used = [&](MemSpace s) {
      int64_t u = 0;
      for (const Want& w : wants) u += w.space == s ? w.bytes * w.copies : 0;
      return u;
    };
    for (MemSpace s : {MemSpace::sbuf, MemSpace::psum}) {
      if (used(s) > arch.bytes_per_partition(s)) {
        throw std::invalid_argument("nki_matmul_plan: the kernel's tiles do not fit in " +
                                    std::string(isa::name_of(s)));
      }
    }
    // Level by level: every pool that fits gets its second buffer before any gets a third.
    for (int level = 2; level <= 8; ++level) {
      for (Want& w : wants) {
        // PSUM: as many accumulation groups in flight as it has banks (NKI: up to eight).
        const int limit =
            w.space == MemSpace::psum ? int(arch.psum.bytes_per_partition / w.bytes) : most;
        if (w.copies + 1 == level && level <= limit &&
            used(w.space) + w.bytes <= arch.bytes_per_partition(w.space)) {
          ++w.copies;
        }
      }
    }
  }
  int copies(size_t i) const { return wants[i].copies; }
};

int64_t bytes(isa::DType d, int64_t elements) { return elements * isa::dtype_bytes(d); }
constexpr int64_t kPsumTile = kTileN * 4;  // one fp32 bank per partition

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("nki_matmul_plan: " + what);
}

// An array of `count` tiles, each with its own rotating buffers (one NKI ndarray of tiles).
std::vector<NkiKernel::TilePool> tiles(NkiKernel& kk, const std::string& name, int64_t count,
                                       isa::DType d, int64_t free, int copies) {
  std::vector<NkiKernel::TilePool> v;
  for (int64_t i = 0; i < count; ++i) {
    v.push_back(kk.pool(name + std::to_string(i), MemSpace::sbuf, d, kTileK, free, copies));
  }
  return v;
}

// The kernel's HBM tensors: lhsT [K, M] and rhs [K, N] in, result [M, N] out.
struct Operands {
  HbmTensor lhsT, rhs, out;
};
Operands operands(NkiKernel& kk, const NkiMatmulShape& s) {
  return {kk.hbm_tensor("lhsT", s.dtype, s.k, s.m, isa::TensorRole::input),
          kk.hbm_tensor("rhs", s.dtype, s.k, s.n, isa::TensorRole::input),
          kk.hbm_tensor("result", s.dtype, s.m, s.n, isa::TensorRole::output)};
}

isa::Plan tiled(const NkiMatmulShape& s, const isa::ArchSpec& arch, int most) {
  const isa::DType d = s.dtype;
  Budget b;
  const size_t a_i = b.add(MemSpace::sbuf, bytes(d, kTileM)),
               b_i = b.add(MemSpace::sbuf, bytes(d, kTileN)),
               r_i = b.add(MemSpace::sbuf, bytes(d, kTileN)),
               p_i = b.add(MemSpace::psum, kPsumTile);
  b.solve(arch, most);
  NkiKernel kk("nki_matmul_tiled_", arch);
  const auto [lhsT, rhs, out] = operands(kk, s);
  auto a_pool = kk.pool("lhsT_tile", MemSpace::sbuf, d, kTileK, kTileM, b.copies(a_i));
  auto b_pool = kk.pool("rhs_tile", MemSpace::sbuf, d, kTileK, kTileN, b.copies(b_i));
  auto r_pool = kk.pool("res_sb", MemSpace::sbuf, d, kTileM, kTileN, b.copies(r_i));
  auto p_pool =
      kk.pool("res_psum", MemSpace::psum, isa::DType::fp32, kTileM, kTileN, b.copies(p_i));
  const int64_t ks = s.k / kTileK;
  for (int64_t m = 0; m < s.m / kTileM; ++m) {
    for (int64_t n = 0; n < s.n / kTileN; ++n) {
      const Tile psum = p_pool.next();
      for (int64_t k = 0; k < ks; ++k) {
        const Tile a = a_pool.next(), bt = b_pool.next();
        kk.load(a, lhsT, k * kTileK, m * kTileM);
        kk.load(bt, rhs, k * kTileK, n * kTileN);
        kk.matmul(psum, a, bt, k == 0, k == ks - 1);
      }
      const Tile r = r_pool.next();
      kk.copy(r, psum);
      kk.store(out, m * kTileM, n * kTileN, r);
    }
  }
  return kk.build();
}

isa::Plan hoisted(const NkiMatmulShape& s, const isa::ArchSpec& arch, int most) {
  const isa::DType d = s.dtype;
  const int64_t ks = s.k / kTileK;
  Budget b;
  // Innermost first: a result per (m, n), rhs per n, lhsT per m.
  const size_t r_i = b.add(MemSpace::sbuf, bytes(d, kTileN)),
               b_i = b.add(MemSpace::sbuf, ks * bytes(d, kTileN)),
               a_i = b.add(MemSpace::sbuf, ks * bytes(d, kTileM)),
               p_i = b.add(MemSpace::psum, kPsumTile);
  b.solve(arch, most);
  NkiKernel kk("nki_matmul_hoist_load_", arch);
  const auto [lhsT, rhs, out] = operands(kk, s);
  auto a_tiles = tiles(kk, "lhsT_tiles", ks, d, kTileM, b.copies(a_i));
  auto b_tiles = tiles(kk, "rhs_tiles", ks, d, kTileN, b.copies(b_i));
  auto r_pool = kk.pool("res_sb", MemSpace::sbuf, d, kTileM, kTileN, b.copies(r_i));
  auto p_pool =
      kk.pool("res_psum", MemSpace::psum, isa::DType::fp32, kTileM, kTileN, b.copies(p_i));
  std::vector<Tile> a(static_cast<size_t>(ks)), bt(static_cast<size_t>(ks));
  for (int64_t m = 0; m < s.m / kTileM; ++m) {
    for (int64_t k = 0; k < ks; ++k) {
      a[k] = a_tiles[k].next();
      kk.load(a[k], lhsT, k * kTileK, m * kTileM);
    }
    for (int64_t n = 0; n < s.n / kTileN; ++n) {
      for (int64_t k = 0; k < ks; ++k) {
        bt[k] = b_tiles[k].next();
        kk.load(bt[k], rhs, k * kTileK, n * kTileN);
      }
      const Tile psum = p_pool.next();
      for (int64_t k = 0; k < ks; ++k) kk.matmul(psum, a[k], bt[k], k == 0, k == ks - 1);
      const Tile r = r_pool.next();
      kk.copy(r, psum);
      kk.store(out, m * kTileM, n * kTileN, r);
    }
  }
  return kk.build();
}

isa::Plan blocked_free(const NkiMatmulShape& s, const isa::ArchSpec& arch, int most) {
  const isa::DType d = s.dtype;
  constexpr int64_t kBm = 2, kBn = 2;  // TILES_IN_BLOCK_M, TILES_IN_BLOCK_N
  const int64_t ks = s.k / kTileK;
  require(s.m % (kBm * kTileM) == 0 && s.n % (kBn * kTileN) == 0,
          "blocked_free needs M a multiple of 256 and N of 1024");
  Budget b;
  // Innermost first: a result per (bm, bn), rhs per n block, lhsT per m block.
  const size_t r_i = b.add(MemSpace::sbuf, bytes(d, kTileN)),
               b_i = b.add(MemSpace::sbuf, kBn * ks * bytes(d, kTileN)),
               a_i = b.add(MemSpace::sbuf, kBm * ks * bytes(d, kTileM)),
               p_i = b.add(MemSpace::psum, kPsumTile);
  b.solve(arch, most);
  NkiKernel kk("nki_matmul_block_free_dimension_", arch);
  const auto [lhsT, rhs, out] = operands(kk, s);
  auto a_tiles = tiles(kk, "lhsT_tiles", kBm * ks, d, kTileM, b.copies(a_i));
  auto b_tiles = tiles(kk, "rhs_tiles", kBn * ks, d, kTileN, b.copies(b_i));
  auto r_pool = kk.pool("res_sb", MemSpace::sbuf, d, kTileM, kTileN, b.copies(r_i));
  auto p_pool =
      kk.pool("res_psum", MemSpace::psum, isa::DType::fp32, kTileM, kTileN, b.copies(p_i));
  std::vector<Tile> a(static_cast<size_t>(kBm * ks)), bt(static_cast<size_t>(kBn * ks));
  for (int64_t m = 0; m < s.m / (kBm * kTileM); ++m) {
    for (int64_t bm = 0; bm < kBm; ++bm) {
      for (int64_t k = 0; k < ks; ++k) {
        a[bm * ks + k] = a_tiles[bm * ks + k].next();
        kk.load(a[bm * ks + k], lhsT, k * kTileK, (m * kBm + bm) * kTileM);
      }
    }
    for (int64_t n = 0; n < s.n / (kBn * kTileN); ++n) {
      for (int64_t bn = 0; bn < kBn; ++bn) {
        for (int64_t k = 0; k < ks; ++k) {
          bt[bn * ks + k] = b_tiles[bn * ks + k].next();
          kk.load(bt[bn * ks + k], rhs, k * kTileK, (n * kBn + bn) * kTileN);
        }
      }
      for (int64_t bm = 0; bm < kBm; ++bm) {
        for (int64_t bn = 0; bn < kBn; ++bn) {
          const Tile psum = p_pool.next();
          for (int64_t k = 0; k < ks; ++k) {
            kk.matmul(psum, a[bm * ks + k], bt[bn * ks + k], k == 0, k == ks - 1);
          }
          const Tile r = r_pool.next();
          kk.copy(r, psum);
          kk.store(out, (m * kBm + bm) * kTileM, (n * kBn + bn) * kTileN, r);
        }
      }
    }
  }
  return kk.build();
}

isa::Plan fully_blocked(const NkiMatmulShape& s, const isa::ArchSpec& arch, int most) {
  const isa::DType d = s.dtype;
  constexpr int64_t kBm = 16, kBn = 2, kBk = 8;  // TILES_IN_BLOCK_M, _N, _K
  const int64_t block_m = kBm * kTileM, block_n = kBn * kTileN, block_k = kBk * kTileK;
  require(s.m % block_m == 0 && s.n % block_n == 0 && s.k % block_k == 0,
          "fully_blocked needs M a multiple of 2048, N of 1024 and K of 1024");
  const int64_t blocks_m = s.m / block_m;
  Budget b;
  // Innermost first: lhsT is reloaded per (k, m), rhs per k, the results once per n.
  const size_t a_i = b.add(MemSpace::sbuf, kBk * bytes(d, block_m)),
               b_i = b.add(MemSpace::sbuf, kBk * bytes(d, block_n)),
               pk_i = b.add(MemSpace::sbuf, bytes(d, block_n)),
               res_i = b.add(MemSpace::sbuf, blocks_m * kBm * kBn * bytes(d, kTileN)),
               p_i = b.add(MemSpace::psum, kPsumTile);
  b.solve(arch, most);
  NkiKernel kk("nki_matmul_fully_optimized_", arch);
  const auto [lhsT, rhs, out] = operands(kk, s);
  auto res_tiles = tiles(kk, "result_tiles", blocks_m * kBm * kBn, d, kTileN, b.copies(res_i));
  auto b_tiles = tiles(kk, "rhs_tiles", kBk, d, block_n, b.copies(b_i));
  auto a_tiles = tiles(kk, "lhsT_tiles", kBk, d, block_m, b.copies(a_i));
  auto pk_pool = kk.pool("result_packed", MemSpace::sbuf, d, kTileM, block_n, b.copies(pk_i));
  auto p_pool =
      kk.pool("res_tile", MemSpace::psum, isa::DType::fp32, kTileM, kTileN, b.copies(p_i));
  std::vector<Tile> res(static_cast<size_t>(blocks_m * kBm * kBn)), a(kBk), bt(kBk);
  auto at = [&](int64_t m, int64_t bm, int64_t bn) { return (m * kBm + bm) * kBn + bn; };
  for (int64_t n = 0; n < s.n / block_n; ++n) {
    for (size_t i = 0; i < res.size(); ++i) {
      res[i] = res_tiles[i].next();
      kk.zero(res[i]);
    }
    for (int64_t k = 0; k < s.k / block_k; ++k) {  // nl.sequential_range
      for (int64_t bk = 0; bk < kBk; ++bk) {
        bt[bk] = b_tiles[bk].next();
        kk.load(bt[bk], rhs, (k * kBk + bk) * kTileK, n * block_n);
      }
      for (int64_t m = 0; m < blocks_m; ++m) {
        for (int64_t bk = 0; bk < kBk; ++bk) {
          a[bk] = a_tiles[bk].next();
          kk.load(a[bk], lhsT, (k * kBk + bk) * kTileK, m * block_m);
        }
        for (int64_t bn = 0; bn < kBn; ++bn) {
          for (int64_t bm = 0; bm < kBm; ++bm) {
            const Tile psum = p_pool.next();
            for (int64_t bk = 0; bk < kBk; ++bk) {
              kk.matmul(psum, a[bk].columns(bm * kTileM, kTileM),
                        bt[bk].columns(bn * kTileN, kTileN), bk == 0, bk == kBk - 1);
            }
            const Tile& acc = res[at(m, bm, bn)];
            kk.add(acc, acc, psum);
          }
        }
      }
    }
    for (int64_t m = 0; m < blocks_m; ++m) {
      for (int64_t bm = 0; bm < kBm; ++bm) {
        const Tile packed = pk_pool.next();
        for (int64_t bn = 0; bn < kBn; ++bn) {
          kk.copy(packed.columns(bn * kTileN, kTileN), res[at(m, bm, bn)]);
        }
        kk.store(out, (m * kBm + bm) * kTileM, n * block_n, packed);
      }
    }
  }
  return kk.build();
}

}  // namespace

std::vector<NkiMatmul> all_nki_matmuls() {
  return {NkiMatmul::tiled, NkiMatmul::hoisted, NkiMatmul::blocked_free, NkiMatmul::fully_blocked};
}

std::string name_of(NkiMatmul k) {
  switch (k) {
    case NkiMatmul::tiled:
      return "nki_matmul_tiled_";
    case NkiMatmul::hoisted:
      return "nki_matmul_hoist_load_";
    case NkiMatmul::blocked_free:
      return "nki_matmul_block_free_dimension_";
    case NkiMatmul::fully_blocked:
      return "nki_matmul_fully_optimized_";
  }
  return "?";
}

isa::Plan nki_matmul_plan(NkiMatmul kernel, const NkiMatmulShape& shape, const isa::ArchSpec& arch,
                          int buffers) {
  require(shape.k > 0 && shape.m > 0 && shape.n > 0 && shape.k % kTileK == 0 &&
              shape.m % kTileM == 0 && shape.n % kTileN == 0,
          "K and M must be multiples of 128 and N of 512");
  require(arch.sbuf.partitions >= kTileK && arch.tensor.rows >= kTileK &&
              arch.tensor.cols >= kTileM && arch.tensor.moving_free_max >= kTileN &&
              arch.psum.bank_bytes >= kPsumTile,
          "the chip's tile limits are below NKI's 128 x 128 x 512");
  switch (kernel) {
    case NkiMatmul::tiled:
      return tiled(shape, arch, buffers);
    case NkiMatmul::hoisted:
      return hoisted(shape, arch, buffers);
    case NkiMatmul::blocked_free:
      return blocked_free(shape, arch, buffers);
    case NkiMatmul::fully_blocked:
      return fully_blocked(shape, arch, buffers);
  }
  throw std::invalid_argument("nki_matmul_plan: unknown kernel");
}

NkiTraffic nki_matmul_traffic(NkiMatmul kernel, const NkiMatmulShape& s) {
  const int64_t e = isa::dtype_bytes(s.dtype);
  const int64_t a = s.k * s.m * e, b = s.k * s.n * e;
  NkiTraffic t;
  t.written = s.m * s.n * e;
  switch (kernel) {
    case NkiMatmul::tiled:
      t.read = a * (s.n / kTileN) + b * (s.m / kTileM);
      break;
    case NkiMatmul::hoisted:
      t.read = a + b * (s.m / kTileM);
      break;
    case NkiMatmul::blocked_free:
      t.read = a + b * (s.m / (2 * kTileM));
      break;
    case NkiMatmul::fully_blocked:
      t.read = b + a * (s.n / (2 * kTileN));
      break;
  }
  return t;
}

}  // namespace wallsim::validation
