/* tensor.h: what the Backplane core and its plugins share (the plugin's
 * audience, with plugin.h).
 *
 * What it is: status codes, element types, ops, the tensor struct, the
 * device, parameter, buffer-usage and log-level enums the plugin ABI uses,
 * and the inline helpers both sides compute with (bp_type_size,
 * bp_type_row_size, bp_tensor_nbytes, f16 conversion, ...): one source of truth.
 * Pure C99; it declares no function of libbackplane.so, so a plugin built
 * from it and plugin.h links nothing of Backplane.
 * What it is not: the application API. Applications include backplane.h
 * (which includes this header); plugins include plugin.h (which does too).
 */
#ifndef BACKPLANE_TENSOR_H_
#define BACKPLANE_TENSOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes. Shared by the public API and the plugin ABI; never errno.  */

typedef int32_t bp_status;
enum {
  BP_OK = 0,
  BP_ERR_INVALID_ARGUMENT = 1, /* bad shape, type, spec string, handle */
  BP_ERR_NOT_FOUND = 2,        /* no such plugin, device, file, key */
  BP_ERR_UNAVAILABLE = 3,      /* no hardware/driver here; tests skip */
  BP_ERR_INCOMPATIBLE = 4,     /* not a plugin, other ABI, bad table */
  BP_ERR_UNIMPLEMENTED = 5,    /* op or optional entry not supported */
  BP_ERR_OUT_OF_HOST_MEMORY = 6,
  BP_ERR_OUT_OF_DEVICE_MEMORY = 7,
  BP_ERR_DEVICE_LOST = 8,          /* sticky: every later call on the device */
  BP_ERR_ALREADY_EXISTS = 9,       /* duplicate plugin name */
  BP_ERR_FAILED_PRECONDITION = 10, /* wrong state: unload with live objects */
  BP_ERR_RESOURCE_EXHAUSTED = 11,  /* a fixed capacity; message names it */
  BP_ERR_INTERNAL = 12,            /* a bug or an exception inside a plugin */
  BP_STATUS_COUNT_ = 13
};

/* ------------------------------------------------------------------------ */
/* Log levels: one sink for the core and every plugin (backplane.h sets it). */

typedef enum bp_log_level {
  BP_LOG_DEBUG = 0,
  BP_LOG_INFO = 1,
  BP_LOG_WARN = 2,
  BP_LOG_ERROR = 3,
  BP_LOG_OFF = 4
} bp_log_level;

/* ------------------------------------------------------------------------ */
/* Types and tensors.                                                        */

/* Element types. The quantized ones store blocks of values in GGUF's exact
 * byte layout (docs/types.md): a row of a quantized tensor is whole blocks,
 * nb[0] is the size of one block and nb[1] the size of one row. BF16 counts
 * as quantized (a weight encoding with blocks of one value). Values are only
 * appended. */
typedef enum bp_type {
  BP_TYPE_F32 = 0,
  BP_TYPE_F16 = 1,
  BP_TYPE_I32 = 2,
  BP_TYPE_Q8_0 = 3,    /* 32 values: f16 d; int8 qs[32]                         */
  BP_TYPE_Q4_0 = 4,    /* 32 values: f16 d; uint8 qs[16]                        */
  BP_TYPE_Q5_0 = 5,    /* 32 values: f16 d; uint8 qh[4]; uint8 qs[16]           */
  BP_TYPE_Q4_K = 6,    /* 256 values: f16 d, dmin; uint8 scales[12], qs[128]     */
  BP_TYPE_Q6_K = 7,    /* 256 values: uint8 ql[128], qh[64]; int8 scales[16]; f16 d */
  BP_TYPE_Q5_K = 8,    /* 256 values: f16 d, dmin; uint8 scales[12], qh[32], qs[128] */
  BP_TYPE_BF16 = 9,    /* 1 value: the top 16 bits of an f32 (bfloat16)           */
  BP_TYPE_Q4_1 = 10,   /* 32 values: f16 d, m; uint8 qs[16]                      */
  BP_TYPE_Q5_1 = 11,   /* 32 values: f16 d, m; uint8 qh[4]; uint8 qs[16]         */
  BP_TYPE_Q2_K = 12,   /* 256 values: uint8 scales[16], qs[64]; f16 d, dmin      */
  BP_TYPE_Q3_K = 13,   /* 256 values: uint8 hmask[32], qs[64], scales[12]; f16 d */
  BP_TYPE_IQ4_NL = 14, /* 32 values: f16 d; uint8 qs[16] (codebook indices)     */
  BP_TYPE_IQ4_XS = 15, /* 256 values: f16 d; uint16 scales_h; uint8 scales_l[4], qs[128] */
  BP_TYPE_MXFP4 = 16,  /* 32 values: uint8 e (E8M0); uint8 qs[16] (E2M1 codes)   */
  BP_TYPE_COUNT
} bp_type;

