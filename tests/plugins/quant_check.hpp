// quant_check.hpp: what the device plugins' quantized-weight tests share:
// MUL_MAT of quantized a by f32 b and GET_ROWS of a quantized table, run on a
// given backend and compared with a double-precision reference computed on
// the weights as the core's reference decoder (bp_dequantize) reads them, and
// the plugin's profile lines (profile=true) captured from the log so a test
// can name the shader that ran.
#pragma once

#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace bp_quant_test {

// The weight types the GPU plugins have kernels for: every block type and
// BF16. A backend without kernels for a type declines it (check_runs_on_cpu
// below).
inline const bp_type kQuantTypes[] = {BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K,
                                      BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16};

// The row-length unit the tests build products from: a block, or for types
// of one value per block (BF16, F32, F16) the 4 values the decoders of
// shaders/common/quant.h take at once.
inline int64_t row_unit(bp_type t) { return bp_type_block_size(t) > 1 ? bp_type_block_size(t) : 4; }

// Weights with a spread of magnitudes per row (so block scales differ) and
// their quantized bytes; |deq| is what the device must compute with.
struct quant_weights {
  std::vector<unsigned char> bytes;
  std::vector<float> deq;
};

inline quant_weights make_weights(bp_type type, int64_t K, int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(K * rows));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k)
      src[static_cast<size_t>(r * K + k)] = dist(rng) * (1.0f + static_cast<float>((r + k / 32) % 5));
  quant_weights w;
  w.bytes.resize(bp_type_row_size(type, K) * static_cast<size_t>(rows));
  w.deq.resize(src.size());
  {
    size_t written = 0;
    EXPECT_EQ(bp_quantize_rows(type, src.data(), w.bytes.data(), rows, K, &written), BP_OK) << bp_last_error();
    EXPECT_EQ(written, w.bytes.size());
  }
  EXPECT_EQ(bp_dequantize(type, w.bytes.data(), w.deq.data(), K * rows), BP_OK) << bp_last_error();
  return w;
}

