// fusion_test.cpp: the opencl backend's fused launches (ops_fusion.cpp):
// RMS_NORM or NORM then MUL by a row or a same-shape weight, SILU then MUL
// in both operand orders and across an independent node (SwiGLU's up
// projection), with the first node's result also read by a later node and
// by the caller. Results match a double-precision reference computed here
// and are bit-equal to fuse=false; the debug log shows the pair fused. A
// pair that must not fuse (the weight is the norm's own row) still computes
// right.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "opencl_harness.hpp"

namespace bp_opencl_test {
namespace {

// One graph built on a backend: |build| makes the leaves and the outputs it
// returns, inputs are filled from |inputs| in order, outputs read back.
struct run_result {
  std::vector<std::vector<float>> outputs;
  bool ok = false;
};

using builder = std::vector<bp_tensor *> (*)(bp_context *ctx, std::vector<bp_tensor *> *inputs);

run_result run_on(const std::string &spec, builder build, const std::vector<std::vector<float>> &values) {
  run_result r;
  bp_backend *be = nullptr;
  if (bp_backend_new((spec + ",cache_dir=" + test_cache_dir()).c_str(), &be) != BP_OK) {
    ADD_FAILURE() << bp_last_error();
    return r;
  }
  bp_context *ctx = bp_context_new(0);
  std::vector<bp_tensor *> inputs;
  const std::vector<bp_tensor *> outs = build(ctx, &inputs);
  bp_graph *g = bp_graph_new(ctx, 0);
  for (bp_tensor *o : outs) EXPECT_EQ(bp_graph_build(g, o), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  EXPECT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_EQ(bp_tensor_set(inputs[i], values[i].data(), 0, values[i].size() * 4), BP_OK);
  EXPECT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  for (bp_tensor *o : outs) {
    std::vector<float> v(static_cast<size_t>(bp_tensor_nelements(o)));
    EXPECT_EQ(bp_tensor_get(o, v.data(), 0, v.size() * 4), BP_OK);
    r.outputs.push_back(v);
  }
  r.ok = true;
  bp_graph_free(g);
  bp_buffer_free(buf);
  bp_context_free(ctx);
  bp_backend_free(be);
  return r;
}

void expect_near(const std::vector<float> &got, const std::vector<double> &want, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 + 2e-6 * std::fabs(want[i])) << what << " element " << i;
}

constexpr int64_t kRow = 37, kRows = 5;  // an odd row length, several rows

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// rms_norm(x) * w: the norm also read by a later ADD, and both returned.
std::vector<double> rms_rows(const std::vector<float> &x) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double s = 0;
    for (int64_t k = 0; k < kRow; ++k) s += double(x[r * kRow + k]) * x[r * kRow + k];
    const double inv = 1.0 / std::sqrt(s / kRow + 1e-5);
    for (int64_t k = 0; k < kRow; ++k) y[r * kRow + k] = x[r * kRow + k] * inv;
  }
  return y;
}

