// cpp_api_test.cpp: the header-only C++ layer (backplane.hpp) used as an
// application would: RAII owners free what they own, failures surface as
// bp::error carrying the C status and bp_last_error(), and a graph built and
// run through it gives the numbers of a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backplane/backplane.hpp"

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

class CppApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { bp_registry_add_path(BP_TEST_PLUGIN_DIR); }
};

TEST_F(CppApi, MatMulPlusBiasMatchesADoubleReference) {
  const int64_t k = 33, m = 7, n = 5;  // odd sizes on purpose
  bp::context ctx;
  bp_tensor *a = ctx.tensor_2d(BP_TYPE_F32, k, m);  // m rows of k
  bp_tensor *b = ctx.tensor_2d(BP_TYPE_F32, k, n);  // n rows of k
  bp_tensor *bias = ctx.tensor_1d(BP_TYPE_F32, m);
  bp_tensor *out = bp::check(bp_add(ctx.get(), bp::check(bp_mul_mat(ctx.get(), a, b)), bias));  // [m, n]
  bp::graph g(ctx, out);
  EXPECT_GE(g.n_nodes(), 2u);

  bp::backend be("cpu:threads=2");
  bp::buffer buf = bp::alloc_ctx_tensors(ctx, be);
  ASSERT_TRUE(buf);
  EXPECT_GT(buf.size(), 0u);
  const std::vector<float> av = random_floats((size_t)(k * m), 1), bv = random_floats((size_t)(k * n), 2),
                           biasv = random_floats((size_t)m, 3);
  bp::set(a, av);
  bp::set(b, bv);
  bp::set(bias, biasv);
  be.compute(g);
  const std::vector<float> got = bp::get<float>(out);
  ASSERT_EQ(got.size(), (size_t)(m * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double want = biasv[(size_t)i];
      for (int64_t p = 0; p < k; ++p) want += (double)av[(size_t)(i * k + p)] * (double)bv[(size_t)(j * k + p)];
      EXPECT_NEAR(got[(size_t)(j * m + i)], want, 1e-4) << "at row " << i << ", column " << j;
    }
}

TEST_F(CppApi, FailuresThrowWithStatusAndMessage) {
  try {
    bp::backend be("nosuchplugin");
    FAIL() << "a device spec naming no plugin must throw";
  } catch (const bp::error &e) {
    EXPECT_EQ(e.status(), BP_ERR_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("nosuchplugin"), std::string::npos) << e.what();
  }
  try {
    bp::backend be("cpu:threads=-3");
    FAIL() << "an out-of-range parameter must throw";
  } catch (const bp::error &e) {
    EXPECT_NE(e.status(), BP_OK);
    EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos) << e.what();
  }
  bp::context ctx;
  bp_tensor *a = ctx.tensor_2d(BP_TYPE_F32, 4, 3), *b = ctx.tensor_2d(BP_TYPE_F32, 5, 3);
  // Mismatched inner sizes: the op builder returns NULL, check() throws.
  EXPECT_THROW(bp::check(bp_mul_mat(ctx.get(), a, b)), bp::error);
  EXPECT_THROW(ctx.tensor_1d(BP_TYPE_F32, -1), bp::error);
  // Whole-tensor copies must match the tensor's size exactly.
  bp::backend be("cpu");
  bp::buffer buf = bp::alloc_ctx_tensors(ctx, be);
  EXPECT_THROW(bp::set(a, std::vector<float>(13)), bp::error);
  // A short vector is refused too, before any byte is copied.
  bp::set(a, std::vector<float>(12, 1.0f));
  try {
    bp::set(a, std::vector<float>(11, 2.0f));
    FAIL() << "a vector shorter than the tensor must throw";
  } catch (const bp::error &e) {
    EXPECT_EQ(e.status(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("48 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("44"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bp::get<float>(a), std::vector<float>(12, 1.0f));
}

TEST_F(CppApi, CheckOfANullThatNoCallProducedNamesTheCallersValue) {
  // After a failed call, check() blames that call ...
  bp::context ctx;
  EXPECT_NE(ctx.tensor_1d(BP_TYPE_F32, 3), nullptr);
  try {
    ctx.tensor_1d(BP_TYPE_F32, -1);
    FAIL() << "a negative size must throw";
  } catch (const bp::error &e) {
    EXPECT_EQ(e.status(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(e.what()).find("bp::check"), std::string::npos) << e.what();
  }
  // ... but after a call that succeeded (an index past the end, which is
  // the end of an iteration, not an error), the NULL is the caller's own,
  // and the message says so, blaming no earlier call.
  bp_tensor *missing = bp_context_tensor(ctx.get(), 999);
  ASSERT_EQ(missing, nullptr);
  ASSERT_EQ(bp_last_status(), BP_OK);
  try {
    bp::check(missing, "tensor 'no such tensor'");
    FAIL() << "check(NULL) must throw";
  } catch (const bp::error &e) {
    EXPECT_EQ(e.status(), BP_ERR_INVALID_ARGUMENT);
    const std::string what = e.what();
    EXPECT_NE(what.find("tensor 'no such tensor' is NULL"), std::string::npos) << what;
    EXPECT_NE(what.find("succeeded"), std::string::npos) << what;
  }
}

TEST_F(CppApi, HandlesMoveAndReleaseOwnership) {
  bp::backend first("cpu");
  bp_backend *raw = first.get();
  bp::backend second(std::move(first));
  EXPECT_FALSE(first);
  EXPECT_EQ(second.get(), raw);
  bp_backend *released = second.release();
  EXPECT_FALSE(second);
  EXPECT_EQ(released, raw);
  bp_backend_free(released);  // released: the caller frees it

  std::vector<bp::backend> list = bp::backends("blas;cpu");
  ASSERT_EQ(list.size(), 2u);
  EXPECT_STRNE(list[0].name(), list[1].name());
}

TEST_F(CppApi, SchedulerRunsAGraphOverTwoBackends) {
  std::vector<bp::backend> list = bp::backends("blas;cpu");
  bp::context ctx;
  const int64_t k = 256, m = 200, n = 64;  // large enough for blas's min_mnk
  bp_tensor *w = ctx.tensor_2d(BP_TYPE_F32, k, m), *x = ctx.tensor_2d(BP_TYPE_F32, k, n);
  bp_tensor *y = bp::check(bp_silu(ctx.get(), bp::check(bp_mul_mat(ctx.get(), w, x))));
  bp::buffer weights = bp::alloc_ctx_tensors(ctx, list.back());  // host memory, shared by both
  const std::vector<float> wv = random_floats((size_t)(k * m), 4), xv = random_floats((size_t)(k * n), 5);
  bp::set(w, wv);
  bp::set(x, xv);
  bp::graph g(ctx, y);
  bp::sched s({list[0].get(), list[1].get()});
  s.compute(g);
  EXPECT_EQ(s.n_copies(), 0);  // both backends read host memory
  EXPECT_GE(s.n_splits(), 2);  // MUL_MAT on blas, SILU on cpu
  const std::vector<float> got = bp::get<float>(y);
  for (int64_t j = 0; j < n; j += 7)
    for (int64_t i = 0; i < m; i += 11) {
      double dot = 0;
      for (int64_t p = 0; p < k; ++p) dot += (double)wv[(size_t)(i * k + p)] * (double)xv[(size_t)(j * k + p)];
      const double want = dot / (1.0 + std::exp(-dot));
      EXPECT_NEAR(got[(size_t)(j * m + i)], want, 1e-3) << "at row " << i << ", column " << j;
    }
}

}  // namespace