// out[m, n, i2] = sum_k a[k, m, i2 / (B / A2)] b[k, n, i2] with a of A2 =
// max(1, B / 2) batches (each serving B / A2 of b's), K a whole number of
// blocks. With |row_len| > K, a is a window: K values of each row of an
// [row_len, M, A2] table from value |first| on (a view, rows row_len values
// apart; |first| a whole number of blocks). Relative error per output
// against the double reference.
inline void check_mul_mat(bp_backend *be, bp_type type, int64_t K, int64_t M, int64_t N, int64_t B = 1,
                          int64_t row_len = 0, int64_t first = 0) {
  const int64_t R = row_len > K ? row_len : K;
  SCOPED_TRACE(std::string("MUL_MAT ") + bp_type_name(type) + " K=" + std::to_string(K) + " M=" + std::to_string(M) +
               " N=" + std::to_string(N) + " B=" + std::to_string(B) + " rows of " + std::to_string(R) + " from " +
               std::to_string(first));
  const int64_t A2 = B > 1 ? B / 2 : 1;
  bp_context *ctx = bp_context_new(0);
  bp_tensor *table = bp_tensor_new_3d(ctx, type, R, M, A2);
  bp_tensor *b = bp_tensor_new_3d(ctx, BP_TYPE_F32, K, N, B);
  ASSERT_TRUE(table && b) << bp_last_error();
  bp_tensor *a =
      R == K ? table : bp_view_3d(ctx, table, K, M, A2, table->nb[1], table->nb[2], bp_type_row_size(type, first));
  ASSERT_NE(a, nullptr) << bp_last_error();
  bp_tensor *c = bp_mul_mat(ctx, a, b);
  ASSERT_NE(c, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, c), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  const quant_weights w = make_weights(type, R, M * A2, static_cast<unsigned>(K * 7 + M * 3 + N + R + first));
  std::mt19937 rng(static_cast<unsigned>(K + M + N * 11));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> bv(static_cast<size_t>(K * N * B));
  for (float &x : bv) x = dist(rng);
  ASSERT_EQ(bp_tensor_set(table, w.bytes.data(), 0, w.bytes.size()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(b, bv.data(), 0, bv.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> out(static_cast<size_t>(M * N * B));
  ASSERT_EQ(bp_tensor_get(c, out.data(), 0, out.size() * 4), BP_OK) << bp_last_error();
  int bad = 0;
  for (int64_t i2 = 0; i2 < B; ++i2)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        const float *ar = &w.deq[static_cast<size_t>(((i2 / (B / A2)) * M + m) * R + first)];
        const float *br = &bv[static_cast<size_t>((i2 * N + n) * K)];
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          ref += static_cast<double>(ar[k]) * br[k];
          mag += std::fabs(static_cast<double>(ar[k]) * br[k]);
        }
        const double got = out[static_cast<size_t>((i2 * N + n) * M + m)];
        // f32 sums in another order: a few ulps of the sum of magnitudes.
        if (!(std::fabs(got - ref) <= 1e-5 * mag + 1e-6) && bad++ < 5)
          ADD_FAILURE() << "out[" << m << ", " << n << ", " << i2 << "] = " << got << ", reference " << ref;
      }
  EXPECT_EQ(bad, 0) << "outputs off the reference";
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
}

// GET_ROWS of |n_ids| rows (repeats, first and last) of a table of R rows.
inline void check_get_rows(bp_backend *be, bp_type type, int64_t K, int64_t R, int64_t n_ids) {
  SCOPED_TRACE(std::string("GET_ROWS ") + bp_type_name(type) + " K=" + std::to_string(K) + " R=" + std::to_string(R));
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_new_2d(ctx, type, K, R);
  bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, n_ids);
  ASSERT_NE(a, nullptr) << bp_last_error();
  bp_tensor *r = bp_get_rows(ctx, a, ids);
  ASSERT_NE(r, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, r), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  const quant_weights w = make_weights(type, K, R, static_cast<unsigned>(K + R));
  std::vector<int32_t> iv(static_cast<size_t>(n_ids));
  for (int64_t i = 0; i < n_ids; ++i) iv[static_cast<size_t>(i)] = static_cast<int32_t>((i * 5 + 2) % R);
  iv[0] = static_cast<int32_t>(R - 1);
  if (n_ids > 1) iv[1] = 0;
  ASSERT_EQ(bp_tensor_set(a, w.bytes.data(), 0, w.bytes.size()), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(ids, iv.data(), 0, iv.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> out(static_cast<size_t>(K * n_ids));
  ASSERT_EQ(bp_tensor_get(r, out.data(), 0, out.size() * 4), BP_OK) << bp_last_error();
  int bad = 0;
  for (int64_t i = 0; i < n_ids; ++i) {
    const float *row = &w.deq[static_cast<size_t>(iv[static_cast<size_t>(i)] * K)];
    double row_max = 0;
    for (int64_t k = 0; k < K; ++k) row_max = std::fmax(row_max, std::fabs(row[k]));
    for (int64_t k = 0; k < K; ++k) {
      const double ref = row[k], got = out[static_cast<size_t>(i * K + k)];
      // One decoded value, scale x quant (- min), rounded in f32 in another
      // order: Q4_K's difference of two products can lose digits relative
      // to itself, never relative to the row's largest value.
      if (!(std::fabs(got - ref) <= 1e-6 * row_max) && bad++ < 5)
        ADD_FAILURE() << "row " << i << " (id " << iv[static_cast<size_t>(i)] << ") [" << k << "] = " << got
                      << ", reference " << ref;
    }
  }
  EXPECT_EQ(bad, 0) << "values off the reference";
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
}

// A backend |first| without kernels for |type| declines MUL_MAT of such
// weights, GET_ROWS of such a table and the quantizing CONT; a schedule
// "first;cpu" with the weights in |first|'s memory (marked as weights) runs
// those nodes on cpu, the weights copied over, and gets the double
// reference: docs/ops.md's bound for MUL_MAT (cpu quantizes b to 8 bits per
// 32 for the block types), exact rows for GET_ROWS, bp_quantize_rows's bytes for
// BF16 and values within a step for Q5_K.
inline void check_runs_on_cpu(bp_backend *first, bp_type type) {
  SCOPED_TRACE(std::string("declined ") + bp_type_name(type));
  const int64_t unit = bp_type_block_size(type) > 1 ? bp_type_block_size(type) : 40;
  const int64_t K = 2 * unit, M = 7, N = 3, n_ids = 4;
  bp_backend *cpu = nullptr;
  ASSERT_EQ(bp_backend_new("cpu", &cpu), BP_OK) << bp_last_error();
  bp_context *wctx = bp_context_new(0), *ctx = bp_context_new(0);
  bp_tensor *w = bp_tensor_new_2d(wctx, type, K, M);
  bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N);
  bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, n_ids);
  ASSERT_TRUE(w && x && ids) << bp_last_error();
  bp_tensor_set_flags(x, BP_TENSOR_FLAG_INPUT);
  bp_tensor_set_flags(ids, BP_TENSOR_FLAG_INPUT);
  bp_tensor *y = bp_mul_mat(ctx, w, x), *r = bp_get_rows(ctx, w, ids), *q = bp_cast(ctx, x, type);
  ASSERT_TRUE(y && r && q) << bp_last_error();
  for (bp_tensor *t : {y, r, q}) {
    bp_tensor_set_flags(t, BP_TENSOR_FLAG_OUTPUT);
    EXPECT_FALSE(bp_backend_supports_op(first, t)) << bp_op_name(t->op);
    EXPECT_TRUE(bp_backend_supports_op(cpu, t)) << bp_op_name(t->op);
  }
  bp_graph *g = bp_graph_new(ctx, 0);
  for (bp_tensor *t : {y, r, q}) ASSERT_EQ(bp_graph_build(g, t), BP_OK) << bp_last_error();
  bp_buffer *wbuf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(wctx, first, &wbuf), BP_OK) << bp_last_error();
  bp_buffer_set_usage(wbuf, BP_BUFFER_USAGE_WEIGHTS);
  const quant_weights wq = make_weights(type, K, M, 77);
  ASSERT_EQ(bp_tensor_set(w, wq.bytes.data(), 0, wq.bytes.size()), BP_OK) << bp_last_error();
  bp_backend *order[2] = {first, cpu};
  bp_sched *sched = bp_sched_new(order, nullptr, 2, 0, false);
  ASSERT_NE(sched, nullptr) << bp_last_error();
  ASSERT_EQ(bp_sched_alloc_graph(sched, g), BP_OK) << bp_last_error();
  for (bp_tensor *t : {y, r, q}) EXPECT_EQ(bp_sched_get_tensor_backend(sched, t), cpu) << bp_op_name(t->op);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> xv(static_cast<size_t>(K * N));
  for (float &v : xv) v = dist(rng);
  const std::vector<int32_t> iv = {6, 0, 3, 6};
  ASSERT_EQ(bp_tensor_set(x, xv.data(), 0, xv.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_set(ids, iv.data(), 0, iv.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_sched_graph_compute(sched, g), BP_OK) << bp_last_error();

  std::vector<float> yv(static_cast<size_t>(M * N)), rv(static_cast<size_t>(K * n_ids));
  ASSERT_EQ(bp_tensor_get(y, yv.data(), 0, yv.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(r, rv.data(), 0, rv.size() * 4), BP_OK) << bp_last_error();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const float *wr = &wq.deq[static_cast<size_t>(m * K)];
      const float *xr = &xv[static_cast<size_t>(n * K)];
      double ref = 0, quant = 0, mag = 0;
      for (int64_t k0 = 0; k0 < K; k0 += 32) {
        double amax = 0, sum_w = 0;
        for (int64_t k = k0; k < k0 + 32 && k < K; ++k) amax = std::fmax(amax, std::fabs(xr[k]));
        for (int64_t k = k0; k < k0 + 32 && k < K; ++k) {
          ref += static_cast<double>(wr[k]) * xr[k];
          sum_w += std::fabs(wr[k]);
          mag += std::fabs(wr[k]) * (std::fabs(xr[k]) + amax / 127);
        }
        quant += 9.0 / 16 * amax / 127 * sum_w;
      }
      const double bound = (type == BP_TYPE_BF16 ? 0 : quant) + 2.0 * (K + 1) * 0x1p-24 * mag + 1e-30;
      EXPECT_NEAR(yv[static_cast<size_t>(n * M + m)], ref, bound) << "y[" << m << ", " << n << "]";
    }
  for (int64_t i = 0; i < n_ids; ++i)
    for (int64_t k = 0; k < K; ++k)
      ASSERT_EQ(rv[static_cast<size_t>(i * K + k)], wq.deq[static_cast<size_t>(iv[static_cast<size_t>(i)] * K + k)])
          << "row " << i << " [" << k << "]";
  std::vector<unsigned char> qb(bp_type_row_size(type, K) * N), want(qb.size());
  ASSERT_EQ(bp_tensor_get(q, qb.data(), 0, qb.size()), BP_OK) << bp_last_error();
  {
    size_t written = 0;
    ASSERT_EQ(bp_quantize_rows(type, xv.data(), want.data(), N, K, &written), BP_OK) << bp_last_error();
    ASSERT_EQ(written, want.size());
  }
  if (type == BP_TYPE_BF16) {
    EXPECT_EQ(qb, want);
  } else {
    std::vector<float> back(xv.size());
    ASSERT_EQ(bp_dequantize(type, qb.data(), back.data(), K * N), BP_OK) << bp_last_error();
    for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(back[i], xv[i], 0.125) << i;
  }
  bp_sched_free(sched);
  bp_buffer_free(wbuf);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_context_free(wctx);
  bp_backend_free(cpu);
}

// The profile lines ("profile: <op> <variant> N dispatches") logged while
// alive, as "<op> <variant>" -> dispatches. Other messages pass through.
class profile_capture {
 public:
  profile_capture() {
    bp_log_set_level(BP_LOG_INFO);
    bp_log_set_callback(&profile_capture::log, this);
  }
  ~profile_capture() { bp_log_set_callback(nullptr, nullptr); }
  std::map<std::string, int> rows() {
    std::lock_guard<std::mutex> lock(mu_);
    return rows_;
  }

 private:
  static void log(bp_log_level, const char *, const char *message, void *self) {
    auto *p = static_cast<profile_capture *>(self);
    char op[64], variant[64];
    int n = 0;
    if (message && std::sscanf(message, "profile: %63s %63s %d dispatches", op, variant, &n) == 3) {
      std::lock_guard<std::mutex> lock(p->mu_);
      p->rows_[std::string(op) + " " + variant] += n;
    }
  }
  std::mutex mu_;
  std::map<std::string, int> rows_;
};

}  // namespace bp_quant_test
