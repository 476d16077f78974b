// quant_reference_test.cpp: the conformance suite's own handling of the
// quantized types (tools/conformance/quant.*): its block reader against
// llama.cpp's golden data, and its tolerances: loose enough for a faithful
// backend (the reference quantizer, b quantized to 8 bits, f32
// accumulation), tight enough that mutated weights or bytes (nibbles swapped,
// a wrong scale) fail the comparison.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/splitmix64.hpp"
#include "conformance/conformance.hpp"
#include "conformance/quant.hpp"
#include "conformance/reference.hpp"

namespace conf = bp::conformance;

namespace {

const bp_type k_types[] = {BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K,
                           BP_TYPE_Q6_K, BP_TYPE_Q5_K, BP_TYPE_BF16};

std::string type_label(const ::testing::TestParamInfo<bp_type> &info) {
  std::string s = bp_type_name(info.param);
  s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

// Values per unit of a row: a block, or 32 for BF16 (blocks of one value),
// so b can be quantized in blocks of 32 on every type.
int64_t unit_of(bp_type t) { return bp_type_block_size(t) > 1 ? bp_type_block_size(t) : 32; }

std::vector<uint8_t> golden(const std::string &name) {
  std::ifstream f(std::string(BP_TEST_SOURCE_DIR) + "/data/quant/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> golden_floats(const std::string &name) {
  const std::vector<uint8_t> b = golden(name);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

std::vector<uint8_t> quantize(bp_type t, const std::vector<float> &x, int64_t row) {
  std::vector<uint8_t> q(bp_type_row_size(t, row) * (x.size() / static_cast<size_t>(row)));
  {
    size_t written = 0;
    EXPECT_EQ(bp_quantize_rows(t, x.data(), q.data(), static_cast<int64_t>(x.size()) / row, row, &written), BP_OK) << bp_last_error();
    EXPECT_EQ(written, q.size());
  }
  return q;
}

// Random test data: uniform, gaussian-like and with one large outlier per 32.
std::vector<float> random_values(uint64_t seed, int64_t n, int kind) {
  bp::tools::splitmix64 r{seed};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = r.uniform();
    if (kind == 1) x = (r.uniform() + r.uniform() + r.uniform()) * 0.5f;  // bell-shaped
    if (kind == 2 && i % 32 == 7) x *= 40.0f;                             // outliers
    if (kind == 3) x = 0.25f + 0.7f * std::fabs(x);                       // one-signed
    v[static_cast<size_t>(i)] = x;
  }
  return v;
}

// The bytes of |q| with the two nibbles (or halves) of each block's codes
// swapped, or its first scale doubled: what a kernel with the wrong layout
// or scale would read. For BF16: each value's two bytes swapped, or each
// value doubled.
enum class mutation { swap_nibbles, double_scale };
std::vector<uint8_t> mutate(bp_type t, std::vector<uint8_t> q, mutation m) {
  const size_t bs = bp_type_size(t);
  for (size_t b0 = 0; b0 < q.size(); b0 += bs) {
    uint8_t *blk = q.data() + b0;
    if (t == BP_TYPE_BF16) {
      uint16_t h = static_cast<uint16_t>(blk[0] | (blk[1] << 8));
      h = m == mutation::double_scale ? static_cast<uint16_t>(h + 0x0080) : static_cast<uint16_t>((h >> 8) | (h << 8));
      blk[0] = static_cast<uint8_t>(h);
      blk[1] = static_cast<uint8_t>(h >> 8);
      continue;
    }
    if (m == mutation::double_scale) {
      // f16 exponent + 1 (every scale here is a normal half).
      const size_t at = t == BP_TYPE_Q6_K ? 208 : 0;
      uint16_t h = static_cast<uint16_t>(blk[at] | (blk[at + 1] << 8));
      h = static_cast<uint16_t>(h + 0x0400);
      blk[at] = static_cast<uint8_t>(h);
      blk[at + 1] = static_cast<uint8_t>(h >> 8);
      continue;
    }
    size_t first = 0, count = 0;
    switch (t) {
      case BP_TYPE_Q8_0:
        for (int j = 0; j < 16; ++j) std::swap(blk[2 + j], blk[18 + j]);
        continue;
      case BP_TYPE_Q4_0:
        first = 2, count = 16;
        break;
      case BP_TYPE_Q5_0:
        first = 6, count = 16;
        break;
      case BP_TYPE_Q4_K:
        first = 16, count = 128;
        break;
      case BP_TYPE_Q5_K:
        first = 48, count = 128;
        break;
      case BP_TYPE_Q6_K:
        first = 0, count = 128;
        break;
      default:
        break;
    }
    for (size_t j = first; j < first + count; ++j) blk[j] = static_cast<uint8_t>((blk[j] >> 4) | (blk[j] << 4));
  }
  return q;
}

class QuantReference : public ::testing::TestWithParam<bp_type> {};

TEST_P(QuantReference, ReaderMatchesGoldenDequantization) {
  const bp_type t = GetParam();
  const std::vector<uint8_t> q = golden(std::string(bp_type_name(t)) + ".quant");
  const std::vector<float> want = golden_floats(std::string(bp_type_name(t)) + ".dequant.f32");
  ASSERT_EQ(want.size(), 4096u) << "tests/data/quant is missing";
  ASSERT_EQ(q.size(), bp_type_row_size(t, 4096));
  const std::vector<double> got = conf::dequantize_blocks(t, q.data(), 4096);
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = static_cast<float>(got[i]);
    ASSERT_EQ(std::memcmp(&g, &want[i], 4), 0) << "value " << i << ": " << got[i] << " vs " << want[i];
  }
}

// The reference quantizer, on data of every kind, stays inside the bound.
TEST_P(QuantReference, QuantizationBoundAdmitsTheReferenceQuantizer) {
  const bp_type t = GetParam();
  for (int kind = 0; kind < 4; ++kind) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const std::vector<float> x = random_values(seed * 7 + kind, 1024, kind);
      const std::vector<uint8_t> q = quantize(t, x, 1024);
      const std::vector<double> back = conf::dequantize_blocks(t, q.data(), 1024);
      const std::vector<double> xd(x.begin(), x.end());
      const std::vector<double> bound = conf::quantization_bound(t, xd.data(), 1024);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_LE(std::fabs(back[i] - xd[i]), bound[i]) << "seed " << seed << " value " << i;
    }
  }
  // The golden input too, but for its segments whose scale under- or
  // overflows f16 or that are denormal (no quantizer can stay near those).
  const std::vector<float> in = golden_floats("input.f32");
  const std::vector<uint8_t> q = quantize(t, in, 4096);
  const std::vector<double> back = conf::dequantize_blocks(t, q.data(), 4096);
  const std::vector<double> xd(in.begin(), in.end());
  const std::vector<double> bound = conf::quantization_bound(t, xd.data(), 4096);
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t segment = i / 256;
    if (segment == 7 || segment == 8 || segment == 15) continue;
    ASSERT_LE(std::fabs(back[i] - xd[i]), bound[i]) << "value " << i;
  }
}

