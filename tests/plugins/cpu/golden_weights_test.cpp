// golden_weights_test.cpp: the cpu plugin's MUL_MAT and GET_ROWS on
// llama.cpp's own weight bytes (tests/data/quant/<type>.quant, 4,096 values
// as 16 rows of 256) against the golden dequantized values
// (<type>.dequant.f32) in double. GET_ROWS must give the golden floats bit
// for bit; MUL_MAT must stay within docs/ops.md's bound for the type: b
// quantized to 8 bits per block of 32 for the block types, b used as it is
// for BF16, f32 sums either way. Rows whose golden values are not finite
// (a scale past f16's range) are left out of the product.
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include "cpu_harness.hpp"

using namespace cpu_test;

namespace {

constexpr int64_t kRows = 16, kK = 256;

std::vector<uint8_t> golden(const std::string &name) {
  std::ifstream f(std::string(BP_TEST_SOURCE_DIR) + "/data/quant/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// A tensor [kK, kRows] of |type| holding the golden bytes (dense rows).
bp_tensor *golden_weights(tensor_pool &pool, bp_type type, std::vector<float> *values) {
  const std::vector<uint8_t> bytes = golden(std::string(bp_type_name(type)) + ".quant");
  const std::vector<uint8_t> deq = golden(std::string(bp_type_name(type)) + ".dequant.f32");
  EXPECT_EQ(bytes.size(), bp_type_row_size(type, kK * kRows)) << "tests/data/quant is missing " << bp_type_name(type);
  EXPECT_EQ(deq.size(), static_cast<size_t>(kK * kRows) * 4);
  if (bytes.size() != bp_type_row_size(type, kK * kRows) || deq.size() != static_cast<size_t>(kK * kRows) * 4)
    return nullptr;
  bp_tensor *a = pool.make(type, {kK, kRows});  // over-allocates: strides as if per element
  a->nb[0] = bp_type_size(type);
  a->nb[1] = bp_type_row_size(type, kK);
  a->nb[2] = a->nb[3] = a->nb[1] * kRows;
  std::memcpy(a->data, bytes.data(), bytes.size());
  values->resize(static_cast<size_t>(kK * kRows));
  std::memcpy(values->data(), deq.data(), deq.size());
  return a;
}

// docs/ops.md, "Quantized types: tolerances": y = sum_k w_k b_k with b in
// 8 bits per block of |blck| (for BF16: b as it is, blck 0).
double mul_mat_bound(const float *w, const bp_tensor *b, int64_t n, int64_t blck, double ref) {
  double quant = 0, magnitude = 0;
  for (int64_t k0 = 0; k0 < kK; k0 += blck ? blck : kK) {
    const int64_t len = blck ? blck : kK;
    double amax = 0, sum_w = 0;
    for (int64_t k = k0; k < k0 + len; ++k) amax = std::max(amax, std::fabs(get(b, k, n)));
    const double d = blck ? amax / 127 : 0;
    for (int64_t k = k0; k < k0 + len; ++k) {
      sum_w += std::fabs(w[k]);
      magnitude += std::fabs(w[k]) * (std::fabs(get(b, k, n)) + d);
    }
    quant += 9.0 / 16 * d * sum_w;
  }
  return quant + 2.0 * (kK + 1) * 0x1p-24 * magnitude + 0x1p-24 * std::fabs(ref);
}

class CpuGoldenWeights : public ::testing::TestWithParam<bp_type> {};

TEST_P(CpuGoldenWeights, GetRowsGivesTheGoldenFloats) {
  const bp_type type = GetParam();
  loaded_plugin p{2};
  ASSERT_TRUE(p.ok());
  tensor_pool pool;
  std::vector<float> want;
  bp_tensor *a = golden_weights(pool, type, &want);
  ASSERT_NE(a, nullptr);
  bp_tensor *ids = pool.make(BP_TYPE_I32, {kRows});
  for (int32_t i = 0; i < kRows; ++i) std::memcpy(static_cast<char *>(ids->data) + 4 * i, &i, 4);
  bp_tensor *out = pool.node(BP_OP_GET_ROWS, BP_TYPE_F32, {kK, kRows}, {a, ids});
  ASSERT_TRUE(p.supports(out));
  bp_error err{};
  ASSERT_EQ(p.compute({out}, &err), BP_OK) << err.message;
  EXPECT_EQ(std::memcmp(out->data, want.data(), want.size() * 4), 0);
}

TEST_P(CpuGoldenWeights, MulMatWithinTheBoundOfTheGoldenValues) {
  const bp_type type = GetParam();
  loaded_plugin p{3};
  ASSERT_TRUE(p.ok());
  std::mt19937 rng{41};
  tensor_pool pool;
  std::vector<float> w;
  bp_tensor *a = golden_weights(pool, type, &w);
  ASSERT_NE(a, nullptr);
  const int64_t N = 5;
  bp_tensor *b = pool.make(BP_TYPE_F32, {kK, N});
  fill(b, rng);
  bp_tensor *out = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {kRows, N}, {a, b});
  ASSERT_TRUE(p.supports(out));
  bp_error err{};
  ASSERT_EQ(p.compute({out}, &err), BP_OK) << err.message;
  const int64_t blck = type == BP_TYPE_BF16 ? 0 : 32;
  int checked = 0;
  for (int64_t m = 0; m < kRows; ++m) {
    const float *wr = w.data() + m * kK;
    bool finite = true;
    for (int64_t k = 0; k < kK; ++k) finite = finite && std::isfinite(wr[k]);
    if (!finite) continue;
    ++checked;
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < kK; ++k) ref += static_cast<double>(wr[k]) * get(b, k, n);
      EXPECT_NEAR(get(out, m, n), ref, mul_mat_bound(wr, b, n, blck, ref)) << "row " << m << " column " << n;
    }
  }
  EXPECT_GE(checked, kRows - 1);
}

INSTANTIATE_TEST_SUITE_P(Types, CpuGoldenWeights,
                         ::testing::Values(BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                           BP_TYPE_Q5_K, BP_TYPE_BF16, BP_TYPE_Q4_1, BP_TYPE_Q5_1, BP_TYPE_Q2_K,
                                           BP_TYPE_Q3_K, BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS, BP_TYPE_MXFP4),
                         [](const ::testing::TestParamInfo<bp_type> &info) {
                           std::string s = bp_type_name(info.param);
                           for (char &c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                           return s;
                         });

}  // namespace
