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

// Element j (0..31) of a Q4_1 or Q5_1 block: d * q + m, the nibbles (and
// Q5_1's fifth bits) laid out as Q4_0's (Q5_0's), after the two halves.
double block32_min_value(bp_type type, const uint8_t *blk, int j) {
  const double d = half_at(blk), m = half_at(blk + 2);
  const uint8_t *qs = blk + (type == BP_TYPE_Q4_1 ? 4 : 8);
  int q = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  if (type == BP_TYPE_Q5_1) {
    const uint32_t qh = blk[4] | (uint32_t)blk[5] << 8 | (uint32_t)blk[6] << 16 | (uint32_t)blk[7] << 24;
    q |= static_cast<int>((qh >> j) & 1u) << 4;
  }
  return d * q + m;
}

// The 2-bit code of element j (0..255) in the 64 qs bytes of Q2_K and
// Q3_K: halves of 128, in a half quarter g (32 values) at bits 2g..2g+1 of
// byte 32 * half + l.
int two_bit_code(const uint8_t *qs, int j) {
  const int half = j / 128, g = (j % 128) / 32, l = j % 32;
  return (qs[32 * half + l] >> (2 * g)) & 3;
}

// Element j of a Q2_K super-block: group j / 16 has a 4-bit scale (low
// nibble of byte g) and min (high nibble); d at byte 80, dmin at 82.
double q2_k_value(const uint8_t *blk, int j) {
  const int g = j / 16;
  return half_at(blk + 80) * (blk[g] & 0x0f) * two_bit_code(blk + 16, j) - half_at(blk + 82) * (blk[g] >> 4);
}

