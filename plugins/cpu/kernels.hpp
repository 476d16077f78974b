// kernels.hpp: the op kernels of the cpu plugin and the helpers they share.
//
// A kernel computes one graph node. The backend asks supports() before it
// runs anything, calls prepare() (checks that need the input values, such as
// row ids) on the calling thread, then run(node, ith, nth) on |nth| threads;
// each part computes a disjoint slice of the output, usually a range of rows.
// Every kernel reads its inputs through byte strides (nb), so views,
// permutations and broadcasts work; contiguous F32 data takes faster paths.
#ifndef BP_PLUGIN_CPU_KERNELS_HPP_
#define BP_PLUGIN_CPU_KERNELS_HPP_

#include <cstdint>
#include <cstring>

#include "backplane/plugin.h"
#include "quant_blocks.hpp"
#include "row_math.hpp"

// ISA-specific code: functions with target attributes (AVX2, AVX-512)
// beside their baseline versions, picked at run time by cpu_isa()
// (plugins/common/isa.hpp), which BP_CPU_ISA caps. Not target_clones: an
// ifunc picks by CPU alone and cannot be forced down for tests.

namespace bp::cpu {

// Eight floats in one vector (GCC vector extension): one AVX register in
// the x86-64-v3 clones, two SSE registers in the baseline ones.
typedef float v8f __attribute__((vector_size(32)));

struct op_kernel {
  bool (*supports)(const bp_tensor *node);
  // (optional) Checks input values before the parallel run.
  bp_status (*prepare)(const bp_tensor *node, bp_error *err);
  void (*run)(const bp_tensor *node, int ith, int nth);
  // (optional) Rough operation count, to pick the thread count. Default: elements.
  int64_t (*work)(const bp_tensor *node);
};

// The kernel for |op|, or nullptr (views, leaves, unknown ops).
const op_kernel *find_kernel(bp_op op);
// True when a kernel exists for |t|'s op and handles its types and shapes
// (NULL-safe; checks the sources the op needs are present).
bool node_supported(const bp_tensor *t);

// Per-file entry points (ops_*.cpp), collected by find_kernel (ops.cpp).
bool binary_supports(const bp_tensor *t);
void binary_run(const bp_tensor *t, int ith, int nth);
bool unary_supports(const bp_tensor *t);
void unary_run(const bp_tensor *t, int ith, int nth);
bool reduce_supports(const bp_tensor *t);
void reduce_run(const bp_tensor *t, int ith, int nth);
bool soft_max_supports(const bp_tensor *t);
void soft_max_run(const bp_tensor *t, int ith, int nth);
bool mul_mat_supports(const bp_tensor *t);
void mul_mat_run(const bp_tensor *t, int ith, int nth);
int64_t mul_mat_work(const bp_tensor *t);
// The packed GEMM (ops_matmul_packed.cpp), for products with at least one
// micro-kernel's rows on both sides (and, with AVX-512, at least
// kMinPackedNAvx512 rows of b; with AVX2 and dense rows, kMinPackedNAvx2);
// mul_mat_run hands those to it.
bool mul_mat_packed_suits(const bp_tensor *t);
void mul_mat_packed_run(const bp_tensor *t, int ith, int nth);
constexpr int64_t kMinPackedNAvx512 = 48;
// With AVX2, dense products with fewer rows of b go to the dot-product
// tiles (matmul_dot.hpp): at M = K = 4096 on a 2-core Zen 4 VM they beat
// the 6 x 16 packed GEMM 3x at N = 8, 2x at N = 16, 1.2x at N = 32 and
// 40, and tie it at 48 to 64.
constexpr int64_t kMinPackedNAvx2 = 48;
// The AVX-512 kernels (gemm_avx512.cpp); call only when cpu_isa() is avx512.
// (The dot-product tiles for thin products: matmul_dot.hpp.)
// The broadcast kernel for F32, F16 or BF16 a with kMinBcastN..kMinPackedNAvx512-1 rows
// of b, and kMinBcastNHalves..kMaxBcastNHalves rows where
// avx512_runs_in_halves() (plugins/common/isa.hpp); throws std::bad_alloc
// when its 512 KiB panel cannot be allocated.
bool mul_mat_bcast_avx512_suits(const bp_tensor *t);
void mul_mat_bcast_avx512(const bp_tensor *t, int ith, int nth);
constexpr int64_t kMinBcastN = 24;
constexpr int64_t kMinBcastNHalves = 9, kMaxBcastNHalves = 16;
// The packed GEMM's panels: dst[k * width + j] = element k0 + k of rows[j]
// (dense rows of |type|: F32, or F16 or BF16 widened), for k < kc and j <
// width (width <= 32, rows past |count| are zeros), through 16 x 16
// register transposes.
void pack_rows_avx512(const void *const *rows, bp_type type, int count, int64_t k0, int64_t kc, int width, float *dst);
// The packed GEMM's 12 x 32 micro-kernel (see ops_matmul_packed.cpp).
void gemm_micro_avx512(const float *ap, const float *bp, int64_t kc, float *c, int64_t ldc, int rows, int cols,
                       bool add);
bool get_rows_supports(const bp_tensor *t);
bp_status get_rows_prepare(const bp_tensor *t, bp_error *err);
void get_rows_run(const bp_tensor *t, int ith, int nth);
bool copy_supports(const bp_tensor *t);
void copy_run(const bp_tensor *t, int ith, int nth);
bool concat_supports(const bp_tensor *t);
void concat_run(const bp_tensor *t, int ith, int nth);
bool rope_supports(const bp_tensor *t);
void rope_run(const bp_tensor *t, int ith, int nth);
bool attention_supports(const bp_tensor *t);
void attention_run(const bp_tensor *t, int ith, int nth);
int64_t attention_work(const bp_tensor *t);
bool set_rows_supports(const bp_tensor *t);
bp_status set_rows_prepare(const bp_tensor *t, bp_error *err);
void set_rows_run(const bp_tensor *t, int ith, int nth);
int64_t set_rows_work(const bp_tensor *t);

// ---- helpers -------------------------------------------------------------

inline bool is_float_type(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16; }
inline bool is_known_type(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_I32; }

// True when every dim is at least 1 (no empty or negative extents).
inline bool has_valid_shape(const bp_tensor *t) {
  return t && t->ne[0] >= 1 && t->ne[1] >= 1 && t->ne[2] >= 1 && t->ne[3] >= 1;
}

inline float load_f32(const void *p, bp_type type) {
  switch (type) {
    case BP_TYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return bp_fp16_to_fp32(h);
    }
    case BP_TYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return qblock::bf16_to_f32(h);
    }
    case BP_TYPE_I32: {
      int32_t i;
      std::memcpy(&i, p, sizeof i);
      return static_cast<float>(i);
    }
    default: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
  }
}

