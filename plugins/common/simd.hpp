// simd.hpp: the x86 intrinsics for the plugins' hand-vectorised paths, and
// one meaning of BP_AVX2 and BP_AVX512: the instruction sets of isa.hpp's
// levels (avx2 = AVX2 + FMA + F16C, avx512 = that + AVX-512 F/BW/DQ/VL), so
// a function so marked runs exactly where cpu_isa() picks that level.
// BP_X86_SIMD is defined where they exist (x86-64, GCC or clang).
#ifndef BP_PLUGINS_COMMON_SIMD_HPP_
#define BP_PLUGINS_COMMON_SIMD_HPP_

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 intrinsics fill "undefined" operands with a
// self-initialised variable, which -Wuninitialized then reports inside the
// header wherever an unmasked form is inlined; the warning is about the
// header, not this code, so it is silenced for the header's lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning; clang would warn about the pragma
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

#define BP_X86_SIMD 1
#define BP_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BP_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")))
#endif

#endif  // BP_PLUGINS_COMMON_SIMD_HPP_
