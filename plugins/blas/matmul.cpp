// matmul.cpp: MUL_MAT through cblas_sgemm.
//
// a [K, M, A2, A3] (f32 or f16) x b [K, N, B2, B3] (f32) -> d [M, N, B2, B3].
// Memory is row-major by dim 0, so per batch D (N x M) = B (N x K) * A^T
// where A is M x K: one sgemm(RowMajor, NoTrans, Trans). a broadcasts over
// the batch dims (B2 % A2 == 0, B3 % A3 == 0). An f16 a is widened to f32
// once per distinct a slice, which costs M*K against 2*M*N*K flops.
//
// OpenBLAS runs single-threaded (plugin.cpp); a product is split over the
// backend's pool instead: by columns of D (rows of a, so each thread widens
// only its own f16 rows), or by rows of D when there are more of those, or
// over batches when each batch is too small to split.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "blas.hpp"
#include "f16.hpp"

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

// Copies the M x K f16 slice at |src| (row stride |nb1| bytes) into |dst|
// as dense f32.
void widen_f16(const char *src, size_t nb1, int64_t m, int64_t k, float *dst) {
  for (int64_t r = 0; r < m; ++r)
    plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(src + static_cast<size_t>(r) * nb1), k, dst + r * k);
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

namespace {

// Below this many multiply-adds one thread is faster than waking others.
constexpr int64_t kSplitWork = int64_t{1} << 18;

// D (rows x cols) = B (rows x K) * A^T, A being cols x K: f32 with leading
// dimension |lda|, or f16 rows |a_nb1| bytes apart, widened into |scratch|
// (cols x K, dense) by whichever thread uses them.
struct product {
  int64_t rows, cols, K;
  const float *B;
  int64_t ldb;
  const char *A;
  bool a_f16;
  int64_t lda;     // f32 a
  size_t a_nb1;    // f16 a
  float *scratch;  // f16 a: cols * K floats
  float *D;
  int64_t ldd;

  int64_t work() const { return rows * cols * K; }

  void sgemm(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    const float *a;
    int64_t ld;
    if (a_f16) {
      widen_f16(A + static_cast<size_t>(c0) * a_nb1, a_nb1, c1 - c0, K, scratch + c0 * K);
      a = scratch + c0 * K;
      ld = K;
    } else {
      a = reinterpret_cast<const float *>(A) + c0 * lda;
      ld = lda;
    }
    state()->blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(r1 - r0), static_cast<int>(c1 - c0),
                        static_cast<int>(K), 1.0f, B + r0 * ldb, static_cast<int>(ldb), a, static_cast<int>(ld), 0.0f,
                        D + r0 * ldd + c0, static_cast<int>(ldd));
  }

  // Part |ith| of |nth|. An f16 a is split by columns only: a row split
  // would need every thread to see all of a widened.
  void part(int ith, int nth) const {
    const bool by_cols = a_f16 || cols >= rows;
    const int64_t n = by_cols ? cols : rows;
    // Column chunks start on 16-float (64-byte) boundaries of D's rows.
    const int64_t align = by_cols ? 16 : 1;
    int64_t chunk = (n + nth - 1) / nth;
    chunk = (chunk + align - 1) / align * align;
    const int64_t lo = std::min(n, ith * chunk), hi = std::min(n, lo + chunk);
    if (lo >= hi) return;
    if (by_cols)
      sgemm(0, rows, lo, hi);
    else
      sgemm(lo, hi, 0, cols);
  }
};

// Runs body(ith, nth) on |nth| threads of the backend's pool; while a trace
// records, each thread reports its part of ctx.traced.
template <typename F>
void run_on_pool(backend_ctx &ctx, int nth, F body) {
  std::string error;
  if (ctx.traced == nullptr) {
    error = ctx.pool.run(nth, body);
  } else {
    auto traced = [&](int ith, int n) {
      const uint64_t begin = bp_host_trace_now(ctx.host);
      body(ith, n);
      bp_host_trace_node(ctx.host, &ctx, ctx.traced, ith, begin, bp_host_trace_now(ctx.host));
    };
    error = ctx.pool.run(nth, traced);
  }
  if (!error.empty()) throw plugin_error(BP_ERR_INTERNAL, "" + error);
}