typedef enum bp_op {
  BP_OP_NONE = 0, /* a leaf: input or weight */
  /* views: no compute, the result aliases view_src */
  BP_OP_VIEW,
  BP_OP_RESHAPE,
  BP_OP_PERMUTE,
  BP_OP_TRANSPOSE,
  /* binary, src1 broadcast over src0 */
  BP_OP_ADD,
  BP_OP_SUB,
  BP_OP_MUL,
  BP_OP_DIV,
  /* elementwise with parameters */
  BP_OP_SCALE, /* f[0] = scale */
  BP_OP_CLAMP, /* f[0] = min, f[1] = max */
  /* unary */
  BP_OP_NEG,
  BP_OP_ABS,
  BP_OP_SQR,
  BP_OP_SQRT,
  BP_OP_EXP,
  BP_OP_RELU,
  BP_OP_GELU,
  BP_OP_SILU,
  BP_OP_TANH,
  BP_OP_SIGMOID,
  /* reductions over dim 0 */
  BP_OP_SUM_ROWS,
  BP_OP_MEAN,
  BP_OP_ARGMAX,
  BP_OP_NORM,     /* f[0] = eps */
  BP_OP_RMS_NORM, /* f[0] = eps */
  BP_OP_SOFT_MAX, /* f[0] = scale; src1 = optional mask */
  /* the rest */
  BP_OP_MUL_MAT,
  BP_OP_GET_ROWS,
  BP_OP_CPY,       /* writes src0 into src1 (a view of src1 is the result) */
  BP_OP_CONT,      /* contiguous copy, may convert type */
  BP_OP_CONCAT,    /* i[0] = dim */
  BP_OP_ROPE,      /* i[0] = n_dims, i[1] = mode, f[2] = freq_base, f[3] = freq_scale; src1 = positions,
                      src2 = optional frequency factors */
  BP_OP_ATTENTION, /* f[0] = scale; src0 = q, src1 = k, src2 = v, src3 = optional mask (plugin ABI >= 1.4) */
  BP_OP_SET_ROWS,  /* writes the rows of src0 into src1 at the rows src2 (i32) names; the result is a view of
                      src1, as CPY's is (plugin ABI >= 1.4) */
  BP_OP_COUNT
} bp_op;

/* ROPE modes. */
enum { BP_ROPE_NORMAL = 0, BP_ROPE_NEOX = 2 };

/* Tensor flags. */
enum {
  BP_TENSOR_FLAG_INPUT = 1u << 0,  /* set from outside before each compute */
  BP_TENSOR_FLAG_OUTPUT = 1u << 1, /* read after compute: never reused */
  BP_TENSOR_FLAG_PARAM = 1u << 2   /* a weight */
};

#define BP_MAX_DIMS 4
#define BP_MAX_SRC 4
#define BP_MAX_OP_PARAMS 16 /* 32-bit words */
#define BP_MAX_NAME 64

struct bp_buffer;

/* A tensor: up to 4 dimensions, ne[0] the fastest, byte strides nb[]. The
 * struct is part of the plugin ABI (fields are only appended within a major).
 * Applications read it freely and change it only through the API. */
typedef struct bp_tensor {
  uint32_t struct_size; /* sizeof(bp_tensor) as built by the core */
  bp_type type;
  int64_t ne[BP_MAX_DIMS]; /* elements per dimension (1 for unused dims) */
  size_t nb[BP_MAX_DIMS];  /* bytes between neighbours in each dimension */
  bp_op op;
  int32_t op_params[BP_MAX_OP_PARAMS]; /* see bp_op; floats are bit-cast */
  uint32_t flags;                      /* BP_TENSOR_FLAG_* */
  struct bp_tensor *src[BP_MAX_SRC];
  struct bp_tensor *view_src; /* the tensor whose memory a view aliases */
  size_t view_offs;           /* byte offset of a view inside view_src */
  /* Memory. data is base + offset inside |buffer|: a host pointer for host
   * buffers, an opaque address for device buffers (never dereferenced). */
  void *data;
  struct bp_buffer *buffer; /* core handle; NULL until allocated */
  void *buffer_ctx;         /* the plugin's own buffer object (its |ctx|) */
  void *extra;              /* owned by the buffer's plugin (init_tensor) */
  char name[BP_MAX_NAME];
} bp_tensor;

