// matmul_fusion_test.cpp: a MUL_MAT and the next node in one launch on the
// opencl backend (ops_fusion.cpp, epilogue.h): ADD with the product on
// either side, MUL, SILU written over the product, ADD written over its
// operand, and a later reader of a fused product (served: the product is
// still stored, and the reader runs on its own); a broadcast ADD (a bias
// row) is not fused. Each kernel's epilogue: mul_mat_dot (f32 weights, many
// columns and one), mul_mv_q (block weights) and mul_mat_tiled
// (matmul=tiled). Results match a double-precision reference and are
// bit-equal to fuse=false; the debug log shows whether the pair fused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "opencl_harness.hpp"

namespace bp_opencl_test {
namespace {

enum class form {
  add_product_second,  // ADD(x, product)
  mul_product_first,   // MUL(product, x)
  silu_over_product,   // SILU(product), written over the product
  add_over_operand,    // ADD(product, x), written over x
  later_reader,        // ADD(product, x), then SUB(product, x) further on
  broadcast_add,       // ADD(product, row): not fused where N > 1
};

const char *form_name(form f) {
  switch (f) {
    case form::add_product_second:
      return "add_product_second";
    case form::mul_product_first:
      return "mul_product_first";
    case form::silu_over_product:
      return "silu_over_product";
    case form::add_over_operand:
      return "add_over_operand";
    case form::later_reader:
      return "later_reader";
    default:
      return "broadcast_add";
  }
}

struct product_case {
  bp_type type;
  int K, M, N;
  const char *params;  // added to the backend's spec
};

// The weights as the device sees them (block types decoded as bp_dequantize
// does) and their bytes.
struct weights {
  std::vector<float> values;
  std::vector<unsigned char> bytes;
};

weights make_weights(const product_case &c) {
  weights w;
  w.values = random_values(size_t(c.K) * c.M, 61);
  if (c.type == BP_TYPE_F32) {
    w.bytes.resize(w.values.size() * 4);
    std::memcpy(w.bytes.data(), w.values.data(), w.bytes.size());
    return w;
  }
  w.bytes.resize(bp_type_row_size(c.type, c.K) * c.M);
  size_t written = 0;
  EXPECT_EQ(bp_quantize_rows(c.type, w.values.data(), w.bytes.data(), c.M, c.K, &written), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_dequantize(c.type, w.bytes.data(), w.values.data(), int64_t(c.K) * c.M), BP_OK) << bp_last_error();
  return w;
}

struct run_outputs {
  std::vector<std::vector<float>> values;  // the form's outputs, in order
  bool fused = false;                      // the log named a MUL_MAT pair
};

// Builds |f| on a fresh backend (spec + params), places every tensor by
// hand (results written over the product or the operand share its bytes),
// runs it and reads the outputs back.
run_outputs run_form(const std::string &spec, const product_case &c, form f, const weights &w,
                     const std::vector<float> &vb, const std::vector<float> &vx, const std::vector<float> &vr) {
  run_outputs r;
  log_lines log;
  bp_backend *be = nullptr;
  if (bp_backend_new((spec + ",cache_dir=" + test_cache_dir()).c_str(), &be) != BP_OK) {
    ADD_FAILURE() << spec << ": " << bp_last_error();
    return r;
  }
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_new_2d(ctx, c.type, c.K, c.M);
  bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.K, c.N);
  bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.M, c.N);
  bp_tensor *row = bp_tensor_new_1d(ctx, BP_TYPE_F32, c.M);
  bp_tensor *mm = bp_mul_mat(ctx, a, b);
  std::vector<bp_tensor *> outs;
  bp_tensor *over = nullptr, *under = nullptr;  // |over| takes |under|'s bytes
  switch (f) {
    case form::add_product_second:
      outs = {bp_add(ctx, x, mm)};
      break;
    case form::mul_product_first:
      outs = {bp_mul(ctx, mm, x)};
      break;
    case form::silu_over_product:
      outs = {bp_silu(ctx, mm), mm};
      over = outs[0], under = mm;
      break;
    case form::add_over_operand:
      outs = {bp_add(ctx, mm, x)};
      over = outs[0], under = x;
      break;
    case form::later_reader:
      outs = {bp_add(ctx, mm, x), bp_sub(ctx, mm, x)};
      break;
    case form::broadcast_add:
      outs = {bp_add(ctx, mm, row)};
      break;
  }
  bp_graph *g = bp_graph_new(ctx, 0);
  for (bp_tensor *o : outs) EXPECT_EQ(bp_graph_build(g, o), BP_OK) << bp_last_error();
  bp_buffer_type *buft = bp_backend_buffer_type(be);
  const size_t align = bp_buffer_type_alignment(buft);
  std::vector<bp_tensor *> all = {a, b, x, row, mm};
  for (bp_tensor *o : outs)
    if (o != mm) all.push_back(o);
  size_t size = 0;
  for (bp_tensor *t : all) size += (bp_tensor_nbytes(t) + align - 1) / align * align;
  bp_buffer *buf = nullptr;
  EXPECT_EQ(bp_buffer_type_alloc(buft, size, &buf), BP_OK) << bp_last_error();
  size_t at = 0;
  std::vector<size_t> offsets;
  for (bp_tensor *t : all) {
    size_t place = at;
    if (t == over)
      for (size_t i = 0; i < offsets.size(); ++i)
        if (all[i] == under) place = offsets[i];
    EXPECT_EQ(bp_buffer_place_tensor(buf, t, place), BP_OK) << bp_last_error();
    offsets.push_back(place);
    if (place == at) at += (bp_tensor_nbytes(t) + align - 1) / align * align;
  }
  EXPECT_EQ(bp_tensor_set(a, w.bytes.data(), 0, w.bytes.size()), BP_OK);
  EXPECT_EQ(bp_tensor_set(b, vb.data(), 0, vb.size() * 4), BP_OK);
  EXPECT_EQ(bp_tensor_set(x, vx.data(), 0, vx.size() * 4), BP_OK);
  EXPECT_EQ(bp_tensor_set(row, vr.data(), 0, vr.size() * 4), BP_OK);
  EXPECT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  for (bp_tensor *o : outs) {
    std::vector<float> v(size_t(bp_tensor_nelements(o)));
    EXPECT_EQ(bp_tensor_get(o, v.data(), 0, v.size() * 4), BP_OK);
    r.values.push_back(v);
  }
  r.fused = log.has("fused MUL_MAT+");
  bp_graph_free(g);
  bp_buffer_free(buf);
  bp_context_free(ctx);
  bp_backend_free(be);
  return r;
}

