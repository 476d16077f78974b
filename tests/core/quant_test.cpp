// quant_test.cpp: bp_quantize_rows and bp_dequantize against golden data written
// by llama.cpp's reference quantizers (tests/data/quant): the bytes must be
// equal, for the whole input as one row and cut into rows of every
// power-of-two length, and dequantization must be bit-exact.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace {

constexpr int64_t k_n = 4096;

std::vector<uint8_t> read_file(const std::string &name) {
  std::ifstream f(std::string(BP_TEST_SOURCE_DIR) + "/data/quant/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> read_floats(const std::string &name) {
  const std::vector<uint8_t> bytes = read_file(name);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class QuantGolden : public ::testing::TestWithParam<bp_type> {
 protected:
  void SetUp() override {
    input = read_floats("input.f32");
    ASSERT_EQ(input.size(), static_cast<size_t>(k_n)) << "tests/data/quant/input.f32 is missing";
    golden = read_file(std::string(bp_type_name(GetParam())) + ".quant");
    ASSERT_EQ(golden.size(), bp_type_row_size(GetParam(), k_n));
  }
  std::vector<float> input;
  std::vector<uint8_t> golden;
};

// The index of the first differing block, or -1.
int64_t first_bad_block(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want, size_t block_bytes) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) return static_cast<int64_t>(i / block_bytes);
  }
  return -1;
}

TEST_P(QuantGolden, OneRowIsByteExact) {
  const bp_type t = GetParam();
  std::vector<uint8_t> out(golden.size(), 0xa5);
  {
    size_t written = 0;
    EXPECT_EQ(bp_quantize_rows(t, input.data(), out.data(), 1, k_n, &written), BP_OK) << bp_last_error();
    EXPECT_EQ(written, golden.size());
  }
  EXPECT_EQ(bp_last_status(), BP_OK);
  const int64_t bad = first_bad_block(out, golden, bp_type_size(t));
  EXPECT_EQ(bad, -1) << "block " << bad << " (values from " << bad * bp_type_block_size(t)
                     << ") differs; see tests/data/quant/segments.txt";
}

TEST_P(QuantGolden, RowsOfEveryLengthGiveTheSameBytes) {
  const bp_type t = GetParam();
  for (int64_t row = bp_type_block_size(t); row <= k_n; row *= 2) {
    SCOPED_TRACE("rows of " + std::to_string(row));
    std::vector<uint8_t> out(golden.size(), 0x5a);
    {
      size_t written = 0;
      EXPECT_EQ(bp_quantize_rows(t, input.data(), out.data(), k_n / row, row, &written), BP_OK) << bp_last_error();
      EXPECT_EQ(written, golden.size());
    }
    EXPECT_EQ(first_bad_block(out, golden, bp_type_size(t)), -1);
  }
}

TEST_P(QuantGolden, DequantizeIsBitExact) {
  const bp_type t = GetParam();
  const std::vector<float> want = read_floats(std::string(bp_type_name(t)) + ".dequant.f32");
  ASSERT_EQ(want.size(), static_cast<size_t>(k_n));
  std::vector<float> got(k_n, -1.0f);
  ASSERT_EQ(bp_dequantize(t, golden.data(), got.data(), k_n), BP_OK) << bp_last_error();
  for (int64_t i = 0; i < k_n; ++i) {
    uint32_t g, w;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    ASSERT_EQ(g, w) << "value " << i << ": " << got[i] << " vs " << want[i];
  }
}

// The largest and the mean error of one round trip of uniform(-1, 1)
// values: about one step of the format's grid (2 / (levels - 1)) at most.
// MXFP4's scale is a power of two picked so that the largest value lands
// below the top code (6 x 2^floor(log2 max) / 4): values near 1 are cut to
// 0.75.
struct round_trip_bound {
  float max_err;
  double mean_err;
};
round_trip_bound bound_of(bp_type t) {
  switch (t) {
    case BP_TYPE_Q2_K:
      return {0.45f, 0.15};
    case BP_TYPE_Q3_K:
      return {0.25f, 0.08};
    case BP_TYPE_MXFP4:
      return {0.26f, 0.06};
    default:
      return {0.15f, 0.05};
  }
}

