// blas_test.cpp: the OpenBLAS plugin against a double-precision reference.
//
// MUL_MAT over odd shapes (1, 7, 33, 257), f16 a, batch broadcast of a,
// strided rows; and what the backend refuses: permuted operands, other ops,
// products under min_mnk. The backend is created with min_mnk=0 where small
// shapes must run on it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace {

class Blas : public ::testing::Test {
 protected:
  virtual const char *spec() const { return "blas:min_mnk=0"; }

  void SetUp() override {
    bp_registry_add_path(BP_TEST_PLUGIN_DIR);
    if (bp_backend_new(spec(), &be_) != BP_OK) {
      GTEST_SKIP() << "the blas plugin is not available: " << bp_last_error();
    }
    ctx_ = bp_context_new(0);
    graph_ = bp_graph_new(ctx_, 0);
  }
  void TearDown() override {
    bp_buffer_free(buf_);
    bp_graph_free(graph_);
    bp_context_free(ctx_);
    bp_backend_free(be_);
  }

  // Random values in [-1, 1) written to |t| (f32 or f16); returns them as doubles
  // (after rounding to the tensor's type), in logical element order.
  std::vector<double> fill(bp_tensor *t, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<double> logical(static_cast<size_t>(bp_tensor_nelements(t)));
    std::vector<unsigned char> bytes(bp_tensor_nbytes(t));
    size_t i = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
          for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
            float v = dist(gen);
            size_t off = i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
            if (t->type == BP_TYPE_F16) {
              uint16_t h = bp_fp32_to_fp16(v);
              std::memcpy(&bytes[off], &h, 2);
              v = bp_fp16_to_fp32(h);
            } else {
              std::memcpy(&bytes[off], &v, 4);
            }
            logical[i++] = v;
          }
    EXPECT_EQ(bp_tensor_set(t, bytes.data(), 0, bytes.size()), BP_OK) << bp_last_error();
    return logical;
  }

  // Allocates the context on the blas backend (views follow their source).
  void alloc() { ASSERT_EQ(bp_context_alloc_tensors(ctx_, be_, &buf_), BP_OK) << bp_last_error(); }

  std::vector<float> read(const bp_tensor *t) {
    std::vector<float> out(static_cast<size_t>(bp_tensor_nelements(t)));
    EXPECT_TRUE(bp_tensor_is_contiguous(t));
    EXPECT_EQ(bp_tensor_get(t, out.data(), 0, out.size() * 4), BP_OK) << bp_last_error();
    return out;
  }

  // d[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3], all in double.
  static std::vector<double> reference(const std::vector<double> &a, const int64_t *ane, const std::vector<double> &b,
                                       const int64_t *bne) {
    const int64_t K = ane[0], M = ane[1], N = bne[1], r2 = bne[2] / ane[2], r3 = bne[3] / ane[3];
    std::vector<double> d(static_cast<size_t>(M * N * bne[2] * bne[3]));
    for (int64_t i3 = 0; i3 < bne[3]; ++i3)
      for (int64_t i2 = 0; i2 < bne[2]; ++i2)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t m = 0; m < M; ++m) {
            double acc = 0;
            const int64_t abase = (((i3 / r3) * ane[2] + i2 / r2) * M + m) * K;
            const int64_t bbase = ((i3 * bne[2] + i2) * N + n) * K;
            for (int64_t k = 0; k < K; ++k) acc += a[abase + k] * b[bbase + k];
            d[((i3 * bne[2] + i2) * N + n) * M + m] = acc;
          }
    return d;
  }

  // Normalised mean squared error of |got| against |want|.
  static double nmse(const std::vector<float> &got, const std::vector<double> &want) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      double dlt = got[i] - want[i];
      err += dlt * dlt;
      ref += want[i] * want[i];
    }
    return ref > 0 ? err / ref : err;
  }

  // Builds a x b, computes it on blas and checks it against the reference.
  void check_mul_mat(bp_tensor *a, bp_tensor *b, double tolerance = 1e-10) {
    bp_tensor *c = bp_mul_mat(ctx_, a, b);
    ASSERT_NE(c, nullptr) << bp_last_error();
    ASSERT_EQ(bp_graph_build(graph_, c), BP_OK) << bp_last_error();
    ASSERT_TRUE(bp_backend_supports_op(be_, c));
    alloc();
    std::vector<double> av = fill(a, 1), bv = fill(b, 2);
    ASSERT_EQ(bp_backend_graph_compute(be_, graph_), BP_OK) << bp_last_error();
    std::vector<double> want = reference(av, a->ne, bv, b->ne);
    std::vector<float> got = read(c);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(nmse(got, want), tolerance);
    // Element-wise too: one wrong element must not hide in the mean.
    const double K = static_cast<double>(a->ne[0]);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5 * K + 1e-6) << "element " << i;
  }

  bp_backend *be_ = nullptr;
  bp_context *ctx_ = nullptr;
  bp_graph *graph_ = nullptr;
  bp_buffer *buf_ = nullptr;
};