/* Inline helpers shared by the core and plugins: one source of truth. */
/* Values per block: 1 for f32/f16/i32/bf16, 32 for Q8_0/Q4_0/Q5_0/Q4_1/Q5_1/
 * IQ4_NL/MXFP4, 256 for the K types and IQ4_XS. */
static inline int64_t bp_type_block_size(bp_type type) {
  switch (type) {
    case BP_TYPE_Q8_0:
    case BP_TYPE_Q4_0:
    case BP_TYPE_Q5_0:
    case BP_TYPE_Q4_1:
    case BP_TYPE_Q5_1:
    case BP_TYPE_IQ4_NL:
    case BP_TYPE_MXFP4:
      return 32;
    case BP_TYPE_Q4_K:
    case BP_TYPE_Q5_K:
    case BP_TYPE_Q6_K:
    case BP_TYPE_Q2_K:
    case BP_TYPE_Q3_K:
    case BP_TYPE_IQ4_XS:
      return 256;
    default:
      return 1;
  }
}
/* Bytes per block (per element for f32/f16/i32/bf16); 0 for an unknown type. */
static inline size_t bp_type_size(bp_type type) {
  switch (type) {
    case BP_TYPE_F32:
      return 4;
    case BP_TYPE_F16:
      return 2;
    case BP_TYPE_I32:
      return 4;
    case BP_TYPE_Q8_0:
      return 34;
    case BP_TYPE_Q4_0:
      return 18;
    case BP_TYPE_Q5_0:
      return 22;
    case BP_TYPE_Q4_K:
      return 144;
    case BP_TYPE_Q6_K:
      return 210;
    case BP_TYPE_Q5_K:
      return 176;
    case BP_TYPE_BF16:
      return 2;
    case BP_TYPE_Q4_1:
      return 20;
    case BP_TYPE_Q5_1:
      return 24;
    case BP_TYPE_Q2_K:
      return 84;
    case BP_TYPE_Q3_K:
      return 110;
    case BP_TYPE_IQ4_NL:
      return 18;
    case BP_TYPE_IQ4_XS:
      return 136;
    case BP_TYPE_MXFP4:
      return 17;
    default:
      return 0;
  }
}
/* Bytes of a dense row of |n| values (n a multiple of the block size). */
static inline size_t bp_type_row_size(bp_type type, int64_t n) {
  return bp_type_size(type) * (size_t)n / (size_t)bp_type_block_size(type);
}
#ifndef BP_NO_DEPRECATED
/* Renamed before 0.3 (removed in 0.3): use bp_type_row_size. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("use bp_type_row_size")))
#endif
static inline size_t
bp_row_size(bp_type type, int64_t n) {
  return bp_type_row_size(type, n);
}
#endif
/* True for the weight encodings (every type from Q8_0 on): read only by
 * MUL_MAT as a and GET_ROWS as the table, written by CPY and CONT from f32. */
