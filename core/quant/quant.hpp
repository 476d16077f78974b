// quant.hpp: the reference quantizers and dequantizers of the block types
// (docs/types.md), one family per file. Not installed.
//
// Each quantizer writes exactly the bytes llama.cpp's reference quantizer
// writes for the same floats, so files and results are interchangeable:
// the arithmetic below is float (never double), in a fixed order, and this
// folder is compiled with -ffp-contract=off so no multiply-add is fused.
#pragma once

#include <cstdint>

#include "backplane/backplane.h"

namespace bp::core::quant {

// bp_quantize_rows's body, with the function name |fn| for messages.
// |type| is taken by reference and read as an int until checked, so the
// 0.1 forwarder bp_quantize (core/deprecated.cpp) shares it without loading
// an out-of-range value as the enum.
// |for_file|: bp_quantize_rows_for_file's bytes (IQ4_NL as llama-quantize
// writes it).
bp_status quantize_rows(const bp_type &type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                        size_t *out_bytes, const char *fn, bool for_file = false);

// |n| is a multiple of the type's block size; |dst| holds n / block blocks.
using quantize_fn = void (*)(const float *src, void *dst, int64_t n);
using dequantize_fn = void (*)(const void *src, float *dst, int64_t n);

void quantize_q8_0(const float *src, void *dst, int64_t n);
void quantize_q4_0(const float *src, void *dst, int64_t n);
void quantize_q5_0(const float *src, void *dst, int64_t n);
void quantize_q4_k(const float *src, void *dst, int64_t n);
void quantize_q6_k(const float *src, void *dst, int64_t n);
void quantize_q5_k(const float *src, void *dst, int64_t n);
void quantize_bf16(const float *src, void *dst, int64_t n);
void quantize_q4_1(const float *src, void *dst, int64_t n);
void quantize_q5_1(const float *src, void *dst, int64_t n);
void quantize_q2_k(const float *src, void *dst, int64_t n);
void quantize_q3_k(const float *src, void *dst, int64_t n);
void quantize_iq4_nl(const float *src, void *dst, int64_t n);
// IQ4_NL as llama-quantize writes it (the search of IQ4_XS per block).
void quantize_iq4_nl_file(const float *src, void *dst, int64_t n);
void quantize_iq4_xs(const float *src, void *dst, int64_t n);
void quantize_mxfp4(const float *src, void *dst, int64_t n);

void dequantize_q8_0(const void *src, float *dst, int64_t n);
void dequantize_q4_0(const void *src, float *dst, int64_t n);
void dequantize_q5_0(const void *src, float *dst, int64_t n);
void dequantize_q4_k(const void *src, float *dst, int64_t n);
void dequantize_q6_k(const void *src, float *dst, int64_t n);
void dequantize_q5_k(const void *src, float *dst, int64_t n);
void dequantize_bf16(const void *src, float *dst, int64_t n);
void dequantize_q4_1(const void *src, float *dst, int64_t n);
void dequantize_q5_1(const void *src, float *dst, int64_t n);
void dequantize_q2_k(const void *src, float *dst, int64_t n);
void dequantize_q3_k(const void *src, float *dst, int64_t n);
void dequantize_iq4_nl(const void *src, float *dst, int64_t n);
void dequantize_iq4_xs(const void *src, float *dst, int64_t n);
void dequantize_mxfp4(const void *src, float *dst, int64_t n);

// The scale-and-min search of Q2_K, Q4_K and Q5_K (fit_scale_min.cpp):
// codes 0..nmax, candidate inverse scales (nmax + rmin + 0.1 s) / (max -
// min) for s = 0..steps, the error weighted squared or absolute.
struct scale_min_search {
  int nmax;
  float rmin;
  int steps;
  bool absolute_error;
};
// Fits x[i] ~ scale * L[i] - *min_out (*min_out >= 0) over n values with
// weights w; returns scale. L gets the codes; aux (n bytes) is scratch.
float fit_scale_min(const scale_min_search &sp, int n, const float *x, const float *w, uint8_t *L, uint8_t *aux,
                    float *min_out);

// The rounding the K-quant searches use: round half to even through the
// float adder (adding 1.5 * 2^23 leaves the integer in the low mantissa
// bits). Valid for |x| < 2^22, which every caller guarantees for finite
// input; kept bit-for-bit so out-of-range values land where llama.cpp's do.
inline int round_nearest(float x) {
  const float shifted = x + 12582912.0f;
  int32_t bits;
  __builtin_memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// The f16 at |p| as a float, and |v| stored there as f16 (little-endian).
inline float f16_at(const uint8_t *p) {
  uint16_t h;
  __builtin_memcpy(&h, p, sizeof h);
  return bp_fp16_to_fp32(h);
}
inline void put_f16(uint8_t *p, float v) {
  const uint16_t h = bp_fp32_to_fp16(v);
  __builtin_memcpy(p, &h, sizeof h);
}

// The low byte of the float truncated toward zero, as the x86 conversion a
// reference's (uint8_t) or (int8_t) cast compiles to gives it (through a
// 32-bit integer); a NaN or a value past int32 gives 0 here, without the
// undefined conversion.
inline uint8_t truncated_low_byte(float v) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return 0;
  return static_cast<uint8_t>(static_cast<int32_t>(v));
}

}  // namespace bp::core::quant