struct shape_case {
  int64_t K, M, N;
};

class BlasShapes : public Blas, public ::testing::WithParamInterface<shape_case> {};

TEST_P(BlasShapes, MulMatMatchesDoubleReference) {
  const shape_case s = GetParam();
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, s.K, s.M);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, s.K, s.N);
  check_mul_mat(a, b);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, BlasShapes,
                         ::testing::Values(shape_case{1, 1, 1}, shape_case{7, 1, 33}, shape_case{1, 33, 7},
                                           shape_case{33, 7, 1}, shape_case{257, 33, 7}, shape_case{7, 257, 33},
                                           shape_case{33, 33, 257}, shape_case{257, 7, 1}),
                         [](const auto &info) {
                           return "K" + std::to_string(info.param.K) + "_M" + std::to_string(info.param.M) + "_N" +
                                  std::to_string(info.param.N);
                         });

TEST_F(Blas, F16WeightsAreWidened) {
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F16, 33, 7);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 33, 257);
  check_mul_mat(a, b);
}

TEST_F(Blas, BatchBroadcastsAOverDims2And3) {
  bp_tensor *a = bp_tensor_new_4d(ctx_, BP_TYPE_F32, 33, 7, 2, 1);
  bp_tensor *b = bp_tensor_new_4d(ctx_, BP_TYPE_F32, 33, 5, 4, 3);
  check_mul_mat(a, b);
}

TEST_F(Blas, F16BatchBroadcast) {
  bp_tensor *a = bp_tensor_new_4d(ctx_, BP_TYPE_F16, 7, 33, 1, 3);
  bp_tensor *b = bp_tensor_new_4d(ctx_, BP_TYPE_F32, 7, 1, 2, 3);
  check_mul_mat(a, b);
}

TEST_F(Blas, OneAOverManyBatchesIsOneProduct) {
  // a is 2-D and b's batches are dense: the plugin folds them into one sgemm.
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 33, 7);
  bp_tensor *b = bp_tensor_new_4d(ctx_, BP_TYPE_F32, 33, 3, 5, 2);
  check_mul_mat(a, b);
}

// Products big enough (M*N*K >= 2^18) to be split over the backend's own
// threads; three threads so the chunks come out uneven.
class BlasSplit : public Blas {
 protected:
  const char *spec() const override { return "blas:min_mnk=0,threads=3"; }
};

TEST_F(BlasSplit, ByColumnsOfTheResult) {
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 65, 1031);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 65, 9);
  check_mul_mat(a, b);
}

TEST_F(BlasSplit, ByRowsOfTheResult) {
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 65, 9);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 65, 1031);
  check_mul_mat(a, b);
}

TEST_F(BlasSplit, F16RowsWidenedByTheThreadThatUsesThem) {
  // More rows than columns, but an f16 a is always split by columns (33 over
  // 3 threads in 16-column chunks: 16, 16, 1).
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F16, 65, 33);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 65, 257);
  check_mul_mat(a, b);
}

TEST_F(BlasSplit, SmallBatchesSpreadOverThreads) {
  // 8 batches of 64*32*32 (each too small to split), a broadcast 2x2.
  bp_tensor *a = bp_tensor_new_4d(ctx_, BP_TYPE_F32, 64, 32, 2, 1);
  bp_tensor *b = bp_tensor_new_4d(ctx_, BP_TYPE_F32, 64, 32, 4, 2);
  check_mul_mat(a, b);
}

TEST_F(BlasSplit, F16BroadcastWidenedOncePerSlice) {
  // Consecutive batches share an a slice: the second reuses the widened copy.
  bp_tensor *a = bp_tensor_new_4d(ctx_, BP_TYPE_F16, 64, 257, 1, 2);
  bp_tensor *b = bp_tensor_new_4d(ctx_, BP_TYPE_F32, 64, 17, 3, 2);
  check_mul_mat(a, b);
}

