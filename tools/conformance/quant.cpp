// quant.cpp: see quant.hpp. The readers index each element straight from
// the layout description (which byte, which bits, which scale), where
// core/quant walks blocks in the order the bytes are written.
#include "conformance/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace bp::conformance {

namespace {

double half_at(const uint8_t *p) { return bp_fp16_to_fp32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// Element j (0..31) of a Q8_0, Q4_0 or Q5_0 block.
double block32_value(bp_type type, const uint8_t *blk, int j) {
  const double d = half_at(blk);
  if (type == BP_TYPE_Q8_0) return d * static_cast<int8_t>(blk[2 + j]);
  // Q4_0 / Q5_0: element j sits in byte j % 16 of qs, low nibble for the
  // first half of the block, high for the second.
  const uint8_t *qs = blk + (type == BP_TYPE_Q4_0 ? 2 : 6);
  int q = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  if (type == BP_TYPE_Q4_0) return d * (q - 8);
  const uint32_t qh = blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 | (uint32_t)blk[5] << 24;
  q |= static_cast<int>((qh >> j) & 1u) << 4;
  return d * (q - 16);
}

// The 6-bit scale and min of sub-block |sub| (0..7) from the 12 packed
// bytes |s| that Q4_K and Q5_K share: sub-blocks 0..3 in the low 6 bits of
// bytes 0..7, 4..7 split between the nibbles of bytes 8..11 and the top two
// bits of bytes 0..7.
void k_scale_min(const uint8_t *s, int sub, int *sc, int *m) {
  if (sub < 4) {
    *sc = s[sub] & 0x3f;
    *m = s[sub + 4] & 0x3f;
  } else {
    *sc = (s[sub + 4] & 0x0f) | ((s[sub - 4] >> 6) << 4);
    *m = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
  }
}

// Element j (0..255) of a Q4_K super-block: 8 sub-blocks of 32 with 6-bit
// scale and min; the qs bytes hold sub-blocks 2c and 2c+1 of chunk c (64
// values) in the low and high nibbles of the same 32 bytes.
double q4_k_value(const uint8_t *blk, int j) {
  const double d = half_at(blk), dmin = half_at(blk + 2);
  const int sub = j / 32;
  int sc, m;
  k_scale_min(blk + 4, sub, &sc, &m);
  const int chunk = j / 64, within = j % 64;
  const uint8_t byte = blk[16 + 32 * chunk + within % 32];
  const int q = within < 32 ? (byte & 0x0f) : (byte >> 4);
  return d * sc * q - dmin * m;
}

// Element j (0..255) of a Q5_K super-block: Q4_K's scales and mins (same
// bytes 0..15), the low 4 bits from qs (at byte 48) as Q4_K's nibbles, and
// bit 4 from bit s of qh[j % 32] (at byte 16), s = j / 32 the sub-block.
double q5_k_value(const uint8_t *blk, int j) {
  const double d = half_at(blk), dmin = half_at(blk + 2);
  const int sub = j / 32;
  int sc, m;
  k_scale_min(blk + 4, sub, &sc, &m);
  const int chunk = j / 64, within = j % 64;
  const uint8_t byte = blk[48 + 32 * chunk + within % 32];
  const int lo = within < 32 ? (byte & 0x0f) : (byte >> 4);
  const int hi = (blk[16 + j % 32] >> sub) & 1;
  return d * sc * (lo + 16 * hi) - dmin * m;
}

// A bf16: the top 16 bits of an f32.
double bf16_value(const uint8_t *p) {
  const uint32_t u = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Element j (0..255) of a Q6_K super-block: two halves of 128; in a half,
// quarter g (32 values) takes its low 4 bits from ql[l + 32 (g & 1)] (low
// nibble for g < 2, high for g >= 2) and its top 2 bits from bits 2g..2g+1
// of qh[l]; the int8 scale is per 16 values.
double q6_k_value(const uint8_t *blk, int j) {
  const double d = half_at(blk + 208);
  const int half = j / 128, r = j % 128, g = r / 32, l = r % 32;
  const uint8_t lo_byte = blk[64 * half + l + 32 * (g & 1)];
  const int lo = g < 2 ? (lo_byte & 0x0f) : (lo_byte >> 4);
  const int hi = (blk[128 + 32 * half + l] >> (2 * g)) & 3;
  const int scale = static_cast<int8_t>(blk[192 + 8 * half + 2 * g + l / 16]);
  return d * scale * ((lo | (hi << 4)) - 32);
}

void need_blocks(bp_type type, int64_t n) {
  if (n % bp_type_block_size(type) != 0)
    throw std::invalid_argument(std::to_string(n) + " values do not fill whole " + bp_type_name(type) + " blocks");
}

double max_abs(const double *x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// Storing a scale as f16 moves it by up to 2^-11 of itself; with codes up
// to 32 in magnitude (or 127 for Q8_0) that is this share of a step.
constexpr double k_f16_scale_slack = 1.0 / 16;

}  // namespace

std::vector<double> dequantize_blocks(bp_type type, const uint8_t *bytes, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  if (type == BP_TYPE_F32) {
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      out[i] = f;
    }
    return out;
  }
  if (type == BP_TYPE_F16) {
    for (int64_t i = 0; i < n; ++i) out[i] = half_at(bytes + 2 * i);
    return out;
  }
  need_blocks(type, n);
  const int64_t blck = bp_type_block_size(type);
  const size_t block_bytes = bp_type_size(type);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *blk = bytes + static_cast<size_t>(i / blck) * block_bytes;
    const int j = static_cast<int>(i % blck);
    switch (type) {
      case BP_TYPE_Q8_0:
      case BP_TYPE_Q4_0:
      case BP_TYPE_Q5_0:
        out[i] = block32_value(type, blk, j);
        break;
      case BP_TYPE_Q4_K:
        out[i] = q4_k_value(blk, j);
        break;
      case BP_TYPE_Q6_K:
        out[i] = q6_k_value(blk, j);
        break;
      case BP_TYPE_Q5_K:
        out[i] = q5_k_value(blk, j);
        break;
      case BP_TYPE_BF16:
        out[i] = bf16_value(blk);
        break;
      default:
        throw std::invalid_argument(std::string("no reader for type ") + bp_type_name(type));
    }
  }
  return out;
}

std::vector<double> quantization_bound(bp_type type, const double *x, int64_t n) {
  std::vector<double> bound(static_cast<size_t>(n), 0.0);
  if (!bp_type_is_quantized(type)) return bound;
  need_blocks(type, n);
  const int64_t blck = bp_type_block_size(type);
  for (int64_t b0 = 0; b0 < n; b0 += blck) {
    const double *xb = x + b0;
    double *out = bound.data() + b0;
    switch (type) {
      case BP_TYPE_Q8_0: {
        // Step amax / 127; rounding errs by half a step.
        const double step = max_abs(xb, 32) / 127;
        std::fill(out, out + 32, step * (0.5 + k_f16_scale_slack));
        break;
      }
      case BP_TYPE_Q4_0:
      case BP_TYPE_Q5_0: {
        // Step amax / 8 (or 16) with the signed extreme on code 0: the
        // opposite extreme needs code 16 (32), one past the top, and errs
        // by a whole step.
        const double step = max_abs(xb, 32) / (type == BP_TYPE_Q4_0 ? 8 : 16);
        std::fill(out, out + 32, step * (1.0 + k_f16_scale_slack));
        break;
      }
      case BP_TYPE_Q4_K:
      case BP_TYPE_Q5_K: {
        // Per sub-block of 32 with range r = max - min(min, 0): the fitted
        // step is about r / codes (15 for Q4_K, 31 for Q5_K; half of it from
        // rounding, the rest for the search moving scale and min off the
        // extremes). The 6-bit scale and min each err by half of their
        // super-block's largest / 63, which over the codes is about the
        // largest range R / 126 and the largest min M / 126 per code step:
        // (R + M) / (2 (codes + 1)) covers both with room.
        const double codes = type == BP_TYPE_Q4_K ? 15 : 31;
        double range[8], largest = 0, largest_min = 0;
        for (int s = 0; s < 8; ++s) {
          const double *xs = xb + 32 * s;
          const double lo = std::min(0.0, *std::min_element(xs, xs + 32)), hi = *std::max_element(xs, xs + 32);
          range[s] = hi - lo;
          largest = std::max(largest, range[s]);
          largest_min = std::max(largest_min, -lo);
        }
        for (int s = 0; s < 8; ++s)
          std::fill(out + 32 * s, out + 32 * s + 32, range[s] / codes + (largest + largest_min) / (2 * (codes + 1)));
        break;
      }
      case BP_TYPE_BF16:
        // Round to nearest: half a unit in the last of 8 significant bits,
        // at most 2^-8 of the value (2^-134 among the subnormals).
        out[0] = std::fabs(xb[0]) * 0x1p-8 + 0x1p-134;
        break;
      case BP_TYPE_Q6_K: {
        // Per sub-block of 16: step about amax / 32, a whole step allowed
        // for the search and the clamp at +31; the int8 scale errs by half
        // of the super-block's largest scale / 128, times up to 32 codes.
        const double largest = max_abs(xb, 256);
        for (int s = 0; s < 16; ++s)
          std::fill(out + 16 * s, out + 16 * s + 16, max_abs(xb + 16 * s, 16) / 32 + largest / 128);
        break;
      }
      default:
        break;
    }
  }
  return bound;
}

double mul_mat_quant_bound(bp_type weight_type, const double *w, const double *b, int64_t k) {
  const int64_t blck = bp_type_block_size(weight_type);
  double quant_term = 0, magnitude = 0, products = 0;
  for (int64_t b0 = 0; b0 < k; b0 += blck) {
    const int64_t len = std::min(blck, k - b0);
    // b quantized to 8 bits: step amax / 127, each value off by half a step
    // (plus the scale's f16 rounding), which w weighs.
    const double step = max_abs(b + b0, len) / 127;
    double sum_w = 0;
    for (int64_t i = b0; i < b0 + len; ++i) {
      sum_w += std::fabs(w[i]);
      products += std::fabs(w[i] * b[i]);
      magnitude += std::fabs(w[i]) * (std::fabs(b[i]) + step);
    }
    quant_term += step * (0.5 + k_f16_scale_slack) * sum_w;
  }
  // w and b each rounded to f16 (2^-11 apiece), and f32 accumulation over k
  // terms (k + 1 roundings of 2^-24 of the running magnitude, doubled for
  // the products) plus the result's own rounding.
  const double f16_term = 0x1p-10 * products;
  const double acc_term = 2.0 * static_cast<double>(k + 1) * 0x1p-24 * magnitude;
  return quant_term + f16_term + acc_term;
}

std::vector<uint8_t> make_quantized_leaf(const input_spec &spec, uint64_t seed, std::vector<double> &values) {
  input_spec as_f32 = spec;
  as_f32.type = BP_TYPE_F32;
  const std::vector<double> v = make_leaf_values(as_f32, seed);
  const std::vector<float> f(v.begin(), v.end());
  const int64_t row = spec.ne[0], rows = static_cast<int64_t>(v.size()) / row;
  std::vector<uint8_t> bytes(bp_type_row_size(spec.type, row) * static_cast<size_t>(rows));
  if (bp_quantize_rows(spec.type, f.data(), bytes.data(), rows, row, nullptr) != BP_OK)
    throw std::runtime_error(std::string("bp_quantize_rows: ") + bp_last_error());
  values = dequantize_blocks(spec.type, bytes.data(), static_cast<int64_t>(v.size()));
  return bytes;
}

}  // namespace bp::conformance
