// matmul.cpp: MUL_MAT through cblas_sgemm.
//
// a [K, M, A2, A3] (f32 or f16) x b [K, N, B2, B3] (f32) -> d [M, N, B2, B3].
// Memory is row-major by dim 0, so per batch D (N x M) = B (N x K) * A^T
// where A is M x K: one sgemm(RowMajor, NoTrans, Trans). a broadcasts over
// the batch dims (B2 % A2 == 0, B3 % A3 == 0). An f16 a is widened to f32
// once per distinct a slice, which costs M*K against 2*M*N*K flops.
#include <cblas.h>

#include <climits>
#include <vector>

#include "blas.hpp"

namespace bp::blas {
namespace {

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// Leading dimension (in elements) of a matrix whose rows are |t|'s dim 1,
// each |cols| long, or 0 when BLAS cannot take it as it is.
int64_t leading_dim(const bp_tensor *t, int64_t cols) {
  if (t->ne[1] == 1) return cols;  // one row: any stride will do
  size_t es = bp_type_size(t->type);
  if (t->nb[1] % es != 0) return 0;
  int64_t ld = static_cast<int64_t>(t->nb[1] / es);
  return ld >= cols && fits_int(ld) ? ld : 0;
}

// Sets OpenBLAS's process-global thread count to what this backend asked
// for (caller holds gemm_mutex).
void apply_threads(plugin_state &s, int threads) {
  int want = threads > 0 ? threads : s.default_threads;
  if (want != s.current_threads) {
    openblas_set_num_threads(want);
    s.current_threads = want;
  }
}

// Copies the M x K f16 slice at |src| (row stride |nb1| bytes) into |dst|
// as dense f32.
void widen_f16(const char *src, size_t nb1, int64_t m, int64_t k, float *dst) {
  for (int64_t r = 0; r < m; ++r) {
    const auto *row = reinterpret_cast<const uint16_t *>(src + static_cast<size_t>(r) * nb1);
    float *out = dst + r * k;
    for (int64_t c = 0; c < k; ++c) out[c] = bp_fp16_to_fp32(row[c]);
  }
}

}  // namespace

bool mul_mat_layout_ok(const bp_tensor *node) {
  if (!node || node->op != BP_OP_MUL_MAT) return false;
  const bp_tensor *a = node->src[0], *b = node->src[1];
  if (!a || !b) return false;
  if ((a->type != BP_TYPE_F32 && a->type != BP_TYPE_F16) || b->type != BP_TYPE_F32 || node->type != BP_TYPE_F32)
    return false;
  const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
  if (b->ne[0] != K || node->ne[0] != M || node->ne[1] != N || node->ne[2] != b->ne[2] || node->ne[3] != b->ne[3])
    return false;
  for (int d = 0; d < BP_MAX_DIMS; ++d)
    if (a->ne[d] < 1 || b->ne[d] < 1) return false;
  if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
  if (!fits_int(K) || !fits_int(M) || !fits_int(N)) return false;
  // Dense rows everywhere; strided rows are the cpu backend's job.
  if (!bp_tensor_rows_contiguous(a) || !bp_tensor_rows_contiguous(b) || !bp_tensor_rows_contiguous(node)) return false;
  if (a->type == BP_TYPE_F32 && leading_dim(a, K) == 0) return false;  // an f16 a is widened densely
  if (a->type == BP_TYPE_F16 && a->nb[1] % 2 != 0) return false;
  return leading_dim(b, K) != 0 && leading_dim(node, M) != 0;
}

bool mul_mat_big_enough(const bp_tensor *node, int64_t min_mnk) {
  if (min_mnk <= 0) return true;
  const bp_tensor *a = node->src[0], *b = node->src[1];
  // Saturating: M, N, K fit in int, so M*N fits in int64 and *K is checked.
  int64_t mn = a->ne[1] * b->ne[1];
  return mn >= (min_mnk + a->ne[0] - 1) / a->ne[0];
}

void mul_mat_compute(const bp_tensor *node, backend_ctx &ctx) {
  const bp_tensor *a = node->src[0], *b = node->src[1];
  if (!a->data || !b->data || !node->data)
    throw plugin_error(BP_ERR_INVALID_ARGUMENT, std::string("blas: MUL_MAT '") + node->name + "' has no memory");
  plugin_state *s = state();
  if (!s) throw plugin_error(BP_ERR_FAILED_PRECONDITION, "blas: plugin not initialised");

  const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
  const int64_t B2 = b->ne[2], B3 = b->ne[3], r2 = B2 / a->ne[2], r3 = B3 / a->ne[3];
  const bool widen = a->type == BP_TYPE_F16;
  const int64_t lda = widen ? K : leading_dim(a, K);
  const int64_t ldb = leading_dim(b, K), ldd = leading_dim(node, M);
  if (widen) ctx.scratch.resize(static_cast<size_t>(M * K));

  std::lock_guard<std::mutex> lock(s->gemm_mutex);
  apply_threads(*s, ctx.threads);

  // One a for every batch and b, d rows evenly spaced across batches: the
  // whole product is a single sgemm with N*B2*B3 rows.
  const bool one_a = a->ne[2] == 1 && a->ne[3] == 1;
  const bool b_even = N > 1 && b->nb[2] == static_cast<size_t>(N) * b->nb[1] &&
                      (B3 == 1 || b->nb[3] == static_cast<size_t>(B2) * b->nb[2]);
  const bool d_even = N > 1 && node->nb[2] == static_cast<size_t>(N) * node->nb[1] &&
                      (B3 == 1 || node->nb[3] == static_cast<size_t>(B2) * node->nb[2]);
  const int64_t rows_all = N * B2 * B3;
  if (one_a && (B2 * B3 == 1 || (b_even && d_even)) && fits_int(rows_all)) {
    const float *A = widen ? ctx.scratch.data() : static_cast<const float *>(a->data);
    if (widen) widen_f16(static_cast<const char *>(a->data), a->nb[1], M, K, ctx.scratch.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows_all), static_cast<int>(M),
                static_cast<int>(K), 1.0f, static_cast<const float *>(b->data), static_cast<int>(ldb), A,
                static_cast<int>(lda), 0.0f, static_cast<float *>(node->data), static_cast<int>(ldd));
    return;
  }

  const char *widened_from = nullptr;  // a slice currently in scratch
  for (int64_t i3 = 0; i3 < B3; ++i3) {
    for (int64_t i2 = 0; i2 < B2; ++i2) {
      const char *a_slice =
          static_cast<const char *>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
      const char *b_slice = static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3];
      char *d_slice = static_cast<char *>(node->data) + i2 * node->nb[2] + i3 * node->nb[3];
      const float *A = reinterpret_cast<const float *>(a_slice);
      if (widen) {
        if (a_slice != widened_from) widen_f16(a_slice, a->nb[1], M, K, ctx.scratch.data());
        widened_from = a_slice;
        A = ctx.scratch.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(N), static_cast<int>(M),
                  static_cast<int>(K), 1.0f, reinterpret_cast<const float *>(b_slice), static_cast<int>(ldb), A,
                  static_cast<int>(lda), 0.0f, reinterpret_cast<float *>(d_slice), static_cast<int>(ldd));
    }
  }
}

}  // namespace bp::blas
