// matmul_dot.hpp: the driver of MUL_MAT's dot-product kernels for thin
// products (few rows of b: a decoder's tokens), shared by the AVX-512 tiles
// (gemm_avx512.cpp) and the AVX2 ones (gemm_avx2.cpp), and the split of a
// thin product's rows of a into units of work, which the AVX-512 broadcast
// kernel uses too.
//
// A thin product reads each weight (a row of a) only N times, so the tiles
// read a straight from its rows, F16 and BF16 widened in registers, and pack nothing
// but b: b's rows of one batch are interleaved in groups of at most
// |group| rows, |lanes| values of each row in turn, so a tile's loads of b
// for one step of k are one run of memory.
#ifndef BP_PLUGIN_CPU_MATMUL_DOT_HPP_
#define BP_PLUGIN_CPU_MATMUL_DOT_HPP_

#include <algorithm>
#include <cstdlib>

#include "kernels.hpp"

namespace bp::cpu {

// Rows of a per unit of work: a multiple of every tile's rows of a.
constexpr int64_t kDotRowsPerUnit = 48;

// The thin kernels' work: units of kDotRowsPerUnit rows of a in one batch of
// the output, a contiguous range of them per thread.
struct thin_unit {
  int64_t batch, i2, i3;  // the output's batch, and its indices
  int64_t a2, a3;         // a's batch indices (a repeats over b's batches)
  int64_t m_begin, m_end;
};
struct thin_units {
  thin_units(const bp_tensor *t, int ith, int nth)
      : t_(t), m_units_((t->ne[0] + kDotRowsPerUnit - 1) / kDotRowsPerUnit) {
    split_range(m_units_ * t->ne[2] * t->ne[3], ith, nth, &begin, &end);
  }
  thin_unit at(int64_t u) const {
    const int64_t batch = u / m_units_, mu = u % m_units_;
    const int64_t i2 = batch % t_->ne[2], i3 = batch / t_->ne[2];
    const int64_t r2 = t_->src[1]->ne[2] / t_->src[0]->ne[2], r3 = t_->src[1]->ne[3] / t_->src[0]->ne[3];
    const int64_t m_begin = mu * kDotRowsPerUnit, m_end = std::min(m_begin + kDotRowsPerUnit, t_->ne[0]);
    return {batch, i2, i3, i2 / r2, i3 / r3, m_begin, m_end};
  }
  int64_t begin = 0, end = 0;

 private:
  const bp_tensor *t_;
  int64_t m_units_;
};

// Frees what std::aligned_alloc returned (the kernels' panels of b).
struct free_deleter {
  void operator()(float *p) const { std::free(p); }
};

// out[j * ldo + i] = dot(a[i], b[j]) over K, for the tile's rows i of a
// (dense, F32, F16 or BF16 as the tile was built for) and rows j of b,
// interleaved in |bp| (above). |next|: the next tile's rows of a, requested
// into L2 while this one streams its own (nullptr: none).
using dot_fn = void (*)(const void *const *a, const float *bp, int64_t K, float *out, int64_t ldo,
                        const void *const *next);

// One ISA's tiles, as the driver needs them (at most 8 rows of a and 8 rows
// of b per tile: the driver's buffers are sized for that).
struct dot_kernels {
  int lanes;  // floats per vector: b's rows interleave in runs of this many
  int group;  // rows of b per tile at most (the interleaved groups)
  // Rows of a per tile for rn <= group rows of b; when b has more than
  // |group| rows, every group passes over rows_for(group) rows of a.
  int (*rows_for)(int rn);
  // The tile for |rows| rows of a (rows_for(rn), rows_for(group) or 1) by |rn|.
  // |type|: a's, F32, F16 or BF16.
  dot_fn (*tile)(bp_type type, int rows, int rn);
};

// True when a's rows are dense F32, F16 or BF16, b's rows dense F32, dst dense.
bool mul_mat_dot_suits(const bp_tensor *t);
// Part |ith| of |nth| of the product with |k|'s tiles; throws std::bad_alloc
// when b's panel cannot be allocated (the pool reports it).
void mul_mat_dot_run(const bp_tensor *t, int ith, int nth, const dot_kernels &k);

// The tiles of each ISA: call only when cpu_isa() has it.
const dot_kernels &dot_kernels_avx512();  // gemm_avx512.cpp
const dot_kernels &dot_kernels_avx2();    // gemm_avx2.cpp

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_MATMUL_DOT_HPP_
