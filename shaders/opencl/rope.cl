// rope.cl: rotary position embedding of a [D, H, T, B] (f32) by i32
// positions pos[T]. Work-item i0 < n_dims/2 rotates pair i0 (NORMAL:
// (2i, 2i+1), NEOX: (i, i + n_dims/2)); i0 >= n_dims copies element i0.
// The angle is computed in double where the device has it, as the cpu
// plugin does, so long positions keep their accuracy.

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double angle_t;
#else
typedef float angle_t;
#endif

__kernel void rope(TENSOR(a), TENSOR(pos), TENSOR(d), int n_dims, int neox, float freq_base, float freq_scale) {
  const long i0 = get_global_id(0);
  if (i0 >= d_ne.x) return;
  const long r = get_global_id(1);
  ROW_INDEX(d_ne, r, i1, i2, i3);
  const long half_dims = n_dims / 2;
  if (i0 >= n_dims) {
    *(__global float *)ELEM_PTR(d, i0, i1, i2, i3) = *(__global const float *)ELEM_PTR(a, i0, i1, i2, i3);
    return;
  }
  if (i0 >= half_dims) return;
  const int p = *(__global const int *)ELEM_PTR(pos, i2, 0, 0, 0);
  const angle_t theta =
      (angle_t)p * (angle_t)freq_scale * pow((angle_t)freq_base, (angle_t)(-2 * i0) / (angle_t)n_dims);
  const float c = (float)cos(theta), s = (float)sin(theta);
  const long j0 = neox ? i0 : 2 * i0;
  const long j1 = neox ? i0 + half_dims : 2 * i0 + 1;
  const float x0 = *(__global const float *)ELEM_PTR(a, j0, i1, i2, i3);
  const float x1 = *(__global const float *)ELEM_PTR(a, j1, i1, i2, i3);
  *(__global float *)ELEM_PTR(d, j0, i1, i2, i3) = x0 * c - x1 * s;
  *(__global float *)ELEM_PTR(d, j1, i1, i2, i3) = x0 * s + x1 * c;
}