// Each mutation leaves most values outside the bound.
TEST_P(QuantReference, QuantizationBoundCatchesWrongBytes) {
  const bp_type t = GetParam();
  const std::vector<float> x = random_values(99, 1024, 0);
  const std::vector<double> xd(x.begin(), x.end());
  const std::vector<double> bound = conf::quantization_bound(t, xd.data(), 1024);
  const std::vector<uint8_t> q = quantize(t, x, 1024);
  for (mutation m : {mutation::swap_nibbles, mutation::double_scale}) {
    const std::vector<uint8_t> bad = mutate(t, q, m);
    const std::vector<double> back = conf::dequantize_blocks(t, bad.data(), 1024);
    int outside = 0;
    for (size_t i = 0; i < x.size(); ++i) outside += std::fabs(back[i] - xd[i]) > bound[i];
    EXPECT_GT(outside, 1024 / 4) << (m == mutation::swap_nibbles ? "nibbles swapped" : "scale doubled");
  }
}

// MUL_MAT: a [K, M] of type t times b [K, N] f32.
struct mul_mat_setup {
  int64_t K, M, N;
  std::vector<double> w, b;
  std::vector<conf::host_input> in;
  conf::expected want;

  mul_mat_setup(bp_type t, int64_t blocks, const std::vector<uint8_t> *weights = nullptr)
      : K(unit_of(t) * blocks), M(9), N(5) {
    std::vector<uint8_t> q = weights ? *weights : quantize(t, random_values(11, K * M, 0), K);
    w = conf::dequantize_blocks(t, q.data(), K * M);
    const std::vector<float> bf = random_values(12, K * N, 0);
    b.assign(bf.begin(), bf.end());
    in.resize(2);
    set(in[0], t, w, M);
    set(in[1], BP_TYPE_F32, b, N);
    want = conf::ref::mul_mat_quant()(in, conf::op_args{});
  }
  void set(conf::host_input &h, bp_type type, const std::vector<double> &v, int64_t rows) const {
    h.type = type;
    h.leaf = &v;
    h.leaf_ne[0] = h.layout.ne[0] = K;
    h.leaf_ne[1] = h.layout.ne[1] = rows;
    h.layout.stride[0] = 1;
    h.layout.stride[1] = h.layout.stride[2] = h.layout.stride[3] = K;
  }
  // y = W b with weights |wv|, as a backend would: b in 8 bits per |blck|
  // with an f16 scale amax / 127, products and sums in f32.
  std::vector<double> simulate(const std::vector<double> &wv, int64_t blck) const {
    std::vector<double> y;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        float acc = 0;
        for (int64_t b0 = 0; b0 < K; b0 += blck) {
          float amax = 0;
          for (int64_t k = b0; k < b0 + blck; ++k) amax = std::fmax(amax, std::fabs(static_cast<float>(b[n * K + k])));
          const float d = bp_fp16_to_fp32(bp_fp32_to_fp16(amax / 127.0f));
          float block_sum = 0;
          for (int64_t k = b0; k < b0 + blck; ++k) {
            const float qb = d != 0 ? std::nearbyint(static_cast<float>(b[n * K + k]) / d) : 0.0f;
            block_sum += static_cast<float>(wv[m * K + k]) * qb;
          }
          acc += block_sum * d;
        }
        y.push_back(acc);
      }
    return y;
  }
};

