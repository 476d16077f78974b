// plugin_test.cpp: the opencl plugin through the public API: device
// properties, parameter validation, buffers (alignment, the allocation
// limit, out of memory), asynchronous transfers, events, and the MUL_MAT
// variants (vector width x columns per work-item) and SOFT_MAX paths against a
// double-precision reference at sizes and values the conformance cases do not
// reach. Skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "opencl_harness.hpp"
#include "support/find.hpp"

using namespace bp_opencl_test;

namespace {

// Read before main, so before any test enumerated the plugin.
const char *const kPoclAffinityAtStart = std::getenv("POCL_AFFINITY");
const std::string kPoclAffinityValue = kPoclAffinityAtStart ? kPoclAffinityAtStart : "";

class OpenclPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    specs_ = device_specs();
    if (specs_.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
  }
  bp_backend *make(const std::string &params = "") {
    bp_backend *be = nullptr;
    std::string spec = specs_[0] + ",cache_dir=" + test_cache_dir() + (params.empty() ? "" : "," + params);
    EXPECT_EQ(bp_backend_new(spec.c_str(), &be), BP_OK) << spec << ": " << bp_last_error();
    return be;
  }
  std::vector<std::string> specs_;
};

TEST_F(OpenclPlugin, DevicesDescribeThemselves) {
  bp_plugin *p = bp_test::find_plugin("opencl");
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < bp_plugin_device_count(p); ++i) {
    bp_device_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(bp_device_describe(bp_plugin_device(p, i), &info), BP_OK) << bp_last_error();
    EXPECT_STRNE(info.name, "");
    EXPECT_STRNE(info.id, "");
    EXPECT_NE(std::string(info.description).find("OpenCL"), std::string::npos) << info.description;
    EXPECT_GT(info.memory_total, 0u);
    EXPECT_TRUE(info.caps & BP_DEVICE_CAP_ASYNC);
    EXPECT_TRUE(info.caps & BP_DEVICE_CAP_EVENTS);
  }
}

// A plugin never changes the host process: pinning PoCL's workers is the
// user's choice (POCL_AFFINITY=1 before the process starts), so enumerating
// and running leave the variable as it was.
TEST_F(OpenclPlugin, PoclAffinityIsLeftToTheUser) {
  bp_backend *be = make();
  bp_backend_free(be);
  const char *v = std::getenv("POCL_AFFINITY");
  EXPECT_EQ(v != nullptr, kPoclAffinityAtStart != nullptr) << "the plugin set or removed POCL_AFFINITY";
  if (v) {
    EXPECT_EQ(std::string(v), kPoclAffinityValue);
  }
}