void run_split(backend_ctx &ctx, const product &p) {
  const int nth = p.work() >= kSplitWork ? ctx.pool.size() : 1;
  if (nth == 1 && ctx.traced == nullptr) {
    p.part(0, 1);
    return;
  }
  run_on_pool(ctx, nth, [&](int ith, int n) { p.part(ith, n); });
}

}  // namespace

void mul_mat_compute(const bp_tensor *node, backend_ctx &ctx) {
  const bp_tensor *a = node->src[0], *b = node->src[1];
  if (!a->data || !b->data || !node->data)
    throw plugin_error(BP_ERR_INVALID_ARGUMENT, std::string("MUL_MAT '") + node->name + "' has no memory");
  plugins::thread_pool &pool = ctx.pool;

  const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
  const int64_t B2 = b->ne[2], B3 = b->ne[3], r2 = B2 / a->ne[2], r3 = B3 / a->ne[3];
  const bool widen = a->type == BP_TYPE_F16;
  const int64_t lda = widen ? K : leading_dim(a, K);
  const int64_t ldb = leading_dim(b, K), ldd = leading_dim(node, M);
  if (widen) ctx.scratch.resize(static_cast<size_t>(M * K));

  product p{N, M, K, nullptr, ldb, nullptr, widen, lda, a->nb[1], ctx.scratch.data(), nullptr, ldd};

  // One a for every batch and b, d rows evenly spaced across batches: the
  // whole product is a single sgemm with N*B2*B3 rows.
  const bool one_a = a->ne[2] == 1 && a->ne[3] == 1;
  const bool b_even = N > 1 && b->nb[2] == static_cast<size_t>(N) * b->nb[1] &&
                      (B3 == 1 || b->nb[3] == static_cast<size_t>(B2) * b->nb[2]);
  const bool d_even = N > 1 && node->nb[2] == static_cast<size_t>(N) * node->nb[1] &&
                      (B3 == 1 || node->nb[3] == static_cast<size_t>(B2) * node->nb[2]);
  const int64_t rows_all = N * B2 * B3;
  if (one_a && (B2 * B3 == 1 || (b_even && d_even)) && fits_int(rows_all)) {
    p.rows = rows_all;
    p.B = static_cast<const float *>(b->data);
    p.A = static_cast<const char *>(a->data);
    p.D = static_cast<float *>(node->data);
    run_split(ctx, p);
    return;
  }

  auto batch = [&](int64_t i) {
    const int64_t i2 = i % B2, i3 = i / B2;
    product q = p;
    q.A = static_cast<const char *>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
    q.B = reinterpret_cast<const float *>(static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3]);
    q.D = reinterpret_cast<float *>(static_cast<char *>(node->data) + i2 * node->nb[2] + i3 * node->nb[3]);
    return q;
  };
  const int64_t n_batches = B2 * B3;

  // Small f32 batches: whole batches per thread, one barrier for all.
  if (!widen && p.work() < kSplitWork && pool.size() > 1 && p.work() * n_batches >= kSplitWork) {
    run_on_pool(ctx, pool.size(), [&](int ith, int nth) {
      for (int64_t i = ith; i < n_batches; i += nth) batch(i).part(0, 1);
    });
    return;
  }

  // Otherwise one split product per batch; an f16 a slice shared by
  // consecutive batches (broadcast) is widened once.
  const char *widened_from = nullptr;
  for (int64_t i = 0; i < n_batches; ++i) {
    product q = batch(i);
    if (widen && q.A == widened_from) {
      q.A = reinterpret_cast<const char *>(ctx.scratch.data());
      q.a_f16 = false;
      q.lda = K;
    } else if (widen) {
      widened_from = q.A;
    }
    run_split(ctx, q);
  }
}

}  // namespace bp::blas