TEST_F(Blas, StridedRowsUseTheLeadingDimension) {
  // Rows of a and b are dense but spaced wider than K (views of wider tensors).
  bp_tensor *wa = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 40, 7);
  bp_tensor *wb = bp_tensor_new_3d(ctx_, BP_TYPE_F32, 37, 5, 2);
  bp_tensor *a = bp_view_2d(ctx_, wa, 33, 7, wa->nb[1], 4 * sizeof(float));
  bp_tensor *b = bp_view_3d(ctx_, wb, 33, 5, 2, wb->nb[1], wb->nb[2], 0);
  ASSERT_NE(a, nullptr) << bp_last_error();
  ASSERT_NE(b, nullptr) << bp_last_error();
  check_mul_mat(a, b);
}

TEST_F(Blas, RefusesPermutedOperands) {
  // The core refuses non-dense rows when building (bp_mul_mat asks for
  // bp_cont), so hand the backend nodes edited afterwards, as a caller that
  // changed tensors might: a transposed a, then a transposed b.
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 64, 64);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 64, 64);
  bp_tensor *c = bp_mul_mat(ctx_, a, b);
  ASSERT_NE(c, nullptr) << bp_last_error();
  EXPECT_TRUE(bp_backend_supports_op(be_, c));
  for (int which = 0; which < 2; ++which) {
    bp_tensor edited_src = *c->src[which];
    std::swap(edited_src.nb[0], edited_src.nb[1]);  // a transposed view of the same bytes
    bp_tensor edited = *c;
    edited.src[which] = &edited_src;
    EXPECT_FALSE(bp_backend_supports_op(be_, &edited)) << "src " << which;
  }
  // Rows spaced closer than their length overlap: BLAS cannot take that.
  bp_tensor overlap = *c->src[0];
  overlap.nb[1] = 16 * sizeof(float);
  bp_tensor edited = *c;
  edited.src[0] = &overlap;
  EXPECT_FALSE(bp_backend_supports_op(be_, &edited));
}

TEST_F(Blas, RefusesEveryOtherOp) {
  bp_tensor *x = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 64, 64);
  bp_tensor *y = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 64, 64);
  for (bp_tensor *t : {bp_add(ctx_, x, y), bp_mul(ctx_, x, y), bp_silu(ctx_, x), bp_soft_max(ctx_, x, nullptr, 1.0f),
                       bp_rms_norm(ctx_, x, 1e-5f), bp_cont(ctx_, bp_transpose(ctx_, x)), bp_scale(ctx_, x, 2.0f)}) {
    ASSERT_NE(t, nullptr) << bp_last_error();
    EXPECT_FALSE(bp_backend_supports_op(be_, t)) << bp_op_name(t->op);
    EXPECT_FALSE(bp_backend_offload_op(be_, t)) << bp_op_name(t->op);
  }
}

// BLAS has no quantized types: MUL_MAT of quantized weights, GET_ROWS of a
// quantized table and quantizing copies go to another backend.
TEST_F(Blas, DeclinesQuantizedTensors) {
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 256, 64);
  for (bp_type type :
       {BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16}) {
    bp_tensor *w = bp_tensor_new_2d(ctx_, type, 256, 64);
    for (bp_tensor *t : {bp_mul_mat(ctx_, w, b), bp_get_rows(ctx_, w, bp_tensor_new_1d(ctx_, BP_TYPE_I32, 4)),
                         bp_cast(ctx_, b, type)}) {
      ASSERT_NE(t, nullptr) << bp_last_error();
      EXPECT_FALSE(bp_backend_supports_op(be_, t)) << bp_op_name(t->op) << " " << bp_type_name(type);
      EXPECT_FALSE(bp_backend_offload_op(be_, t)) << bp_op_name(t->op) << " " << bp_type_name(type);
    }
  }
}

TEST_F(Blas, ComputingAnUnsupportedOpIsAnErrorNotACrash) {
  bp_tensor *x = bp_tensor_new_1d(ctx_, BP_TYPE_F32, 7);
  bp_tensor *y = bp_tensor_new_1d(ctx_, BP_TYPE_F32, 7);
  bp_tensor *s = bp_add(ctx_, x, y);
  ASSERT_EQ(bp_graph_build(graph_, s), BP_OK) << bp_last_error();
  alloc();
  fill(x, 3);
  fill(y, 4);
  EXPECT_EQ(bp_backend_graph_compute(be_, graph_), BP_ERR_UNIMPLEMENTED);
  EXPECT_NE(std::string(bp_last_error()), "");
}