static inline bool bp_type_is_quantized(bp_type type) {
  return (int)type >= (int)BP_TYPE_Q8_0 && (int)type < (int)BP_TYPE_COUNT;
}
static inline const char *bp_type_name(bp_type type) {
  switch (type) {
    case BP_TYPE_F32:
      return "f32";
    case BP_TYPE_F16:
      return "f16";
    case BP_TYPE_I32:
      return "i32";
    case BP_TYPE_Q8_0:
      return "q8_0";
    case BP_TYPE_Q4_0:
      return "q4_0";
    case BP_TYPE_Q5_0:
      return "q5_0";
    case BP_TYPE_Q4_K:
      return "q4_K";
    case BP_TYPE_Q6_K:
      return "q6_K";
    case BP_TYPE_Q5_K:
      return "q5_K";
    case BP_TYPE_BF16:
      return "bf16";
    case BP_TYPE_Q4_1:
      return "q4_1";
    case BP_TYPE_Q5_1:
      return "q5_1";
    case BP_TYPE_Q2_K:
      return "q2_K";
    case BP_TYPE_Q3_K:
      return "q3_K";
    case BP_TYPE_IQ4_NL:
      return "iq4_nl";
    case BP_TYPE_IQ4_XS:
      return "iq4_xs";
    case BP_TYPE_MXFP4:
      return "mxfp4";
    default:
      return "?";
  }
}
static inline int64_t bp_tensor_nelements(const bp_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
static inline int64_t bp_tensor_nrows(const bp_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }
/* Bytes spanned from the first to one past the last element (0 if empty).
 * A row of a quantized tensor spans ne[0] / block size blocks of nb[0]. */
static inline size_t bp_tensor_nbytes(const bp_tensor *t) {
  const int64_t blck = bp_type_block_size(t->type);
  size_t n;
  if (t->ne[0] <= 0) return 0;
  n = blck == 1 ? bp_type_size(t->type) + (size_t)(t->ne[0] - 1) * t->nb[0] : (size_t)(t->ne[0] / blck) * t->nb[0];
  for (int i = 1; i < BP_MAX_DIMS; ++i) {
    if (t->ne[i] <= 0) return 0;
    n += (size_t)(t->ne[i] - 1) * t->nb[i];
  }
  return n;
}
/* True when elements (blocks, for quantized types) are densely packed in the
 * natural order. */
static inline bool bp_tensor_is_contiguous(const bp_tensor *t) {
  size_t next = bp_type_size(t->type);
  if (t->ne[0] != 1 && t->nb[0] != next) return false;
  next = bp_type_row_size(t->type, t->ne[0]);
  for (int i = 1; i < BP_MAX_DIMS; ++i) {
    if (t->ne[i] != 1 && t->nb[i] != next) return false;
    next *= (size_t)t->ne[i];
  }
  return true;
}
/* True when every row (dim 0) is dense, whatever the outer strides. */
static inline bool bp_tensor_rows_contiguous(const bp_tensor *t) {
  return (t->ne[0] == 1 && !bp_type_is_quantized(t->type)) || t->nb[0] == bp_type_size(t->type);
}
static inline bool bp_tensor_same_shape(const bp_tensor *a, const bp_tensor *b) {
  return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}
/* Views and leaves compute nothing; every backend skips them. */
static inline bool bp_op_is_view(bp_op op) {
  return op == BP_OP_NONE || op == BP_OP_VIEW || op == BP_OP_RESHAPE || op == BP_OP_PERMUTE || op == BP_OP_TRANSPOSE;
}
static inline float bp_tensor_param_f32(const bp_tensor *t, int i) {
  union {
    int32_t i;
    float f;
  } u;
  u.i = t->op_params[i];
  return u.f;
}
static inline int32_t bp_tensor_param_i32(const bp_tensor *t, int i) { return t->op_params[i]; }

/* IEEE half <-> float, round-to-nearest-even; exact for every finite half. */
static inline float bp_fp16_to_fp32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else { /* subnormal half: normalise */
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  union {
    uint32_t u;
    float f;
  } v;
  v.u = bits;
  return v.f;
}
static inline uint16_t bp_fp32_to_fp16(float f) {
  union {
    float f;
    uint32_t u;
  } v;
  v.f = f;
  uint32_t x = v.u, sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (ax < 0x38800000u) {                                   /* subnormal or zero half */
    if (ax < 0x33000000u) return (uint16_t)sign;
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ax + 0x0fffu + ((ax >> 13) & 1u) - 0x38000000u; /* rebias 127 -> 15, round */
  return (uint16_t)(sign | (r >> 13));
}

/* ------------------------------------------------------------------------ */
/* Devices and plugin parameters (plugin.h reports them, backplane.h lists). */

typedef enum bp_device_type {
  BP_DEVICE_TYPE_CPU = 0,
  BP_DEVICE_TYPE_GPU = 1,
  BP_DEVICE_TYPE_IGPU = 2,
  BP_DEVICE_TYPE_ACCEL = 3
} bp_device_type;

enum {
  BP_DEVICE_CAP_ASYNC = 1u << 0,                /* async set/get/copy */
  BP_DEVICE_CAP_EVENTS = 1u << 1,               /* events */
  BP_DEVICE_CAP_HOST_BUFFER = 1u << 2,          /* pinned host buffer type */
  BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR = 1u << 3, /* wrap user memory */
  BP_DEVICE_CAP_HOST_MEMORY = 1u << 4           /* default buffers are host memory */
};

typedef enum bp_param_type { BP_PARAM_INT = 0, BP_PARAM_BOOL = 1, BP_PARAM_STRING = 2 } bp_param_type;

/* One parameter a plugin accepts in a spec string. Strings are borrowed from
 * the plugin; valid while it is loaded. */
typedef struct bp_param_info {
  uint32_t struct_size;
  const char *name; /* [a-z0-9_]+ */
  bp_param_type type;
  const char *default_value;    /* as text, "" if none */
  const char *doc;              /* one line */
  int64_t min_value, max_value; /* BP_PARAM_INT only; inclusive */
} bp_param_info;

/* What a buffer holds; the scheduler runs ops on weights where they live. */
typedef enum bp_buffer_usage {
  BP_BUFFER_USAGE_ANY = 0,
  BP_BUFFER_USAGE_WEIGHTS = 1, /* the scheduler runs ops on these where they live */
  BP_BUFFER_USAGE_COMPUTE = 2
} bp_buffer_usage;

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_TENSOR_H_ */
