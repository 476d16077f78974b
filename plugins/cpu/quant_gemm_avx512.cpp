// quant_gemm_avx512.cpp: the AVX-512 tiles of quantized MUL_MAT
// (quant_gemm_simd.hpp). The blocks stay 256-bit (one block of 32 values
// per register, with its own scale), but AVX-512VL's 32 registers hold a
// 4 x 4 tile, and where the CPU has AVX512-VNNI one vpdpbusd replaces
// AVX2's vpmaddubsw + vpmaddwd.
#include <cstdint>
#include <cstring>

#include "quant.hpp"
#include "quant_blocks.hpp"
#include "simd.hpp"

#if defined(BP_X86_SIMD)
// GCC takes a target for the region; clang, which ignores that pragma,
// gets the same features as an attribute on every function in it.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")
#endif

namespace bp::cpu {
namespace plain512 {
namespace {

struct Isa {
  static __m256i dot_u(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  static __m256i dot_s(__m256i x, __m256i y) { return dot_u(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x)); }
};

#include "quant_gemm_simd.hpp"

}  // namespace
}  // namespace plain512
}  // namespace bp::cpu

#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC target("avx512vnni")
#endif

namespace bp::cpu {
namespace vnni512 {
namespace {

struct Isa {
  static __m256i dot_u(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
  static __m256i dot_s(__m256i x, __m256i y) { return dot_u(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x)); }
};

#include "quant_gemm_simd.hpp"

}  // namespace
}  // namespace vnni512

namespace {

constexpr int kRows = 4;

qtile_fn tile_plain(qtype q, int rm, int rn) { return plain512::tile_of_format<kRows, 1, 2, 3, 4>(q, rm, rn); }
qtile_fn tile_vnni(qtype q, int rm, int rn) { return vnni512::tile_of_format<kRows, 1, 2, 3, 4>(q, rm, rn); }
int rows_avx512(int) { return kRows; }

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const qkernels &qkernels_avx512() {
  static const qkernels k = {"avx512", 4, rows_avx512, tile_plain};
  return k;
}
const qkernels &qkernels_avx512_vnni() {
  static const qkernels k = {"avx512-vnni", 4, rows_avx512, tile_vnni};
  return k;
}

}  // namespace bp::cpu

#else
namespace bp::cpu {
const qkernels &qkernels_avx512() { return qkernels_baseline(); }
const qkernels &qkernels_avx512_vnni() { return qkernels_baseline(); }
}  // namespace bp::cpu
#endif
