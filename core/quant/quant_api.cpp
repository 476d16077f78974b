// quant_api.cpp: bp_quantize_rows (and its file variant) and bp_dequantize, the C entry points to the
// reference quantizers of this folder (plus f32 copy, f16 and bf16
// conversion).
#include <cstring>

#include "core/quant/quant.hpp"
#include "core/tensor_util.hpp"

namespace bp::core::quant {
namespace {

struct codec {
  quantize_fn quantize;
  dequantize_fn dequantize;
};

void quantize_f32(const float *src, void *dst, int64_t n) { std::memcpy(dst, src, (size_t)n * sizeof(float)); }
void dequantize_f32(const void *src, float *dst, int64_t n) { std::memcpy(dst, src, (size_t)n * sizeof(float)); }
void quantize_f16(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint16_t *>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = bp_fp32_to_fp16(src[i]);
}
void dequantize_f16(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint16_t *>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bp_fp16_to_fp32(in[i]);
}

// bf16 is the top half of an f32: round to nearest even on the 16 bits
// dropped; a NaN keeps its sign and top payload bits and is made quiet (an
// f32 NaN whose payload sits only in the low bits would otherwise become
// infinity). Subnormals round like any other value.
void quantize_bf16(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint16_t *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x40u);
    } else {
      out[i] = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
}
void dequantize_bf16(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint16_t *>(src);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(&dst[i], &u, sizeof u);
  }
}

// The codec of |type|, or {} for i32 and unknown values.
codec codec_of(int type) {
  switch (type) {
    case BP_TYPE_F32:
      return {quantize_f32, dequantize_f32};
    case BP_TYPE_F16:
      return {quantize_f16, dequantize_f16};
    case BP_TYPE_Q8_0:
      return {quantize_q8_0, dequantize_q8_0};
    case BP_TYPE_Q4_0:
      return {quantize_q4_0, dequantize_q4_0};
    case BP_TYPE_Q5_0:
      return {quantize_q5_0, dequantize_q5_0};
    case BP_TYPE_Q4_K:
      return {quantize_q4_k, dequantize_q4_k};
    case BP_TYPE_Q6_K:
      return {quantize_q6_k, dequantize_q6_k};
    case BP_TYPE_Q5_K:
      return {quantize_q5_k, dequantize_q5_k};
    case BP_TYPE_BF16:
      return {quantize_bf16, dequantize_bf16};
    case BP_TYPE_Q4_1:
      return {quantize_q4_1, dequantize_q4_1};
    case BP_TYPE_Q5_1:
      return {quantize_q5_1, dequantize_q5_1};
    case BP_TYPE_Q2_K:
      return {quantize_q2_k, dequantize_q2_k};
    case BP_TYPE_Q3_K:
      return {quantize_q3_k, dequantize_q3_k};
    case BP_TYPE_IQ4_NL:
      return {quantize_iq4_nl, dequantize_iq4_nl};
    case BP_TYPE_IQ4_XS:
      return {quantize_iq4_xs, dequantize_iq4_xs};
    case BP_TYPE_MXFP4:
      return {quantize_mxfp4, dequantize_mxfp4};
    default:
      return {nullptr, nullptr};
  }
}

bp_status check_type(const char *fn, int type, const codec &c) {
  if (c.quantize != nullptr) return BP_OK;
  if (type == BP_TYPE_I32) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: i32 holds integers, not floats: copy them as they are", fn);
  }
  return set_errorf(
      BP_ERR_INVALID_ARGUMENT,
      "%s: unknown type %d: use BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16 or a quantized BP_TYPE_Q*, IQ4_* or MXFP4 value",
      fn, type);
}

bp_status check_row(const char *fn, bp_type type, int64_t n, const char *what) {
  const int64_t blck = bp_type_block_size(type);
  if (n < 1 || n % blck != 0) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT,
                      "%s: %s = %lld: %s holds whole blocks of %lld values, so it must be a positive multiple of %lld",
                      fn, what, (long long)n, bp_type_name(type), (long long)blck, (long long)blck);
  }
  // Keep every byte count a signed 64-bit value.
  if (n > INT64_MAX / 8)
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s = %lld is too large", fn, what, (long long)n);
  return BP_OK;
}

}  // namespace

bp_status quantize_rows(const bp_type &type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                        size_t *out_bytes, const char *fn, bool for_file) {
  if (out_bytes) *out_bytes = 0;
  const int type_value = enum_value(type);
  const codec c = codec_of(type_value);
  if (bp_status s = check_type(fn, type_value, c); s != BP_OK) return s;
  if (src == nullptr || dst == nullptr)
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, src == nullptr ? "src" : "dst");
  if (bp_status s = check_row(fn, type, n_per_row, "n_per_row"); s != BP_OK) return s;
  if (n_rows < 1 || n_rows > INT64_MAX / 8 / n_per_row)
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: n_rows = %lld: pass at least one row (and fewer than the %s)", fn,
                      (long long)n_rows, "byte count's overflow limit");
  // Rows are whole blocks, dense on both sides, so all rows quantize as one
  // run of blocks. (Blocks are independent but for IQ4_NL's all-zero ones,
  // which keep the codes of the block before them as the reference writes
  // them: one run gives the same bytes however the values are cut in rows.)
  const size_t row_bytes = bp_type_row_size(type, n_per_row);
  const quantize_fn quantize = for_file && type_value == BP_TYPE_IQ4_NL ? quantize_iq4_nl_file : c.quantize;
  quantize(src, dst, n_rows * n_per_row);
  if (out_bytes) *out_bytes = row_bytes * (size_t)n_rows;
  return BP_OK;
}

}  // namespace bp::core::quant

extern "C" {

BP_API bp_status bp_quantize_rows(bp_type type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                                  size_t *out_bytes) {
  BP_API_SCOPE();
  return bp::core::quant::quantize_rows(type, src, dst, n_rows, n_per_row, out_bytes, "bp_quantize_rows");
}

BP_API bp_status bp_quantize_rows_for_file(bp_type type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                                           size_t *out_bytes) {
  BP_API_SCOPE();
  return bp::core::quant::quantize_rows(type, src, dst, n_rows, n_per_row, out_bytes, "bp_quantize_rows_for_file",
                                        true);
}

BP_API bp_status bp_dequantize(bp_type type, const void *src, float *dst, int64_t n) {
  BP_API_SCOPE();
  using namespace bp::core::quant;
  const char *fn = "bp_dequantize";
  const int type_value = bp::core::enum_value(type);
  const codec c = codec_of(type_value);
  if (bp_status s = check_type(fn, type_value, c); s != BP_OK) return s;
  if (src == nullptr || dst == nullptr) {
    return bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, src == nullptr ? "src" : "dst");
  }
  if (bp_status s = check_row(fn, type, n, "n"); s != BP_OK) return s;
  c.dequantize(src, dst, n);
  return BP_OK;
}

}  // extern "C"
