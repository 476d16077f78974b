// quant_harness.hpp: the quantized-weight helpers the cpu plugin's tests
// share: this file's own decoder of the GGUF block layouts (in double),
// random blocks, b whose blocks quantize to int8 exactly, one MUL_MAT run and
// its check against the decoded weights in double.
#ifndef BP_TESTS_PLUGINS_CPU_QUANT_HARNESS_HPP_
#define BP_TESTS_PLUGINS_CPU_QUANT_HARNESS_HPP_

#include <cmath>
#include <cstdint>

#include "backplane/backplane.h"
#include "cpu_harness.hpp"

namespace cpu_test {

struct qt {
  bp_type type;
  int block;  // values per block
  int bytes;  // bytes per block
};
inline const qt kTypes[] = {{BP_TYPE_Q8_0, 32, 34},   {BP_TYPE_Q4_0, 32, 18},   {BP_TYPE_Q5_0, 32, 22},
                            {BP_TYPE_Q4_K, 256, 144}, {BP_TYPE_Q6_K, 256, 210}, {BP_TYPE_Q5_K, 256, 176},
                            {BP_TYPE_Q4_1, 32, 20},   {BP_TYPE_Q5_1, 32, 24},   {BP_TYPE_Q2_K, 256, 84},
                            {BP_TYPE_Q3_K, 256, 110}, {BP_TYPE_IQ4_NL, 32, 18}, {BP_TYPE_IQ4_XS, 256, 136},
                            {BP_TYPE_MXFP4, 32, 17}};

inline double h2d(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bp_fp16_to_fp32(h);
}

// The test's own decoder: block |b| of type |t| into 32 or 256 doubles.
// The types added later go through the core's reference dequantizer, which
// tests/core/quant_test.cpp checks bit for bit against llama.cpp's.
inline void decode_block(bp_type t, const uint8_t *b, double *y) {
  switch (t) {
    case BP_TYPE_Q8_0:
      for (int i = 0; i < 32; ++i) y[i] = h2d(b) * static_cast<int8_t>(b[2 + i]);
      break;
    case BP_TYPE_Q4_0:
      for (int i = 0; i < 32; ++i) y[i] = h2d(b) * (((i < 16 ? b[2 + i] : b[2 + i - 16] >> 4) & 15) - 8);
      break;
    case BP_TYPE_Q5_0: {
      uint32_t qh;
      std::memcpy(&qh, b + 2, 4);
      for (int i = 0; i < 32; ++i) {
        const int nib = (i < 16 ? b[6 + i] : b[6 + i - 16] >> 4) & 15;
        y[i] = h2d(b) * ((nib | static_cast<int>(((qh >> i) & 1) << 4)) - 16);
      }
      break;
    }
    case BP_TYPE_Q4_K:
    case BP_TYPE_Q5_K: {
      const uint8_t *s = b + 4;
      const int qs_at = t == BP_TYPE_Q4_K ? 16 : 48;
      for (int i = 0; i < 256; ++i) {
        const int j = i / 32;  // sub-block
        int sc, m;
        if (j < 4) {
          sc = s[j] & 63;
          m = s[j + 4] & 63;
        } else {
          sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
          m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
        const uint8_t byte = b[qs_at + 32 * (j / 2) + i % 32];
        int q = j % 2 ? byte >> 4 : byte & 15;
        if (t == BP_TYPE_Q5_K) q += ((b[16 + i % 32] >> j) & 1) * 16;  // bit j of qh[i % 32]
        y[i] = h2d(b) * sc * q - h2d(b + 2) * m;
      }
      break;
    }
    case BP_TYPE_Q6_K:
      for (int i = 0; i < 256; ++i) {
        const int half = i / 128, l = i % 128;
        const uint8_t lo = b[64 * half + l % 64];
        const int low4 = l < 64 ? lo & 15 : lo >> 4;
        const int top2 = (b[128 + 32 * half + l % 32] >> (2 * (l / 32))) & 3;
        y[i] = h2d(b + 208) * static_cast<int8_t>(b[192 + i / 16]) * ((low4 | (top2 << 4)) - 32);
      }
      break;
    default: {
      float f[256];
      const int64_t n = bp_type_block_size(t);
      if (bp_dequantize(t, b, f, n) != BP_OK) {
        ADD_FAILURE() << bp_last_error();
        return;
      }
      for (int64_t i = 0; i < n; ++i) y[i] = f[i];
      break;
    }
  }
}

// A [K, rows, ...] tensor of |t| with block strides.
inline bp_tensor *make_q(tensor_pool &pool, const qt &t, std::vector<int64_t> ne) {
  bp_tensor *x = pool.make(t.type, ne);  // over-allocates: strides as if per element
  x->nb[0] = static_cast<size_t>(t.bytes);
  x->nb[1] = x->nb[0] * static_cast<size_t>(x->ne[0] / t.block);
  for (int i = 2; i < 4; ++i) x->nb[i] = x->nb[i - 1] * static_cast<size_t>(x->ne[i - 1]);
  return x;
}

inline void put_half(uint8_t *p, float v) {
  const uint16_t h = bp_fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Random blocks: random quant bits, scales in [0.005, 0.05] (Q6_K's int8
// scales and Q4_K's and Q5_K's 6-bit ones stay random).
inline void fill_q(const bp_tensor *x, const qt &t, std::mt19937 &rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.005f, 0.05f);
  const int64_t blocks = bp_tensor_nelements(x) / t.block;
  auto *p = static_cast<uint8_t *>(x->data);
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t *b = p + i * t.bytes;
    for (int k = 0; k < t.bytes; ++k) b[k] = static_cast<uint8_t>(byte(rng));
    switch (t.type) {
      case BP_TYPE_Q6_K:
        put_half(b + 208, scale(rng));
        break;
      case BP_TYPE_Q2_K:
        put_half(b + 80, scale(rng));
        put_half(b + 82, scale(rng));
        break;
      case BP_TYPE_Q3_K:
        put_half(b + 108, scale(rng));
        break;
      case BP_TYPE_MXFP4:  // an E8M0 exponent: scales 2^-10 .. 2^-4
        b[0] = static_cast<uint8_t>(118 + byte(rng) % 7);
        break;
      default:
        put_half(b, scale(rng));
        if (t.type == BP_TYPE_Q4_K || t.type == BP_TYPE_Q5_K || t.type == BP_TYPE_Q4_1 || t.type == BP_TYPE_Q5_1)
          put_half(b + 2, scale(rng));
        break;
    }
  }
}

// Row |r| of quantized |x| (dense) decoded.
inline std::vector<double> decode_row(const bp_tensor *x, const qt &t, int64_t r, int64_t i2 = 0) {
  std::vector<double> y(static_cast<size_t>(x->ne[0]));
  const auto *row = static_cast<const uint8_t *>(x->data) + r * x->nb[1] + i2 * x->nb[2];
  for (int64_t k = 0; k < x->ne[0] / t.block; ++k) decode_block(t.type, row + k * t.bytes, y.data() + k * t.block);
  return y;
}

// b whose every block of 32 quantizes to int8 exactly: integers in
// [-127, 127] with one of magnitude 127, times a power of two.
// |span|: values that share one power-of-two scale (32, or 256 for the
// repacked K-quant products, whose b has one scale per super-block); every
// 32 of them hold a +-127, so b is exact in both of the cpu plugin's formats.
inline void fill_exact_b(const bp_tensor *b, std::mt19937 &rng, int64_t span = 32) {
  std::uniform_int_distribution<int> v(-127, 127), e(-8, 2), at(0, 31);
  for (int64_t n = 0; n < bp_tensor_nrows(b); ++n) {
    float s = 1.0f;
    for (int64_t k0 = 0; k0 < b->ne[0]; k0 += 32) {
      if (k0 % span == 0) s = std::ldexp(1.0f, e(rng));
      const int big = at(rng);
      for (int i = 0; i < 32; ++i) put(b, (i == big ? (v(rng) < 0 ? -127 : 127) : v(rng)) * s, k0 + i, n);
    }
  }
}

// The output of one MUL_MAT, copied out of the node.
struct product {
  std::vector<float> out;
  bool ok = false;
};

// MUL_MAT(a, b) on |p|'s backend (a failure is reported and ok stays false).
inline product compute_mul_mat(loaded_plugin &p, bp_tensor *a, bp_tensor *b, tensor_pool &pool) {
  product r;
  bp_tensor *out = pool.node(BP_OP_MUL_MAT, BP_TYPE_F32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b});
  if (!p.supports(out)) {
    ADD_FAILURE() << "MUL_MAT of " << bp_type_name(a->type) << " is not supported";
    return r;
  }
  bp_error err{};
  if (p.compute({out}, &err) != BP_OK) {
    ADD_FAILURE() << err.message;
    return r;
  }
  r.out.resize(static_cast<size_t>(bp_tensor_nelements(out)));
  std::memcpy(r.out.data(), out->data, r.out.size() * sizeof(float));
  r.ok = true;
  return r;
}

// |got| against a double-precision product of a's rows as this file decodes
// them (|a| dense, in the file's layout) and b [K, N, B2]: batch i2 uses a's
// i2 / (B2 / A2). Within 2e-6 of the sum of the products' magnitudes: with
// an integer-exact b (fill_exact_b) only the float scales and sums round.
// Reports the first output outside and stops.
inline void expect_matches_decoded(const product &got, const bp_tensor *a, const qt &t, const bp_tensor *b) {
  const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1], r2 = b->ne[2] / a->ne[2];
  for (int64_t i2 = 0; i2 < b->ne[2]; ++i2)
    for (int64_t m = 0; m < M; ++m) {
      const std::vector<double> w = decode_row(a, t, m, i2 / r2);
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          ref += w[k] * get(b, k, n, i2);
          mag += std::fabs(w[k] * get(b, k, n, i2));
        }
        const double y = got.out[static_cast<size_t>((i2 * N + n) * M + m)];
        if (!(std::fabs(y - ref) <= 2e-6 * mag + 1e-30)) {
          ADD_FAILURE() << "batch " << i2 << " m " << m << " n " << n << ": " << y << ", want " << ref << " within "
                        << 2e-6 * mag;
          return;
        }
      }
    }
}

}  // namespace cpu_test

#endif  // BP_TESTS_PLUGINS_CPU_QUANT_HARNESS_HPP_
