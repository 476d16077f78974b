// common.cl: prepended to every op family's source.
//
// A tensor is passed as four kernel arguments: the cl_mem, the byte offset of
// the tensor inside it, its extents and its byte strides (ne, nb as long4),
// exactly what the host's bp_tensor holds, so views, permutes and broadcasts
// need no copies. Element types are compile-time constants (-D build
// options): 0 = f32, 1 = f16 (storage only: vload_half / vstore_half, core
// OpenCL, math in f32), 2 = i32, 3 = bf16 (storage only: the top half of an
// f32, widened by a shift; stored rounded to nearest even).

#define T_F32 0
#define T_F16 1
#define T_I32 2
#define T_BF16 3

#define TENSOR(n) __global char *n##_p, ulong n##_off, long4 n##_ne, long4 n##_nb
#define TENSOR_ARGS(n) n##_p, n##_off, n##_ne, n##_nb
#define ELEM_PTR(n, i0, i1, i2, i3) \
  (n##_p + n##_off + (i0) * n##_nb.x + (i1) * n##_nb.y + (i2) * n##_nb.z + (i3) * n##_nb.w)

#define TYPE_SIZE(T) ((T) == T_F16 || (T) == T_BF16 ? 2 : 4)
#define LOAD_AS(T, p)                                                    \
  ((T) == T_F16    ? vload_half(0, (__global const half *)(p))          \
   : (T) == T_BF16 ? as_float((uint)*(__global const ushort *)(p) << 16) \
                   : *(__global const float *)(p))
#define STORE_AS(T, p, v)                                        \
  do {                                                           \
    if ((T) == T_F16)                                            \
      vstore_half_rte((v), 0, (__global half *)(p));             \
    else if ((T) == T_BF16)                                      \
      *(__global ushort *)(p) = bf16_bits_rne(v);                \
    else                                                         \
      *(__global float *)(p) = (v);                              \
  } while (0)

// The bfloat16 nearest to |v| (ties to even); a NaN stays a quiet NaN of
// its sign instead of rounding into infinity.
inline ushort bf16_bits_rne(float v) {
  const uint u = as_uint(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)((u >> 16) | 0x40u);
  return (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Row r of a tensor of extents ne -> (i1, i2, i3).
#define ROW_INDEX(ne, r, i1, i2, i3)      \
  const long i1 = (r) % (ne).y;           \
  const long i2 = ((r) / (ne).y) % (ne).z; \
  const long i3 = (r) / ((ne).y * (ne).z)

inline float hsum16(float16 v) {
  float8 a = v.lo + v.hi;
  float4 b = a.lo + a.hi;
  float2 c = b.lo + b.hi;
  return c.x + c.y;
}

inline float hmax16(float16 v) {
  float8 a = fmax(v.lo, v.hi);
  float4 b = fmax(a.lo, a.hi);
  float2 c = fmax(b.lo, b.hi);
  return fmax(c.x, c.y);
}
