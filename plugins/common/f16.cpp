// f16.cpp: see f16.hpp.
#include "f16.hpp"

#include "backplane/backplane.h"  // bp_fp16_to_fp32

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BP_F16_F16C 1
#endif

namespace bp::plugins {
namespace {

void widen_portable(const uint16_t *src, int64_t n, float *dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bp_fp16_to_fp32(src[i]);
}

#ifdef BP_F16_F16C
__attribute__((target("avx,f16c"))) void widen_f16c(const uint16_t *src, int64_t n, float *dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i))));
  widen_portable(src + i, n - i, dst + i);
}
#endif

}  // namespace

void f16_row_to_f32(const uint16_t *src, int64_t n, float *dst) {
#ifdef BP_F16_F16C
  if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) return widen_f16c(src, n, dst);
#endif
  widen_portable(src, n, dst);
}

}  // namespace bp::plugins
