// copy.cl: CPY and CONT (any strides, f32 <-> f16, i32 -> i32), GET_ROWS
// and CONCAT. Build options: -DS_TYPE, -DD_TYPE (0 f32, 1 f16, 2 i32).
// Same-type copies move the bits; f32 <-> f16 converts (round to nearest even).

#ifndef S_TYPE
#define S_TYPE T_F32
#endif
#ifndef D_TYPE
#define D_TYPE T_F32
#endif

inline void copy_elem(__global const char *s, __global char *d) {
#if S_TYPE == D_TYPE && (S_TYPE == T_F16 || S_TYPE == T_BF16)
  *(__global ushort *)d = *(__global const ushort *)s;
#elif S_TYPE == D_TYPE
  *(__global uint *)d = *(__global const uint *)s;
#elif S_TYPE == T_I32 || D_TYPE == T_I32
  *(__global int *)d = (int)LOAD_AS(S_TYPE, s); /* not reached: the host never asks for it */
#else
  STORE_AS(D_TYPE, d, LOAD_AS(S_TYPE, s));
#endif
}

// Source and destination have the same ne0: row r of one is row r of the other.
__kernel void copy_rows(TENSOR(s), TENSOR(d)) {
  const long i0 = get_global_id(0);
  if (i0 >= d_ne.x) return;
  const long r = get_global_id(1);
  ROW_INDEX(s_ne, r, s1, s2, s3);
  ROW_INDEX(d_ne, r, d1, d2, d3);
  copy_elem(ELEM_PTR(s, i0, s1, s2, s3), ELEM_PTR(d, i0, d1, d2, d3));
}

// Any shapes with the same element count: element e in logical order.
__kernel void copy_flat(TENSOR(s), TENSOR(d)) {
  const long e = get_global_id(0);
  if (e >= d_ne.x * d_ne.y * d_ne.z * d_ne.w) return;
  const long s0 = e % s_ne.x, sr = e / s_ne.x;
  ROW_INDEX(s_ne, sr, s1, s2, s3);
  const long d0 = e % d_ne.x, dr = e / d_ne.x;
  ROW_INDEX(d_ne, dr, d1, d2, d3);
  copy_elem(ELEM_PTR(s, s0, s1, s2, s3), ELEM_PTR(d, d0, d1, d2, d3));
}

// d(:, n, i2, i3) = s(:, ids(n, i2, i3), i2, i3), ids and s repeating over
// dims 2 and 3. The host checked every id; out-of-range ids are clamped so a
// bad one can never read outside s.
__kernel void get_rows(TENSOR(s), TENSOR(ids), TENSOR(d)) {
  const long i0 = get_global_id(0);
  if (i0 >= d_ne.x) return;
  const long r = get_global_id(1);
  ROW_INDEX(d_ne, r, n, i2, i3);
  int id = *(__global const int *)ELEM_PTR(ids, n, i2 % ids_ne.y, i3 % ids_ne.z, 0);
  id = clamp(id, 0, (int)s_ne.y - 1);
  copy_elem(ELEM_PTR(s, i0, id, i2 % s_ne.z, i3 % s_ne.w), ELEM_PTR(d, i0, n, i2, i3));
}

// d(:, ids(n), i2, i3) = s(:, n, i2, i3): SET_ROWS, d being the destination
// itself. The host checked every id; an out-of-range one writes nothing.
__kernel void set_rows(TENSOR(s), TENSOR(ids), TENSOR(d)) {
  const long i0 = get_global_id(0);
  if (i0 >= s_ne.x) return;
  const long r = get_global_id(1);
  ROW_INDEX(s_ne, r, n, i2, i3);
  const int id = *(__global const int *)ELEM_PTR(ids, n, 0, 0, 0);
  if (id < 0 || id >= d_ne.y) return;
  copy_elem(ELEM_PTR(s, i0, n, i2, i3), ELEM_PTR(d, i0, id, i2, i3));
}

__kernel void concat(TENSOR(a), TENSOR(b), TENSOR(d), int dim) {
  const long i0 = get_global_id(0);
  if (i0 >= d_ne.x) return;
  const long r = get_global_id(1);
  ROW_INDEX(d_ne, r, i1, i2, i3);
  long4 i = (long4)(i0, i1, i2, i3);
  __global char *out = ELEM_PTR(d, i0, i1, i2, i3);
  const long an = dim == 0 ? a_ne.x : dim == 1 ? a_ne.y : dim == 2 ? a_ne.z : a_ne.w;
  const long at = dim == 0 ? i.x : dim == 1 ? i.y : dim == 2 ? i.z : i.w;
  if (at < an) {
    copy_elem(ELEM_PTR(a, i.x, i.y, i.z, i.w), out);
    return;
  }
  if (dim == 0) i.x -= an;
  else if (dim == 1) i.y -= an;
  else if (dim == 2) i.z -= an;
  else i.w -= an;
  copy_elem(ELEM_PTR(b, i.x, i.y, i.z, i.w), out);
}