TEST_P(QuantReference, MulMatBoundAdmitsEightBitActivations) {
  const bp_type t = GetParam();
  for (int64_t blocks : {1, 2, 7}) {
    const mul_mat_setup s(t, blocks);
    for (int64_t blck : {int64_t(32), bp_type_block_size(t)}) {
      const conf::comparison c = conf::compare_elementwise(s.simulate(s.w, blck), s.want, nullptr);
      EXPECT_TRUE(c.ok) << blocks << " blocks, b in blocks of " << blck << ": " << c.message;
    }
    // Exact products in f32, no quantization of b, pass as well.
    std::vector<double> exact;
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t m = 0; m < s.M; ++m) {
        float acc = 0;
        for (int64_t k = 0; k < s.K; ++k)
          acc += static_cast<float>(s.w[m * s.K + k]) * static_cast<float>(s.b[n * s.K + k]);
        exact.push_back(acc);
      }
    EXPECT_TRUE(conf::compare_elementwise(exact, s.want, nullptr).ok);
  }
}

TEST_P(QuantReference, MulMatBoundCatchesWrongWeights) {
  const bp_type t = GetParam();
  for (int64_t blocks : {1, 2, 7}) {
    const mul_mat_setup s(t, blocks);
    const std::vector<uint8_t> q = quantize(t, random_values(11, s.K * s.M, 0), s.K);
    for (mutation m : {mutation::swap_nibbles, mutation::double_scale}) {
      const std::vector<uint8_t> bad = mutate(t, q, m);
      const std::vector<double> wrong_w = conf::dequantize_blocks(t, bad.data(), s.K * s.M);
      const conf::comparison c = conf::compare_elementwise(s.simulate(wrong_w, 32), s.want, nullptr);
      EXPECT_FALSE(c.ok) << blocks << " blocks, "
                         << (m == mutation::swap_nibbles ? "nibbles swapped" : "scale doubled");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantReference, ::testing::ValuesIn(k_types), type_label);

TEST(QuantCases, EveryTypeHasEachOpAndTheFeatureTag) {
  int per_type[BP_TYPE_COUNT] = {};
  for (const conf::case_desc &c : conf::conformance_cases({"MUL_MAT", "GET_ROWS", "CPY", "CONT"})) {
    bool quant = false;
    for (const conf::input_spec &in : c.inputs) quant = quant || bp_type_is_quantized(in.type);
    quant = quant || bp_type_is_quantized(c.args.type);
    EXPECT_EQ(quant, c.feature == "quant") << c.name;
    for (const conf::input_spec &in : c.inputs)
      if (bp_type_is_quantized(in.type)) ++per_type[in.type];
  }
  for (bp_type t : k_types) EXPECT_GE(per_type[t], 15) << bp_type_name(t);
}

}  // namespace
