// isa.cpp: see isa.hpp.
#include "isa.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace bp::plugins {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// F16C from CPUID leaf 1 (ECX bit 29) directly: clang 14's
// __builtin_cpu_supports does not know "f16c" and fails to compile.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

isa_level detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  // x86-64-v4's set; VL and BW because the kernels use masked 256/512-bit
  // loads and stores on 16-bit data.
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return v4 ? isa_level::avx512 : v3 ? isa_level::avx2 : isa_level::baseline;
#else
  return isa_level::baseline;
#endif
}

bool detect_halves() {
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
  const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
  if (!amd || __get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const unsigned family = ((a >> 8) & 0xfu) + ((a >> 20) & 0xffu);
  // Family 19h with AVX-512 is Zen 4 (Zen 3 has none); Zen 5 (1Ah) has
  // full-width 512-bit pipes on its server and desktop parts.
  return family == 0x19;
#else
  return false;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
// AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), with the OS
// saving the tile configuration and data (XCR0 bits 17 and 18).
bool has_amx_int8() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || (d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & bit_OSXSAVE) == 0) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);
}
#endif

// Linux hands out the 8 KiB of tile data per process on request only; a
// refusal (an old kernel, a seccomp filter) leaves the AVX-512 kernels.
bool amx_permitted() {
#if defined(__x86_64__) && defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

bool detect_amx() {
#if defined(__x86_64__) && defined(__GNUC__)
  return detect() == isa_level::avx512 && has_amx_int8() && amx_permitted();
#else
  return false;
#endif
}

constexpr const char *kAmxName = "amx";

// A BP_CPU_ISA value's level ("amx": avx512, with the tiles); false for a
// value that names none.
bool parse_isa(const char *v, isa_level *out) {
  if (std::strcmp(v, kAmxName) == 0) {
    *out = isa_level::avx512;
    return true;
  }
  for (isa_level l : {isa_level::baseline, isa_level::avx2, isa_level::avx512})
    if (std::strcmp(v, isa_name(l)) == 0) {
      *out = l;
      return true;
    }
  return false;
}

bool halves_value_valid(const char *v) { return v && (v[0] == '0' || v[0] == '1') && v[1] == '\0'; }

isa_level from_env(isa_level available) {
  // secure_getenv: a setuid process ignores these, as it does BP_PLUGIN_PATH.
  const char *isa = secure_getenv("BP_CPU_ISA");
  isa_level level;
  if (isa && parse_isa(isa, &level)) return level;
  const char *base = secure_getenv("BP_CPU_BASELINE");
  if (base && base[0] == '1') return isa_level::baseline;
  return available;
}

}  // namespace

isa_level cpu_isa_available() {
  static const isa_level level = detect();
  return level;
}

isa_level isa_requested() {
  static const isa_level level = from_env(cpu_isa_available());
  return level;
}

isa_level cpu_isa() {
  static const isa_level level = [] {
    const isa_level want = isa_requested(), have = cpu_isa_available();
    return static_cast<int>(want) < static_cast<int>(have) ? want : have;
  }();
  return level;
}

bool cpu_amx() {
  static const bool amx = [] {
    if (cpu_isa() != isa_level::avx512) return false;
    const char *isa = secure_getenv("BP_CPU_ISA");
    isa_level unused;
    // An unset or unknown BP_CPU_ISA lets the CPU choose; "avx512" caps below the tiles.
    if (isa && parse_isa(isa, &unused) && std::strcmp(isa, kAmxName) != 0) return false;
    return detect_amx();
  }();
  return amx;
}

const char *kernels_name() { return cpu_amx() ? kAmxName : isa_name(cpu_isa()); }

bool avx512_runs_in_halves() {
  static const bool halves = [] {
    const char *v = secure_getenv("BP_CPU_AVX512_HALVES");
    if (halves_value_valid(v)) return v[0] == '1';
    return detect_halves();
  }();
  return halves;
}

const char *isa_env_warning() {
  static const std::string text = [] {
    std::string w;
    const char *isa = secure_getenv("BP_CPU_ISA");
    const isa_level have = cpu_isa_available();
    isa_level unused;
    if (isa && *isa && !parse_isa(isa, &unused)) {
      w = std::string("BP_CPU_ISA=") + isa + " is not a level (baseline, avx2, avx512 or amx) and is ignored";
    } else if (isa && std::strcmp(isa, kAmxName) == 0 && !cpu_amx()) {
      w = std::string("BP_CPU_ISA=amx: this CPU has ") + isa_name(have) +
          " at most (no AMX int8 tiles, or the OS refused them), which the kernels use";
    } else if (isa && *isa && static_cast<int>(isa_requested()) > static_cast<int>(have)) {
      w = std::string("BP_CPU_ISA=") + isa + ": this CPU has " + isa_name(have) + " at most, which the kernels use";
    }
    const char *halves = secure_getenv("BP_CPU_AVX512_HALVES");
    if (halves && *halves && !halves_value_valid(halves)) {
      if (!w.empty()) w += "; ";
      w += std::string("BP_CPU_AVX512_HALVES=") + halves + " is neither 0 nor 1 and is ignored (the CPU decides)";
    }
    return w;
  }();
  return text.c_str();
}

const char *isa_name(isa_level level) {
  switch (level) {
    case isa_level::avx512:
      return "avx512";
    case isa_level::avx2:
      return "avx2";
    default:
      return "baseline";
  }
}

}  // namespace bp::plugins
