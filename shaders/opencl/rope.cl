// rope.cl: rotary position embedding of a [D, H, T, B] (f32) by i32
// positions pos[T]. Work-item x of row (t, b) serves one column of every
// head: x < n_dims/2 rotates pair x (NORMAL: (2x, 2x+1), NEOX:
// (x, x + n_dims/2)); the others copy element n_dims + (x - n_dims/2).
// The angle depends on the pair and the position only, so it is computed
// once for all H heads: in double where the device has it, as the cpu
// plugin does, so long positions keep their accuracy, and double pow, cos
// and sin are what this kernel's time went to when each head paid for them
// (a third of bp-run --device opencl on PoCL).
// FREQ_FACTORS=1 adds f32 frequency factors ff (after pos): pair x's angle
// is divided by ff[x].

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double angle_t;
#else
typedef float angle_t;
#endif

#ifndef FREQ_FACTORS
#define FREQ_FACTORS 0
#endif

#if FREQ_FACTORS
#define FF_ARG TENSOR(ff),
#else
#define FF_ARG
#endif

__kernel void rope(TENSOR(a), TENSOR(pos), FF_ARG TENSOR(d), int n_dims, int neox, float freq_base,
                   float freq_scale) {
  const long half_dims = n_dims / 2;
  const long x = get_global_id(0);
  if (x >= half_dims + (d_ne.x - n_dims)) return;
  const long i2 = get_global_id(1) % d_ne.z, i3 = get_global_id(1) / d_ne.z;
  if (x >= half_dims) {
    const long i0 = n_dims + (x - half_dims);
    for (long i1 = 0; i1 < d_ne.y; ++i1)
      *(__global float *)ELEM_PTR(d, i0, i1, i2, i3) = *(__global const float *)ELEM_PTR(a, i0, i1, i2, i3);
    return;
  }
  const int p = *(__global const int *)ELEM_PTR(pos, i2, 0, 0, 0);
  angle_t theta = (angle_t)p * (angle_t)freq_scale * pow((angle_t)freq_base, (angle_t)(-2 * x) / (angle_t)n_dims);
#if FREQ_FACTORS
  theta /= (angle_t)(*(__global const float *)ELEM_PTR(ff, x, 0, 0, 0));
#endif
  const float c = (float)cos(theta), s = (float)sin(theta);
  const long j0 = neox ? x : 2 * x;
  const long j1 = neox ? x + half_dims : 2 * x + 1;
  for (long i1 = 0; i1 < d_ne.y; ++i1) {
    const float x0 = *(__global const float *)ELEM_PTR(a, j0, i1, i2, i3);
    const float x1 = *(__global const float *)ELEM_PTR(a, j1, i1, i2, i3);
    *(__global float *)ELEM_PTR(d, j0, i1, i2, i3) = x0 * c - x1 * s;
    *(__global float *)ELEM_PTR(d, j1, i1, i2, i3) = x0 * s + x1 * c;
  }
}