// Float to int32 conversion that never hits undefined behaviour (NaN -> 0,
// out of range saturates), rounding toward zero as a C cast does.
inline int32_t f32_to_i32(float v) {
  if (!(v == v)) return 0;
  if (v >= 2147483647.0f) return INT32_MAX;
  if (v <= -2147483648.0f) return INT32_MIN;
  return static_cast<int32_t>(v);
}

inline void store_f32(void *p, bp_type type, float v) {
  switch (type) {
    case BP_TYPE_F16: {
      uint16_t h = bp_fp32_to_fp16(v);
      std::memcpy(p, &h, sizeof h);
      break;
    }
    case BP_TYPE_I32: {
      int32_t i = f32_to_i32(v);
      std::memcpy(p, &i, sizeof i);
      break;
    }
    default:
      std::memcpy(p, &v, sizeof v);
  }
}

// Copies one element between types (exact when the types match).
inline void convert_element(const void *src, bp_type st, void *dst, bp_type dt) {
  if (st == dt) {
    std::memcpy(dst, src, bp_type_size(st));
  } else {
    store_f32(dst, dt, load_f32(src, st));
  }
}

inline char *elem_ptr(const bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// True when |t| has type |type| and its rows are dense along dim 0 (a row
// of one element counts as dense whatever its stride): the kernels that
// read rows in place, with vector loads, ask this.
inline bool rows_dense_as(const bp_tensor *t, bp_type type) {
  return t->type == type && (t->ne[0] == 1 || t->nb[0] == bp_type_size(type));
}

inline char *row_ptr(const bp_tensor *t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// [begin, end) of part |ith| of |nth| over |n| items, in contiguous chunks.
inline void split_range(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
  int64_t chunk = (n + nth - 1) / nth;
  int64_t b = chunk * ith;
  int64_t e = b + chunk;
  *begin = b < n ? b : n;
  *end = e < n ? e : n;
}

// Row |r| (of ne1*ne2*ne3 rows) as indices.
struct row_index {
  int64_t i1, i2, i3;
};
inline row_index decode_row(const bp_tensor *t, int64_t r) {
  row_index ix;
  ix.i1 = r % t->ne[1];
  int64_t q = r / t->ne[1];
  ix.i2 = q % t->ne[2];
  ix.i3 = q / t->ne[2];
  return ix;
}

// True when row elements are dense F32.
inline bool f32_rows(const bp_tensor *t) {
  return t->type == BP_TYPE_F32 && (t->ne[0] == 1 || t->nb[0] == sizeof(float));
}

// Floats of scratch that read_row or out_row needs for rows of |n| elements
// of |t|: none for dense F32 rows, which are used in place. (A row kernel
// runs once per part, and a fused pair in several chunks per part: a dense
// row costs no allocation and no clearing.)
inline size_t scratch_for(const bp_tensor *t, int64_t n) { return f32_rows(t) ? 0u : static_cast<size_t>(n); }

// Row (i1,i2,i3) of |t| as floats: a direct pointer for dense F32 rows, else
// converted into |scratch| (ne[0] floats).
inline const float *read_row(const bp_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *scratch) {
  const char *p = row_ptr(t, i1, i2, i3);
  if (f32_rows(t)) return reinterpret_cast<const float *>(p);
  for (int64_t i = 0; i < t->ne[0]; ++i) scratch[i] = load_f32(p + i * t->nb[0], t->type);
  return scratch;
}

// Where to compute row (i1,i2,i3) of |t|: the row itself when it is dense
// F32, else |scratch|, to be stored with finish_row.
inline float *out_row(const bp_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *scratch) {
  return f32_rows(t) ? reinterpret_cast<float *>(row_ptr(t, i1, i2, i3)) : scratch;
}
inline void finish_row(const bp_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *row) {
  if (f32_rows(t)) return;
  char *p = row_ptr(t, i1, i2, i3);
  for (int64_t i = 0; i < t->ne[0]; ++i) store_f32(p + i * t->nb[0], t->type, row[i]);
}

// How the row kernels store |t|'s rows (row_math.hpp): streamed (with
// non-temporal stores) for dense F32 rows, at least stream_min_bytes() of
// them (row_store.cpp); cached otherwise.
row_store row_store_for(const bp_tensor *t);
// The size of the largest cache, or BP_CPU_STREAM_MIN_BYTES (computed once).
int64_t stream_min_bytes();
// A warning about a BP_CPU_STREAM_MIN_BYTES that is not a byte count; ""
// when there is none. The text lives as long as the process.
const char *stream_env_warning();

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_KERNELS_HPP_
