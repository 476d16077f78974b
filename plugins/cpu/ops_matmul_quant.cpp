// ops_matmul_quant.cpp: MUL_MAT with quantized a (GGUF blocks, quant.hpp)
// and F32 b: a [K, M, A2, A3] x b [K, N, B2, B3] -> dst [M, N, B2, B3],
// a repeating over b's batch dims as in ops_matmul.cpp.
//
// Every thread quantizes all of b's columns of a batch itself (K * N
// values, next to the K * M * N multiply-adds of its share), so the threads
// never wait on each other; then it walks its own rows of a, in units of
// the tile's rows, so every output is written by one thread and its bits do
// not depend on the thread count. Inside a thread: blocks of kRowBlock rows
// of a (in L2) against chunks of b's columns of about kColChunkBytes (in L2
// too), tiles of rows(rn) x rn inside (quant_gemm_*.cpp). A product with one
// column streams a once: the tiles request each row ahead of their reads.
#include <algorithm>
#include <vector>

#include "kernels.hpp"
#include "quant.hpp"

namespace bp::cpu {
namespace {

constexpr int64_t kRowBlock = 64;
constexpr size_t kColChunkBytes = 256 * 1024;

}  // namespace

bool qtype_of(bp_type t, qtype *out) {
  switch (t) {
    case BP_TYPE_Q8_0:
      *out = qtype::q8_0;
      return true;
    case BP_TYPE_Q4_0:
      *out = qtype::q4_0;
      return true;
    case BP_TYPE_Q5_0:
      *out = qtype::q5_0;
      return true;
    case BP_TYPE_Q4_K:
      *out = qtype::q4_k;
      return true;
    case BP_TYPE_Q6_K:
      *out = qtype::q6_k;
      return true;
    case BP_TYPE_Q5_K:
      *out = qtype::q5_k;
      return true;
    case BP_TYPE_BF16:
      *out = qtype::bf16;
      return true;
    case BP_TYPE_Q4_1:
      *out = qtype::q4_1;
      return true;
    case BP_TYPE_Q5_1:
      *out = qtype::q5_1;
      return true;
    case BP_TYPE_Q2_K:
      *out = qtype::q2_k;
      return true;
    case BP_TYPE_Q3_K:
      *out = qtype::q3_k;
      return true;
    case BP_TYPE_IQ4_NL:
      *out = qtype::iq4_nl;
      return true;
    case BP_TYPE_IQ4_XS:
      *out = qtype::iq4_xs;
      return true;
    case BP_TYPE_MXFP4:
      *out = qtype::mxfp4;
      return true;
    default:
      return false;
  }
}

bool quant_rows_dense(const bp_tensor *t, qtype *q) {
  return qtype_of(t->type, q) && t->ne[0] % format_of(*q).block_values == 0 &&
         t->nb[0] == static_cast<size_t>(format_of(*q).block_bytes);
}

bool mul_mat_q_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  qtype q = qtype::q8_0;
  if (!quant_rows_dense(a, &q) || q == qtype::bf16 || b->type != BP_TYPE_F32 || t->type != BP_TYPE_F32) return false;
  return t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 && a->ne[0] == b->ne[0] && t->ne[0] == a->ne[1] &&
         t->ne[1] == b->ne[1] && t->ne[2] == b->ne[2] && t->ne[3] == b->ne[3] && b->ne[2] % a->ne[2] == 0 &&
         b->ne[3] % a->ne[3] == 0;
}

void mul_mat_q_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  qtype q = qtype::q8_0;
  qtype_of(a->type, &q);
  static const qkernels &k = qkernels_for_cpu();
  const int64_t K = a->ne[0], M = t->ne[0], N = t->ne[1];
  const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  const int RM = k.rows(k.max_cols);
  int64_t u0, u1;
  split_range((M + RM - 1) / RM, ith, nth, &u0, &u1);
  const int64_t m0 = u0 * RM, m1 = std::min(u1 * RM, M);
  if (m0 >= m1) return;

  const size_t col = act_col_bytes(K);
  std::vector<char> cols(col * static_cast<size_t>(N) + 64);
  char *bq = cols.data() + (64 - reinterpret_cast<uintptr_t>(cols.data()) % 64) % 64;
  std::vector<float> scratch(static_cast<size_t>(K));
  const int64_t chunk =
      std::max<int64_t>(k.max_cols, static_cast<int64_t>(kColChunkBytes / col) / k.max_cols * k.max_cols);
  const int64_t ldo = static_cast<int64_t>(t->nb[1] / sizeof(float));
  const size_t lda = a->nb[1];

  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
      for (int64_t n = 0; n < N; ++n) quantize_act_col(read_row(b, n, i2, i3, scratch.data()), K, bq + n * col);
      const char *a0 = row_ptr(a, 0, i2 / r2, i3 / r3);
      float *out = reinterpret_cast<float *>(row_ptr(t, 0, i2, i3));
      for (int64_t rb = m0; rb < m1; rb += kRowBlock) {
        const int64_t re = std::min(rb + kRowBlock, m1);
        for (int64_t cb = 0; cb < N; cb += chunk) {
          const int64_t ce = std::min(cb + chunk, N);
          for (int64_t r = rb; r < re; r += RM) {
            const int rm = static_cast<int>(std::min<int64_t>(RM, re - r));
            for (int64_t c = cb; c < ce; c += k.max_cols) {
              const int rn = static_cast<int>(std::min<int64_t>(k.max_cols, ce - c));
              const qtile_fn tile = k.tile(q, rm, rn);
              if (rm == RM) {
                tile(a0 + r * lda, lda, bq + c * col, col, K, out + c * ldo + r, ldo);
              } else {
                for (int i = 0; i < rm; ++i)
                  tile(a0 + (r + i) * lda, lda, bq + c * col, col, K, out + c * ldo + r + i, ldo);
              }
            }
          }
        }
      }
    }
}

}  // namespace bp::cpu
