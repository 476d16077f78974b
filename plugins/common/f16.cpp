// f16.cpp: see f16.hpp.
#include "f16.hpp"

#include "backplane/tensor.h"  // bp_fp16_to_fp32
#include "isa.hpp"

#include "simd.hpp"

#ifdef BP_X86_SIMD
#define BP_F16_X86 1
#endif

namespace bp::plugins {
namespace {

void widen_portable(const uint16_t *src, int64_t n, float *dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bp_fp16_to_fp32(src[i]);
}

#ifdef BP_F16_X86
__attribute__((target("avx,f16c"))) void widen_f16c(const uint16_t *src, int64_t n, float *dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i))));
  widen_portable(src + i, n - i, dst + i);
}

// 32 halves per step (two 512-bit results); the tail is one masked step, so
// short rows (a packing block's) do not fall back to the scalar loop. The
// maskz form with an all-ones mask is the plain conversion; GCC 12's
// unmasked _mm512_cvtph_ps trips -Wmaybe-uninitialized in its own header.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_avx512(const uint16_t *src, int64_t n, float *dst) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i));
    const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i + 16));
    _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xffff, h0));
    _mm512_storeu_ps(dst + i + 16, _mm512_maskz_cvtph_ps(0xffff, h1));
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_cvtph_ps(m, _mm256_maskz_loadu_epi16(m, src + i)));
  }
}
#endif

}  // namespace

void f16_row_to_f32(const uint16_t *src, int64_t n, float *dst) {
#ifdef BP_F16_X86
  // BP_CPU_ISA caps this as it caps the cpu kernels (isa.hpp); F16C comes with AVX2.
  switch (cpu_isa()) {
    case isa_level::avx512:
      return widen_avx512(src, n, dst);
    case isa_level::avx2:
      return widen_f16c(src, n, dst);
    default:
      break;
  }
#endif
  widen_portable(src, n, dst);
}

}  // namespace bp::plugins
