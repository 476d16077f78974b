// gelu.h: GELU's one definition for the device kernels, written in the
// common subset of GLSL 4.50 and OpenCL C 1.2. shaders/vulkan/unary.comp
// includes it (glslang's #include); shaders/opencl/elementwise.cl includes it
// too, and plugins/opencl/embed_sources.cmake pastes it in at build time. The
// cpu plugin's loops (plugins/cpu/row_math_kernels.hpp, row_math_avx2.cpp,
// row_math_avx512.cpp) compute the same expression with the same constants.
// docs/ops.md states it:
//
//   gelu(x) = x * sigmoid(2u) = x / (1 + exp(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//
// which equals the tanh form 0.5 x (1 + tanh(u)) without its cancellation:
// 1 + tanh(u) loses every digit once tanh(u) rounds to -1, so the tanh form
// gives garbage (or -1000 * 3e-8) where the result is a tiny negative
// number. At large |x|, x^3 overflows to +-inf, so exp(-2u) is 0 or inf and
// the result is x or -0; no NaN for any finite x (x = -inf gives NaN, -inf /
// inf, like the formula).

#define BP_GELU_TWO_K 1.5957691216057308f  // 2 sqrt(2 / pi)
#define BP_GELU_C 0.044715f

float bp_gelu(float x) {
  float t = BP_GELU_TWO_K * (x + BP_GELU_C * x * x * x);
  return x / (1.0f + exp(-t));
}