class OpenclFusion : public ::testing::Test {
 protected:
  void SetUp() override {
    specs = device_specs();
    if (specs.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
  }
  // Runs |build| fused and unfused: outputs bit-equal, and the log names
  // |pair| as fused (when |fuses|).
  std::vector<std::vector<float>> both(builder build, const std::vector<std::vector<float>> &values, const char *pair,
                                       bool fuses = true) {
    log_lines log;
    const run_result fused = run_on(specs[0], build, values);
    const bool seen = log.has(std::string("fused ") + pair);
    EXPECT_EQ(seen, fuses) << pair;
    const run_result plain = run_on(specs[0] + ",fuse=false", build, values);
    EXPECT_TRUE(fused.ok && plain.ok);
    EXPECT_EQ(fused.outputs, plain.outputs) << "fused and unfused differ";
    return fused.outputs;
  }
  std::vector<std::string> specs;
};

TEST_F(OpenclFusion, RmsNormThenMulByARowOrASameShapeWeight) {
  for (bool row : {true, false}) {
    SCOPED_TRACE(row ? "row weight" : "same-shape weight");
    static bool s_row;
    s_row = row;
    const auto x = random_values(kRow * kRows, 1), w = random_values(row ? kRow : kRow * kRows, 2),
               c = random_values(kRow * kRows, 3);
    const auto out = both(
        [](bp_context *ctx, std::vector<bp_tensor *> *in) {
          bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, kRow, kRows);
          bp_tensor *w =
              s_row ? bp_tensor_new_1d(ctx, BP_TYPE_F32, kRow) : bp_tensor_new_2d(ctx, BP_TYPE_F32, kRow, kRows);
          bp_tensor *c = bp_tensor_new_2d(ctx, BP_TYPE_F32, kRow, kRows);
          *in = {x, w, c};
          bp_tensor *n = bp_rms_norm(ctx, x, 1e-5f);
          bp_tensor *m = bp_mul(ctx, n, w);
          // The norm is read again later: its result must have been written.
          return std::vector<bp_tensor *>{m, bp_add(ctx, n, c)};
        },
        {x, w, c}, "RMS_NORM+MUL");
    const auto y = rms_rows(x);
    std::vector<double> m(y.size()), a(y.size());
    for (size_t i = 0; i < y.size(); ++i) {
      m[i] = y[i] * w[row ? i % kRow : i];
      a[i] = y[i] + c[i];
    }
    expect_near(out[0], m, "norm * w");
    expect_near(out[1], a, "norm + c");
  }
}

TEST_F(OpenclFusion, SiluThenMulInBothOrdersAndAcrossTheUpProjection) {
  for (int form = 0; form < 3; ++form) {
    SCOPED_TRACE("form " + std::to_string(form));
    static int s_form;
    s_form = form;
    const auto x = random_values(kRow * kRows, 4), u = random_values(kRow * kRows, 5), w = random_values(kRow * 8, 6),
               h = random_values(8 * kRows, 7);
    const auto out = both(
        [](bp_context *ctx, std::vector<bp_tensor *> *in) {
          bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, kRow, kRows);
          bp_tensor *u = bp_tensor_new_2d(ctx, BP_TYPE_F32, kRow, kRows);
          bp_tensor *w = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, kRow);
          bp_tensor *h = bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, kRows);
          *in = {x, u, w, h};
          bp_tensor *s = bp_silu(ctx, x);
          // form 2: the other operand is a product listed between the two
          // (graph order: SILU, MUL_MAT, MUL), as in a SwiGLU layer.
          bp_tensor *other = s_form == 2 ? bp_mul_mat(ctx, w, h) : u;
          bp_tensor *m = s_form == 1 ? bp_mul(ctx, other, s) : bp_mul(ctx, s, other);
          return std::vector<bp_tensor *>{m, s};
        },
        {x, u, w, h}, "SILU+MUL");
    std::vector<double> other(u.begin(), u.end());
    if (form == 2)
      for (int64_t r = 0; r < kRows; ++r)
        for (int64_t i = 0; i < kRow; ++i) {
          double acc = 0;
          for (int64_t k = 0; k < 8; ++k) acc += double(w[i * 8 + k]) * h[r * 8 + k];
          other[r * kRow + i] = acc;
        }
    std::vector<double> m(x.size()), s(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      s[i] = silu(x[i]);
      m[i] = s[i] * other[i];
    }
    expect_near(out[0], m, "silu * other");
    expect_near(out[1], s, "silu, read by the caller");
  }
}

// MUL(norm, norm): no weight but the norm itself, which the fused kernel
// would read while other rows' work-items write it: runs unfused, right.
TEST_F(OpenclFusion, ANormMultipliedByItselfIsNotFusedAndStaysRight) {
  const auto x = random_values(kRow * kRows, 8);
  const auto out = both(
      [](bp_context *ctx, std::vector<bp_tensor *> *in) {
        bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, kRow, kRows);
        *in = {x};
        bp_tensor *n = bp_rms_norm(ctx, x, 1e-5f);
        return std::vector<bp_tensor *>{bp_mul(ctx, n, n)};
      },
      {x}, "RMS_NORM+MUL", false);
  const auto y = rms_rows(x);
  std::vector<double> m(y.size());
  for (size_t i = 0; i < y.size(); ++i) m[i] = y[i] * y[i];
  expect_near(out[0], m, "norm * norm");
}

}  // namespace
}  // namespace bp_opencl_test