TEST_F(Blas, SmallProductsGoElsewhereByDefault) {
  bp_backend *dflt = nullptr;
  ASSERT_EQ(bp_backend_new("blas", &dflt), BP_OK) << bp_last_error();
  bp_tensor *small = bp_mul_mat(ctx_, bp_tensor_new_2d(ctx_, BP_TYPE_F32, 31, 32), bp_tensor_new_2d(ctx_, BP_TYPE_F32, 31, 32));
  bp_tensor *big = bp_mul_mat(ctx_, bp_tensor_new_2d(ctx_, BP_TYPE_F32, 32, 32), bp_tensor_new_2d(ctx_, BP_TYPE_F32, 32, 32));
  EXPECT_FALSE(bp_backend_supports_op(dflt, small));  // 31*32*32 < 32^3
  EXPECT_TRUE(bp_backend_supports_op(dflt, big));
  EXPECT_TRUE(bp_backend_offload_op(dflt, big));
  EXPECT_TRUE(bp_backend_supports_op(be_, small));  // min_mnk=0 takes anything
  bp_backend_free(dflt);
}

TEST_F(Blas, SharesHostMemoryWithCpu) {
  bp_backend *cpu = nullptr;
  if (bp_backend_new("cpu", &cpu) != BP_OK) GTEST_SKIP() << "cpu plugin missing: " << bp_last_error();
  EXPECT_TRUE(bp_buffer_type_is_host(bp_backend_buffer_type(be_)));
  EXPECT_TRUE(bp_backend_supports_buft(be_, bp_backend_buffer_type(cpu)));
  EXPECT_TRUE(bp_backend_supports_buft(be_, bp_backend_buffer_type(be_)));
  bp_backend_free(cpu);
}

TEST_F(Blas, DeviceDescribesItself) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(bp_device_describe(bp_backend_device(be_), &info), BP_OK) << bp_last_error();
  EXPECT_STREQ(info.name, "BLAS");
  EXPECT_STREQ(info.id, "blas-0");
  EXPECT_EQ(info.type, BP_DEVICE_TYPE_CPU);
  EXPECT_TRUE(info.caps & BP_DEVICE_CAP_HOST_MEMORY);
  bp_backend *by_id = nullptr;
  ASSERT_EQ(bp_backend_new(info.spec, &by_id), BP_OK) << info.spec << ": " << bp_last_error();
  bp_backend_free(by_id);
}

TEST_F(Blas, ThreadsParameterIsValidated) {
  bp_backend *one = nullptr, *bad = nullptr;
  ASSERT_EQ(bp_backend_new("blas:threads=1,min_mnk=0", &one), BP_OK) << bp_last_error();
  EXPECT_NE(bp_backend_new("blas:threads=-1", &bad), BP_OK);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(bp_backend_new("blas:thread=2", &bad), BP_OK);  // unknown key
  // A product on the one-thread backend still matches.
  bp_backend_free(be_);
  be_ = one;
  check_mul_mat(bp_tensor_new_2d(ctx_, BP_TYPE_F32, 257, 33), bp_tensor_new_2d(ctx_, BP_TYPE_F32, 257, 7));
}

}  // namespace

// OpenBLAS forced onto a core narrower than the CPU (as it falls back to one
// on a CPU model it does not know): the device's description names the
// OPENBLAS_CORETYPE that runs the CPU's own width. OpenBLAS reads the
// variable once, when the plugin first loads it, so this runs in a process
// of its own (ctest runs each test so).
TEST(BlasCoretype, NarrowCoreNamesTheCoretypeOfTheCpu) {
#if defined(__x86_64__) && defined(__GNUC__)
  const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx2) GTEST_SKIP() << "this CPU has no kernels wider than OpenBLAS's SSE3 ones";
  ASSERT_EQ(setenv("OPENBLAS_CORETYPE", "Prescott", 1), 0);
  bp_registry_add_path(BP_TEST_PLUGIN_DIR);
  bp_backend *be = nullptr;
  if (bp_backend_new("blas", &be) != BP_OK) GTEST_SKIP() << "the blas plugin is not available: " << bp_last_error();
  bp_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(bp_device_describe(bp_backend_device(be), &info), BP_OK) << bp_last_error();
  const std::string description = info.description;
  bp_backend_free(be);
  unsetenv("OPENBLAS_CORETYPE");
  if (description.find("core Prescott") == std::string::npos)
    GTEST_SKIP() << "OpenBLAS was loaded before this test set its core: " << description;
  EXPECT_NE(description.find(avx512 ? "OPENBLAS_CORETYPE=SkylakeX" : "OPENBLAS_CORETYPE=Haswell"), std::string::npos)
      << description;
#else
  GTEST_SKIP() << "OpenBLAS's x86-64 cores only";
#endif
}