// Quantizing what was dequantized is not the identity for the searching
// K-quants, but dequantized values stay within each format's step of the
// input: a coarse guard that the layouts agree between the two directions.
TEST_P(QuantGolden, RoundTripStaysNearTheInput) {
  const bp_type t = GetParam();
  std::vector<uint8_t> q(golden.size());
  ASSERT_EQ(bp_quantize_rows(t, input.data(), q.data(), 1, k_n, nullptr), BP_OK) << bp_last_error();
  std::vector<float> back(k_n);
  ASSERT_EQ(bp_dequantize(t, q.data(), back.data(), k_n), BP_OK);
  // Segment 0 is uniform(-1, 1).
  const round_trip_bound bound = bound_of(t);
  double sum_err = 0;
  for (int i = 0; i < 256; ++i) {
    EXPECT_LT(std::abs(back[i] - input[i]), bound.max_err) << "value " << i;
    sum_err += std::abs(back[i] - input[i]);
  }
  EXPECT_LT(sum_err / 256, bound.mean_err);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantGolden,
                         ::testing::Values(BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                           BP_TYPE_Q5_K, BP_TYPE_BF16, BP_TYPE_Q4_1, BP_TYPE_Q5_1, BP_TYPE_Q2_K,
                                           BP_TYPE_Q3_K, BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS, BP_TYPE_MXFP4),
                         [](const ::testing::TestParamInfo<bp_type> &info) {
                           std::string s = bp_type_name(info.param);
                           s[0] = static_cast<char>(std::toupper(s[0]));
                           return s;
                         });

TEST(Quantize, F32CopiesAndF16Converts) {
  const float x[4] = {1.0f, -2.5f, 65504.0f, 1e-8f};
  float y[4];
  {
    size_t written = 0;
    EXPECT_EQ(bp_quantize_rows(BP_TYPE_F32, x, y, 2, 2, &written), BP_OK) << bp_last_error();
    EXPECT_EQ(written, 16u);
  }
  EXPECT_EQ(std::memcmp(x, y, 16), 0);
  uint16_t h[4];
  {
    size_t written = 0;
    EXPECT_EQ(bp_quantize_rows(BP_TYPE_F16, x, h, 1, 4, &written), BP_OK) << bp_last_error();
    EXPECT_EQ(written, 8u);
  }
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[2], 0x7bff);
  ASSERT_EQ(bp_dequantize(BP_TYPE_F16, h, y, 4), BP_OK);
  EXPECT_EQ(y[1], -2.5f);
}

TEST(Quantize, BadArgumentsNameTheFix) {
  float x[64] = {};
  uint8_t out[64 * 4];
  EXPECT_NE(bp_quantize_rows(BP_TYPE_Q4_K, x, out, 1, 64, nullptr), BP_OK);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("q4_K holds whole blocks of 256 values"), std::string::npos)
      << bp_last_error();
  EXPECT_NE(bp_quantize_rows(BP_TYPE_Q8_0, x, out, 0, 32, nullptr), BP_OK);
  EXPECT_NE(std::string(bp_last_error()).find("n_rows = 0"), std::string::npos) << bp_last_error();
  EXPECT_NE(bp_quantize_rows(BP_TYPE_Q8_0, nullptr, out, 1, 32, nullptr), BP_OK);
  EXPECT_NE(std::string(bp_last_error()).find("src is NULL"), std::string::npos);
  EXPECT_NE(bp_quantize_rows(BP_TYPE_I32, x, out, 1, 32, nullptr), BP_OK);
  EXPECT_NE(std::string(bp_last_error()).find("i32 holds integers"), std::string::npos);
  EXPECT_NE(bp_quantize_rows(static_cast<bp_type>(99), x, out, 1, 32, nullptr), BP_OK);
  EXPECT_NE(std::string(bp_last_error()).find("unknown type 99"), std::string::npos);
  float y[64];
  EXPECT_EQ(bp_dequantize(BP_TYPE_Q5_0, out, y, 33), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("n = 33"), std::string::npos);
  // A success clears the error.
  {
    size_t written = 0;
    EXPECT_EQ(bp_quantize_rows(BP_TYPE_Q8_0, x, out, 2, 32, &written), BP_OK) << bp_last_error();
    EXPECT_EQ(written, 68u);
  }
  EXPECT_STREQ(bp_last_error(), "");
}

