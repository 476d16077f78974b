// f16.hpp: widening rows of half floats, shared by the host-memory plugins
// (the cpu plugin's MUL_MAT packing, the blas plugin's f16 weights).
#ifndef BP_PLUGINS_COMMON_F16_HPP_
#define BP_PLUGINS_COMMON_F16_HPP_

#include <cstdint>

namespace bp::plugins {

// dst[i] = src[i] as float for |n| dense halves: AVX-512 (32 at a time) or
// F16C (8 at a time) as cpu_isa() (isa.hpp) picks at run time, else
// bp_fp16_to_fp32. Exact either way.
void f16_row_to_f32(const uint16_t *src, int64_t n, float *dst);

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_F16_HPP_