TEST_F(OpenclPlugin, ParametersAreValidated) {
  bp_backend *be = nullptr;
  EXPECT_EQ(bp_backend_new("opencl:matmul_cols=3", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("matmul_cols=3; use 0 (auto), 1, 2 or 4"), std::string::npos)
      << bp_last_error();
  EXPECT_EQ(bp_backend_new("opencl:matmul_width=2", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("matmul_width=2; use 0 (auto), 4, 8 or 16"), std::string::npos)
      << bp_last_error();
  EXPECT_EQ(bp_backend_new("opencl:platform=1000", &be), BP_ERR_NOT_FOUND);
  EXPECT_EQ(bp_backend_new("opencl:cache=maybe", &be), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(be, nullptr);
  be = make("platform=0,matmul_cols=2,matmul_width=8,cache=false");
  bp_backend_free(be);
}

TEST_F(OpenclPlugin, BuffersRespectAlignmentAndLimits) {
  bp_backend *be = make();
  ASSERT_NE(be, nullptr);
  bp_buffer_type *buft = bp_backend_buffer_type(be);
  const size_t align = bp_buffer_type_alignment(buft);
  EXPECT_GE(align, 128u);
  EXPECT_EQ(align & (align - 1), 0u);
  const size_t max = bp_buffer_type_max_size(buft);
  bp_buffer *buf = nullptr;
  ASSERT_LT(max, SIZE_MAX - 1);
  // max_size is CL_DEVICE_MAX_MEM_ALLOC_SIZE: the core refuses more before
  // the plugin sees it (the plugin would say OUT_OF_DEVICE_MEMORY itself).
  const bp_status st = bp_buffer_type_alloc(buft, max + 1, &buf);
  EXPECT_TRUE(st == BP_ERR_RESOURCE_EXHAUSTED || st == BP_ERR_OUT_OF_DEVICE_MEMORY) << bp_last_error();
  EXPECT_EQ(buf, nullptr);
  // The device stays usable after the refusal; zero-sized buffers work.
  ASSERT_EQ(bp_buffer_type_alloc(buft, 0, &buf), BP_OK) << bp_last_error();
  bp_buffer_free(buf);
  ASSERT_EQ(bp_buffer_type_alloc(buft, 1000, &buf), BP_OK) << bp_last_error();
  EXPECT_FALSE(bp_buffer_is_host(buf));
  EXPECT_EQ(bp_buffer_clear(buf, 0x5a), BP_OK);
  bp_buffer_free(buf);
  bp_backend_free(be);
}

TEST_F(OpenclPlugin, AsyncTransfersAndEvents) {
  bp_backend *be = make();
  ASSERT_NE(be, nullptr);
  bp_context *ctx = bp_context_new(0);
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1000);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> in(1000), out(1000, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  ASSERT_EQ(bp_backend_tensor_set_async(be, t, in.data(), 0, in.size() * 4), BP_OK) << bp_last_error();
  bp_event *ev = nullptr;
  ASSERT_EQ(bp_event_new(bp_backend_device(be), &ev), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_event_record(ev, be), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_wait_event(be, ev), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_tensor_get_async(be, t, out.data(), 0, out.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_event_record(ev, be), BP_OK);
  ASSERT_EQ(bp_event_synchronize(ev), BP_OK) << bp_last_error();
  EXPECT_EQ(in, out);
  // A partial synchronous read at an offset.
  float four[4] = {};
  ASSERT_EQ(bp_tensor_get(t, four, 10 * 4, sizeof four), BP_OK);
  EXPECT_EQ(four[0], 5.0f);
  EXPECT_EQ(four[3], 6.5f);
  bp_event_free(ev);
  bp_buffer_free(buf);
  bp_context_free(ctx);
  bp_backend_free(be);
}

// out[m, n] = sum_k a[k, m] b[k, n] for sizes that cross every tile edge.
void check_mul_mat(bp_backend *be, bp_type ta, int64_t K, int64_t M, int64_t N) {
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_new_2d(ctx, ta, K, M);
  bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N);
  bp_tensor *c = bp_mul_mat(ctx, a, b);
  ASSERT_NE(c, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, c), BP_OK);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::mt19937 rng(static_cast<unsigned>(K * 131 + M * 7 + N));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<double> av(static_cast<size_t>(K * M)), bv(static_cast<size_t>(K * N));
  std::vector<float> bf(bv.size());
  std::vector<uint16_t> ah(av.size());
  std::vector<float> af(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    af[i] = dist(rng);
    ah[i] = bp_fp32_to_fp16(af[i]);
    av[i] = ta == BP_TYPE_F16 ? bp_fp16_to_fp32(ah[i]) : af[i];
  }
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = bf[i] = dist(rng);
  ASSERT_EQ(
      bp_tensor_set(a, ta == BP_TYPE_F16 ? static_cast<const void *>(ah.data()) : af.data(), 0, bp_tensor_nbytes(a)),
      BP_OK);
  ASSERT_EQ(bp_tensor_set(b, bf.data(), 0, bp_tensor_nbytes(b)), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> out(static_cast<size_t>(M * N));
  ASSERT_EQ(bp_tensor_get(c, out.data(), 0, out.size() * 4), BP_OK);
  double err2 = 0, ref2 = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += av[m * K + k] * bv[n * K + k];
      const double d = out[n * M + m] - ref;
      err2 += d * d;
      ref2 += ref * ref;
    }
  EXPECT_LT(err2 / ref2, 1e-10) << "MUL_MAT " << bp_type_name(ta) << " K=" << K << " M=" << M << " N=" << N;
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
}

// Every generated variant of mul_mat_dot (vector width x columns per
// work-item), whatever this device would choose: K with a tail past each
// width (K % 16 = 12, K % 8 = 4 or 3), M past a multiple of 4 rows, N past a
// multiple of the columns, N = 1 (one column whatever the setting), N = 3
// (spare columns not stored), and groups of several column items.
TEST_F(OpenclPlugin, MulMatVariantsMatchDoublePrecision) {
  for (const char *width : {"matmul_width=16", "matmul_width=8", "matmul_width=4"})
    for (const char *cols : {"matmul_cols=4", "matmul_cols=2", "matmul_cols=1"}) {
      SCOPED_TRACE(std::string(width) + "," + cols);
      bp_backend *be = make(std::string(width) + "," + cols);
      ASSERT_NE(be, nullptr);
      check_mul_mat(be, BP_TYPE_F32, 300, 70, 3);    // K tail, spare columns
      check_mul_mat(be, BP_TYPE_F32, 131, 97, 41);   // tails in K, M and N, several column items per group
      check_mul_mat(be, BP_TYPE_F16, 260, 33, 130);  // f16 a, more columns than one group takes
      check_mul_mat(be, BP_TYPE_F16, 64, 129, 1);    // matrix x vector from f16
      check_mul_mat(be, BP_TYPE_F32, 7, 5, 2);       // K shorter than any vector: the scalar tail only
      bp_backend_free(be);
    }
}

enum class mask_kind { none, f32, f16, f32_strided };

// SOFT_MAX over rows of 83 (five float16 steps and a scalar tail) whose
// scaled values span 160, so that the exponentials run from 1 down past
// 2^-126 (zero there); masks with -inf inside the float16 steps and one row
// masked entirely (zeros), dense f32 and f16 masks (exponentials recomputed
// from x) and a transposed one (x * scale + mask gathered into y first).
void check_soft_max(bp_backend *be, mask_kind mk, float scale) {
  const int64_t n = 83, rows = 6;
  bp_context *ctx = bp_context_new(0);
  bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, n, rows);
  bp_tensor *m = nullptr, *mstore = nullptr;
  if (mk == mask_kind::f32 || mk == mask_kind::f16)
    m = mstore = bp_tensor_new_2d(ctx, mk == mask_kind::f16 ? BP_TYPE_F16 : BP_TYPE_F32, n, rows);
  if (mk == mask_kind::f32_strided) {
    mstore = bp_tensor_new_2d(ctx, BP_TYPE_F32, rows, n);
    m = bp_transpose(ctx, mstore);  // element (k, r) at mstore[k * rows + r]
  }
  bp_tensor *y = bp_soft_max(ctx, x, m, scale);
  ASSERT_NE(y, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, y), BP_OK);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::mt19937 rng(static_cast<unsigned>(static_cast<int>(mk) * 31 + 7));
  std::uniform_real_distribution<float> xs(-120.0f, 40.0f), ms(-2.0f, 0.0f);
  std::vector<float> xv(static_cast<size_t>(n * rows)), mv(xv.size(), 0.0f), mf(xv.size());
  std::vector<uint16_t> mh(xv.size());
  for (float &v : xv) v = xs(rng) / scale;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k) {
      float v = ms(rng);
      if (r == 0 || (r == 1 && k < 40) || (k * 7 + r) % 5 == 0) v = -INFINITY;
      const size_t i = static_cast<size_t>(r * n + k);
      mh[i] = bp_fp32_to_fp16(v);
      mv[i] = mk == mask_kind::none ? 0.0f : mk == mask_kind::f16 ? bp_fp16_to_fp32(mh[i]) : v;
      mf[static_cast<size_t>(mk == mask_kind::f32_strided ? k * rows + r : r * n + k)] = v;
    }
  ASSERT_EQ(bp_tensor_set(x, xv.data(), 0, bp_tensor_nbytes(x)), BP_OK);
  if (mstore) {
    const void *mdata = mk == mask_kind::f16 ? static_cast<const void *>(mh.data()) : mf.data();
    ASSERT_EQ(bp_tensor_set(mstore, mdata, 0, bp_tensor_nbytes(mstore)), BP_OK);
  }
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> out(xv.size());
  ASSERT_EQ(bp_tensor_get(y, out.data(), 0, out.size() * 4), BP_OK);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> v(static_cast<size_t>(n));
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      const size_t i = static_cast<size_t>(r * n + k);
      v[k] = static_cast<double>(xv[i]) * scale + mv[i];
      mx = std::max(mx, v[k]);
    }
    for (int64_t k = 0; k < n; ++k) sum += mx == -INFINITY ? 0 : std::exp(v[k] - mx);
    for (int64_t k = 0; k < n; ++k) {
      const float got = out[static_cast<size_t>(r * n + k)];
      if (mx == -INFINITY || v[k] == -INFINITY) {
        EXPECT_EQ(got, 0.0f) << "row " << r << " k " << k;
        continue;
      }
      const double want = std::exp(v[k] - mx) / sum;
      // Rounding x * scale + mask and the maximum in f32 moves the argument
      // of exp by a few ulp of their size; below 2^-126 results are zero.
      const double tol = want * (1e-6 + 2.4e-7 * (std::fabs(v[k]) + std::fabs(mx))) + 1e-37;
      EXPECT_NEAR(got, want, tol) << "mask kind " << static_cast<int>(mk) << " scale " << scale << " row " << r << " k "
                                  << k;
    }
  }
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
}

TEST_F(OpenclPlugin, SoftMaxPathsMatchDoublePrecision) {
  bp_backend *be = make();
  ASSERT_NE(be, nullptr);
  check_soft_max(be, mask_kind::none, 0.7f);
  check_soft_max(be, mask_kind::f32, 1.0f);
  check_soft_max(be, mask_kind::f16, 0.125f);
  check_soft_max(be, mask_kind::f32_strided, 1.0f);
  bp_backend_free(be);
}

TEST_F(OpenclPlugin, GetRowsRefusesABadId) {
  bp_backend *be = make();
  ASSERT_NE(be, nullptr);
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3);
  bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, 2);
  bp_tensor *r = bp_get_rows(ctx, a, ids);
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, r), BP_OK);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  const int32_t bad[2] = {1, 3};
  ASSERT_EQ(bp_tensor_set(ids, bad, 0, sizeof bad), BP_OK);
  EXPECT_EQ(bp_backend_graph_compute(be, g), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("row id 3"), std::string::npos) << bp_last_error();
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
  bp_backend_free(be);
}

}  // namespace