// NaN and infinite inputs give unspecified bytes but a normal return, in
// every block type (the sanitizer builds check there is no undefined
// conversion on the way).
TEST(Quantize, NonFiniteInputsDoNotFail) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (bp_type t : {BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16}) {
    SCOPED_TRACE(bp_type_name(t));
    std::vector<float> x(256, 0.5f);
    x[3] = inf;
    x[40] = -inf;
    x[77] = nan;
    std::vector<uint8_t> q(bp_type_row_size(t, 256));
    {
      size_t written = 0;
      EXPECT_EQ(bp_quantize_rows(t, x.data(), q.data(), 1, 256, &written), BP_OK) << bp_last_error();
      EXPECT_EQ(written, q.size());
    }
    std::vector<float> y(256);
    EXPECT_EQ(bp_dequantize(t, q.data(), y.data(), 256), BP_OK);
  }
}

// All-zero and constant blocks: the scale of a zero block is +0 and every
// code decodes to 0; a constant block decodes to the constant within f16.
TEST(Quantize, ZeroBlocksDecodeToZero) {
  for (bp_type t : {BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16}) {
    SCOPED_TRACE(bp_type_name(t));
    std::vector<float> x(256, 0.0f), y(256, 1.0f);
    std::vector<uint8_t> q(bp_type_row_size(t, 256));
    {
      size_t written = 0;
      ASSERT_EQ(bp_quantize_rows(t, x.data(), q.data(), 1, 256, &written), BP_OK) << bp_last_error();
      ASSERT_EQ(written, q.size());
    }
    ASSERT_EQ(bp_dequantize(t, q.data(), y.data(), 256), BP_OK);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

// BF16 by hand, from the bit patterns: the top 16 bits of the f32 rounded
// to nearest even on the 16 dropped; NaN stays NaN (made quiet, sign kept),
// infinities and values that round past the largest bf16 become infinity.
TEST(Quantize, Bf16RoundsToNearestEvenAndKeepsNaN) {
  struct row {
    uint32_t in;
    uint16_t out;
  };
  const row rows[] = {
      {0x3f800000u, 0x3f80},  // 1
      {0x3f808000u, 0x3f80},  // half way, even below: down
      {0x3f818000u, 0x3f82},  // half way, odd below: up
      {0x3f808001u, 0x3f81},  // just past half: up
      {0x3f807fffu, 0x3f80},  // just below half: down
      {0xbf818000u, 0xbf82},  // negative ties the same way
      {0x7f7fffffu, 0x7f80},  // the largest f32 rounds to infinity
      {0x7f800000u, 0x7f80},  // +inf
      {0xff800000u, 0xff80},  // -inf
      {0x7fc00000u, 0x7fc0},  // quiet NaN
      {0x7f800001u, 0x7fc0},  // signalling NaN, payload in the low bits only: quiet, not inf
      {0xff800001u, 0xffc0},  // ... with its sign
      {0x7fa00000u, 0x7fe0},  // signalling NaN with high payload: quiet bit set, payload kept
      {0x00000001u, 0x0000},  // the smallest denormal rounds to zero
      {0x00018000u, 0x0002},  // denormals round like the rest
      {0x80000000u, 0x8000},  // -0
  };
  for (const row &r : rows) {
    float x;
    std::memcpy(&x, &r.in, 4);
    uint16_t h = 0x1234;
    {
      size_t written = 0;
      ASSERT_EQ(bp_quantize_rows(BP_TYPE_BF16, &x, &h, 1, 1, &written), BP_OK) << bp_last_error();
      ASSERT_EQ(written, 2u);
    }
    EXPECT_EQ(h, r.out) << std::hex << "input 0x" << r.in;
    float back;
    ASSERT_EQ(bp_dequantize(BP_TYPE_BF16, &h, &back, 1), BP_OK);
    uint32_t bits;
    std::memcpy(&bits, &back, 4);
    EXPECT_EQ(bits, static_cast<uint32_t>(r.out) << 16);
  }
}

}  // namespace