class OpenclMulMatFusion : public ::testing::TestWithParam<product_case> {
 protected:
  void SetUp() override {
    specs = device_specs();
    if (specs.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
  }
  std::vector<std::string> specs;
};

TEST_P(OpenclMulMatFusion, ProductThenElementwiseMatchDoubleReference) {
  const product_case c = GetParam();
  const weights w = make_weights(c);
  const auto vb = random_values(size_t(c.K) * c.N, 62), vx = random_values(size_t(c.M) * c.N, 63),
             vr = random_values(c.M, 64);
  std::vector<double> p(size_t(c.M) * c.N);
  for (int n = 0; n < c.N; ++n)
    for (int m = 0; m < c.M; ++m) {
      double s = 0;
      for (int k = 0; k < c.K; ++k) s += double(w.values[size_t(m) * c.K + k]) * vb[size_t(n) * c.K + k];
      p[size_t(n) * c.M + m] = s;
    }
  const double tol = 1e-4 * std::sqrt(c.K);
  const std::string spec = specs[0] + (*c.params ? std::string(",") + c.params : "");
  for (form f : {form::add_product_second, form::mul_product_first, form::silu_over_product, form::add_over_operand,
                 form::later_reader, form::broadcast_add}) {
    SCOPED_TRACE(form_name(f));
    const run_outputs fused = run_form(spec, c, f, w, vb, vx, vr);
    const run_outputs plain = run_form(spec + ",fuse=false", c, f, w, vb, vx, vr);
    // At N = 1 the row is the product's own shape: no broadcast, fused.
    EXPECT_EQ(fused.fused, f != form::broadcast_add || c.N == 1);
    EXPECT_FALSE(plain.fused);
    EXPECT_EQ(fused.values, plain.values) << "fused and unfused differ";
    ASSERT_FALSE(fused.values.empty());
    for (size_t i = 0; i < p.size(); ++i) {
      const double x = vx[i], r = vr[i % c.M];
      const double want = f == form::mul_product_first   ? p[i] * x
                          : f == form::silu_over_product ? p[i] / (1 + std::exp(-p[i]))
                          : f == form::broadcast_add     ? p[i] + r
                                                         : p[i] + x;
      ASSERT_NEAR(fused.values[0][i], want, tol) << "element " << i;
      if (f == form::silu_over_product) {
        ASSERT_NEAR(fused.values[1][i], want, tol) << "the product's bytes, element " << i;
      }
      if (f == form::later_reader) {
        ASSERT_NEAR(fused.values[1][i], p[i] - x, tol) << "the later reader, element " << i;
      }
    }
  }
}

// mul_mat_dot (many columns, and one), mul_mv_q, mul_mat_tiled.
INSTANTIATE_TEST_SUITE_P(Kernels, OpenclMulMatFusion,
                         ::testing::Values(product_case{BP_TYPE_F32, 72, 40, 12, ""},
                                           product_case{BP_TYPE_F32, 260, 37, 1, ""},
                                           product_case{BP_TYPE_Q8_0, 96, 40, 3, ""},
                                           product_case{BP_TYPE_Q4_K, 512, 33, 2, ""},
                                           product_case{BP_TYPE_F32, 72, 70, 40, "matmul=tiled"},
                                           product_case{BP_TYPE_Q6_K, 256, 37, 9, "matmul=tiled"}),
                         [](const ::testing::TestParamInfo<product_case> &i) {
                           return std::string(bp_type_name(i.param.type)) + "_K" + std::to_string(i.param.K) + "_M" +
                                  std::to_string(i.param.M) + "_N" + std::to_string(i.param.N) +
                                  (*i.param.params ? "_tiled" : "");
                         });

}  // namespace
}  // namespace bp_opencl_test