// Element j of a Q3_K super-block: 3-bit signed code (two low bits in qs at
// byte 32, the third from bit j / 32 of hmask[j % 32], the code is lowered
// by 4 where it is clear); group g's 6-bit scale minus 32 from the 12 bytes
// at 96 (low 4 bits in nibble g / 8 of byte g % 8, top 2 bits in bits
// 2 (g / 4) of byte 8 + g % 4); d at byte 108.
double q3_k_value(const uint8_t *blk, int j) {
  const int g = j / 16;
  const uint8_t *sc = blk + 96;
  const int low = (sc[g % 8] >> (4 * (g / 8))) & 0x0f;
  const int scale = (low | (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
  const int high = (blk[j % 32] >> (j / 32)) & 1;
  return half_at(blk + 108) * scale * (two_bit_code(blk + 32, j) - (high ? 0 : 4));
}

// IQ4_NL and IQ4_XS's codebook.
constexpr int k_iq4_book[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The nibble of element j (0..31) of 16 qs bytes: low for the first half.
int nibble_of(const uint8_t *qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

// Element j of an IQ4_XS super-block: block b = j / 32 has the 6-bit scale
// (nibble b % 2 of byte 4 + b / 2, top 2 bits at bits 2b of the 16-bit
// word at byte 2) minus 32; its 16 qs bytes at 8 + 16 b.
double iq4_xs_value(const uint8_t *blk, int j) {
  const int b = j / 32;
  const int scales_h = blk[2] | (blk[3] << 8);
  const int ls = ((blk[4 + b / 2] >> (4 * (b % 2))) & 0x0f) | (((scales_h >> (2 * b)) & 3) << 4);
  return half_at(blk) * (ls - 32) * k_iq4_book[nibble_of(blk + 8 + 16 * b, j % 32)];
}

// Element j of an MXFP4 block: the E2M1 number of its nibble (bit 3 the
// sign, bits 1-2 the exponent, bit 0 the mantissa) times 2^(e - 127).
double mxfp4_value(const uint8_t *blk, int j) {
  const int code = nibble_of(blk + 1, j);
  const int exponent = (code >> 1) & 3, mantissa = code & 1;
  const double magnitude = exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
  return ((code & 8) ? -magnitude : magnitude) * std::ldexp(1.0, blk[0] - 127);
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
      case BP_TYPE_Q4_1:
      case BP_TYPE_Q5_1:
        out[i] = block32_min_value(type, blk, j);
        break;
      case BP_TYPE_Q2_K:
        out[i] = q2_k_value(blk, j);
        break;
      case BP_TYPE_Q3_K:
        out[i] = q3_k_value(blk, j);
        break;
      case BP_TYPE_IQ4_NL:
        out[i] = half_at(blk) * k_iq4_book[nibble_of(blk + 2, j)];
        break;
      case BP_TYPE_IQ4_XS:
        out[i] = iq4_xs_value(blk, j);
        break;
      case BP_TYPE_MXFP4:
        out[i] = mxfp4_value(blk, j);
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
      case BP_TYPE_Q4_1:
      case BP_TYPE_Q5_1: {
        // Step range / 15 (31) from the lowest value: half a step, the f16
        // scale's share, and the f16 rounding of the lowest value.
        const double lo = *std::min_element(xb, xb + 32), hi = *std::max_element(xb, xb + 32);
        const double step = (hi - lo) / (type == BP_TYPE_Q4_1 ? 15 : 31);
        std::fill(out, out + 32, step * (0.5 + k_f16_scale_slack) + std::fabs(lo) * 0x1p-10);
        break;
      }
      case BP_TYPE_Q2_K: {
        // Per group of 16 with range r = max - min(min, 0): step r / 3,
        // half of it from rounding; the 4-bit scale and min err by half of
        // the super-block's largest step / 15 and largest min / 15 (a value
        // pushed past the grid's ends by the min's error is clamped by it).
        double range[16], largest = 0, largest_min = 0;
        for (int g = 0; g < 16; ++g) {
          const double *xg = xb + 16 * g;
          const double lo = std::min(0.0, *std::min_element(xg, xg + 16)), hi = *std::max_element(xg, xg + 16);
          range[g] = hi - lo;
          largest = std::max(largest, range[g] / 3);
          largest_min = std::max(largest_min, -lo);
        }
        for (int g = 0; g < 16; ++g)
          std::fill(out + 16 * g, out + 16 * g + 16,
                    (range[g] / 6 + largest / 15 + largest_min / 15) * (1 + k_f16_scale_slack));
        break;
      }
      case BP_TYPE_Q3_K: {
        // Per group of 16: step about amax / 4 with codes -4..3, a whole
        // step for the clamp at +3; the 6-bit scale errs by the super-block's
        // largest step / 31.
        const double largest = max_abs(xb, 256);
        for (int g = 0; g < 16; ++g)
          std::fill(out + 16 * g, out + 16 * g + 16,
                    (max_abs(xb + 16 * g, 16) / 4 + largest / 124) * (1 + k_f16_scale_slack));
        break;
      }
      case BP_TYPE_IQ4_NL: {
        // The codebook's widest gap is 24 (and 14 past its top entry, 113 to
        // 127) in units of amax / 127.
        const double bound_block = max_abs(xb, 32) * 14 / 127 * (1 + k_f16_scale_slack);
        std::fill(out, out + 32, bound_block);
        break;
      }
      case BP_TYPE_IQ4_XS: {
        // IQ4_NL's bound per block of 32 with the block's scale coded in 6
        // bits against the super-block's largest (off by up to 1/31 of it).
        const double largest = max_abs(xb, 256);
        for (int b = 0; b < 8; ++b)
          std::fill(out + 32 * b, out + 32 * b + 32,
                    (max_abs(xb + 32 * b, 32) + largest / 31) * 14 / 127 * (1 + k_f16_scale_slack));
        break;
      }
      case BP_TYPE_MXFP4: {
        // A power-of-two scale: values above 1.5 * 2^floor(log2 amax) are
        // cut to it (up to half of 2^floor(log2 amax)); below, half the
        // widest gap of E2M1 (2 between 4 and 6) at that scale is a quarter.
        const double amax = max_abs(xb, 32);
        const double top = amax > 0 ? std::ldexp(1.0, static_cast<int>(std::floor(std::log2(amax)))) : 0.0;
        std::fill(out, out + 32, 0.5 * top * (1 + k_f16_scale_slack));
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
