// elementwise.cl: ADD SUB MUL DIV (src1 broadcast over src0), SCALE, CLAMP
// and the unary ops. Build options: -DA_TYPE, -DB_TYPE (0 f32, 1 f16); the
// output has A_TYPE. Kernels without inner loops, so the driver can
// vectorize across work-items; "_contig" and "_rows" are the fast paths for
// dense operands, "_nd" follows any strides and broadcast.

#ifndef A_TYPE
#define A_TYPE T_F32
#endif
#ifndef B_TYPE
#define B_TYPE T_F32
#endif
#define A_SIZE TYPE_SIZE(A_TYPE)
#define B_SIZE TYPE_SIZE(B_TYPE)

// d[i] = a[i] op b[i] over n dense elements.
#define BINARY_KERNELS(NAME, EXPR)                                                                              \
  __kernel void NAME##_contig(__global const char *a, ulong oa, __global const char *b, ulong ob,              \
                              __global char *d, ulong od, ulong n) {                                           \
    const size_t i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                                        \
    const float x = LOAD_AS(A_TYPE, a + oa + i * A_SIZE);                                                      \
    const float y = LOAD_AS(B_TYPE, b + ob + i * B_SIZE);                                                      \
    STORE_AS(A_TYPE, d + od + i * A_SIZE, EXPR);                                                               \
  }                                                                                                            \
  /* Dense rows of n0; b is one dense row repeated (b_row = 0) or as many rows (b_row = n0). */               \
  __kernel void NAME##_rows(__global const char *a, ulong oa, __global const char *b, ulong ob,                \
                            __global char *d, ulong od, ulong n0, ulong b_row) {                               \
    const size_t i0 = get_global_id(0), r = get_global_id(1);                                                  \
    if (i0 >= n0) return;                                                                                      \
    const float x = LOAD_AS(A_TYPE, a + oa + (r * n0 + i0) * A_SIZE);                                          \
    const float y = LOAD_AS(B_TYPE, b + ob + (r * b_row + i0) * B_SIZE);                                       \
    STORE_AS(A_TYPE, d + od + (r * n0 + i0) * A_SIZE, EXPR);                                                   \
  }                                                                                                            \
  __kernel void NAME##_nd(TENSOR(a), TENSOR(b), TENSOR(d)) {                                                   \
    const long i0 = get_global_id(0);                                                                          \
    if (i0 >= d_ne.x) return;                                                                                  \
    const long i1 = get_global_id(1), i23 = get_global_id(2);                                                  \
    const long i2 = i23 % d_ne.z, i3 = i23 / d_ne.z;                                                           \
    const float x = LOAD_AS(A_TYPE, ELEM_PTR(a, i0, i1, i2, i3));                                              \
    const float y = LOAD_AS(B_TYPE, ELEM_PTR(b, i0 % b_ne.x, i1 % b_ne.y, i2 % b_ne.z, i3 % b_ne.w));          \
    STORE_AS(A_TYPE, ELEM_PTR(d, i0, i1, i2, i3), EXPR);                                                       \
  }

BINARY_KERNELS(add, x + y)
BINARY_KERNELS(sub, x - y)
BINARY_KERNELS(mul, x * y)
BINARY_KERNELS(div, x / y)

// y = f(x; p0, p1) elementwise; every unary kernel takes both parameters so
// the host sets the same arguments for all of them.
#define UNARY_KERNELS(NAME, EXPR)                                                                              \
  __kernel void NAME##_contig(__global const char *a, ulong oa, __global char *d, ulong od, ulong n, float p0, \
                              float p1) {                                                                      \
    const size_t i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                                        \
    const float x = LOAD_AS(A_TYPE, a + oa + i * A_SIZE);                                                      \
    STORE_AS(A_TYPE, d + od + i * A_SIZE, EXPR);                                                               \
  }                                                                                                            \
  __kernel void NAME##_nd(TENSOR(a), TENSOR(d), float p0, float p1) {                                          \
    const long i0 = get_global_id(0);                                                                          \
    if (i0 >= d_ne.x) return;                                                                                  \
    const long i1 = get_global_id(1), i23 = get_global_id(2);                                                  \
    const long i2 = i23 % d_ne.z, i3 = i23 / d_ne.z;                                                           \
    const float x = LOAD_AS(A_TYPE, ELEM_PTR(a, i0, i1, i2, i3));                                              \
    STORE_AS(A_TYPE, ELEM_PTR(d, i0, i1, i2, i3), EXPR);                                                       \
  }

// bp_gelu: GELU's one definition, shared with the Vulkan shaders (pasted in
// here when the sources are embedded).
#include "../common/gelu.h"
// min then max, as the cpu plugin does (NaN bounds leave values alone).
inline float clamp_f(float x, float lo, float hi) {
  float v = x < lo ? lo : x;
  return v > hi ? hi : v;
}

UNARY_KERNELS(scale, x * p0)
UNARY_KERNELS(clamp, clamp_f(x, p0, p1))
UNARY_KERNELS(neg, -x)
UNARY_KERNELS(abs, fabs(x))
UNARY_KERNELS(sqr, x * x)
UNARY_KERNELS(sqrt, sqrt(x))
UNARY_KERNELS(exp, exp(x))
UNARY_KERNELS(relu, x > 0.0f ? x : 0.0f)
UNARY_KERNELS(gelu, bp_gelu(x))
UNARY_KERNELS(silu, x / (1.0f + exp(-x)))
UNARY_KERNELS(tanh, tanh(x))
UNARY_KERNELS(sigmoid, 1.0f / (1.0f + exp(-x)))

// SILU of a into d, then d times b into z, over n dense f32 elements: the
// SILU and the MUL that reads it in one launch (ops_fusion.cpp). d is still
// written (other nodes may read it); z may be d or b (in place). The product
// is the same either way round.
__kernel void silu_mul_contig(__global const char *a, ulong oa, __global char *d, ulong od, __global const char *b,
                              ulong ob, __global char *z, ulong oz, ulong n) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  const float x = *(__global const float *)(a + oa + i * 4);
  const float s = x / (1.0f + exp(-x));
  const float u = *(__global const float *)(b + ob + i * 4);
  *(__global float *)(d + od + i * 4) = s;
  *(__global float *)(z + oz + i * 4) = s * u;
}
