// isa.hpp: which vector ISA the host-memory plugins' kernels use, chosen
// once per process at run time (the .so files are built for baseline x86-64
// and carry their AVX2 and AVX-512 code in functions with target
// attributes, so they load and run on any x86-64 CPU).
//
// The level is the best the CPU has, capped by the environment:
//   BP_CPU_ISA=baseline|avx2|avx512|amx   the highest level to use;
//   BP_CPU_BASELINE=1                     an alias for BP_CPU_ISA=baseline.
// A cap above what the CPU has gives the CPU's best (isa_requested() tells
// callers so they can say it). Tests use the cap to run every path on a
// machine that has them all. AMX is not a level of its own but the avx512
// level with the int8 tiles of an AMX CPU besides (cpu_amx()): every
// AVX-512 kernel runs under it, and the products that have tile kernels use
// the tiles; "avx512" leaves the tiles out.
#ifndef BP_PLUGINS_COMMON_ISA_HPP_
#define BP_PLUGINS_COMMON_ISA_HPP_

namespace bp::plugins {

enum class isa_level {
  baseline = 0,  // SSE2: whatever x86-64 (or another architecture) guarantees
  avx2 = 1,      // x86-64-v3: AVX2, FMA, F16C
  avx512 = 2,    // x86-64-v4: AVX-512 F, BW, DQ, VL (plus FMA, F16C)
};

// The level the kernels use (computed once; thread-safe).
isa_level cpu_isa();
// The best level this CPU has, ignoring the environment.
isa_level cpu_isa_available();
// The level the environment asked for, or the available one when it asked
// for nothing (or for something unknown).
isa_level isa_requested();
// Whether the CPU runs a 512-bit FMA as two 256-bit halves on its two
// 256-bit pipes (AMD Zen 4, family 19h): one 512-bit FMA per cycle, so a
// tile that loads one operand per FMA keeps its FMA pipes busy there, where
// a full-width core's two 512-bit FMAs per cycle would wait on the loads.
// BP_CPU_AVX512_HALVES=1|0 overrides the detection; tests use it to run
// both choices on any machine.
bool avx512_runs_in_halves();
// "baseline", "avx2", "avx512".
const char *isa_name(isa_level level);
// Whether the kernels use AMX int8 tiles (TDPBSSD): the level is avx512,
// BP_CPU_ISA is unset or "amx", the CPU has AMX-TILE and AMX-INT8, the OS
// saves the tile state (XCR0), and Linux granted this process the tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process on the first
// call). Computed once; thread-safe.
bool cpu_amx();
// The kernels' name for the device description: "amx" when cpu_amx(),
// else isa_name(cpu_isa()).
const char *kernels_name();
// What the environment asked for that this process does not do, for a
// warning: a BP_CPU_ISA or BP_CPU_AVX512_HALVES value that is none of
// theirs (ignored), or a BP_CPU_ISA above what the CPU has. "" when there is
// nothing to say. Computed once; the text lives as long as the process.
const char *isa_env_warning();

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_ISA_HPP_
