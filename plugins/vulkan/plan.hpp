// plan.hpp: what the vulkan backend's planners share (internal to the
// plugin). A node's dispatches are planned in steps, one file each:
//
//   ops_support.cpp       which ops run here (op_supported), check_node
//   plan.cpp              op_plan: a fused pair, else the node's planner
//   fusion.cpp            two nodes in one dispatch (plan_fused)
//   plan_elementwise.cpp  the elementwise, row, copy, row-index and rope ops
//   plan_matmul.cpp       MUL_MAT: the shaders and which one runs
//   plan_attention.cpp    ATTENTION
//   dispatch.cpp          bindings (byte windows of the tensors' buffers),
//                         shapes, push constants, dispatch grids
//
// Each dispatch names its shader variant, specialization, bindings and push
// constants (shapes, strides and offsets in elements of each binding). Fast
// paths (texel buffers) are taken when the layout allows; the general
// shaders handle any strides.
#ifndef BP_PLUGIN_VULKAN_PLAN_HPP_
#define BP_PLUGIN_VULKAN_PLAN_HPP_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "op_codes.h"  // shaders/vulkan (the shaders include it too)
#include "vulkan.hpp"

namespace bp::vk {

// ---- the shaders' op codes --------------------------------------------------

// The specialization constant each shader's OP takes for |op|
// (shaders/vulkan/op_codes.h): binary.comp, unary.comp (SCALE, CLAMP and the
// unary ops) and rows.comp (the row reductions and SOFT_MAX).
constexpr uint32_t binary_code(bp_op op) { return static_cast<uint32_t>(op - BP_OP_ADD); }
constexpr uint32_t unary_code(bp_op op) { return static_cast<uint32_t>(op - BP_OP_SCALE); }
constexpr uint32_t rows_code(bp_op op) { return static_cast<uint32_t>(op - BP_OP_SUM_ROWS); }

static_assert(binary_code(BP_OP_ADD) == BP_VK_BINARY_ADD && binary_code(BP_OP_SUB) == BP_VK_BINARY_SUB &&
                  binary_code(BP_OP_MUL) == BP_VK_BINARY_MUL && binary_code(BP_OP_DIV) == BP_VK_BINARY_DIV,
              "binary.comp's OP codes (op_codes.h) no longer match bp_op");
static_assert(unary_code(BP_OP_SCALE) == BP_VK_UNARY_SCALE && unary_code(BP_OP_CLAMP) == BP_VK_UNARY_CLAMP &&
                  unary_code(BP_OP_NEG) == BP_VK_UNARY_NEG && unary_code(BP_OP_ABS) == BP_VK_UNARY_ABS &&
                  unary_code(BP_OP_SQR) == BP_VK_UNARY_SQR && unary_code(BP_OP_SQRT) == BP_VK_UNARY_SQRT &&
                  unary_code(BP_OP_EXP) == BP_VK_UNARY_EXP && unary_code(BP_OP_RELU) == BP_VK_UNARY_RELU &&
                  unary_code(BP_OP_GELU) == BP_VK_UNARY_GELU && unary_code(BP_OP_SILU) == BP_VK_UNARY_SILU &&
                  unary_code(BP_OP_TANH) == BP_VK_UNARY_TANH && unary_code(BP_OP_SIGMOID) == BP_VK_UNARY_SIGMOID,
              "unary.comp's OP codes (op_codes.h) no longer match bp_op");
static_assert(rows_code(BP_OP_SUM_ROWS) == BP_VK_ROWS_SUM_ROWS && rows_code(BP_OP_MEAN) == BP_VK_ROWS_MEAN &&
                  rows_code(BP_OP_ARGMAX) == BP_VK_ROWS_ARGMAX && rows_code(BP_OP_NORM) == BP_VK_ROWS_NORM &&
                  rows_code(BP_OP_RMS_NORM) == BP_VK_ROWS_RMS_NORM && rows_code(BP_OP_SOFT_MAX) == BP_VK_ROWS_SOFT_MAX,
              "rows.comp's OP codes (op_codes.h) no longer match bp_op");

// ---- types ------------------------------------------------------------------

inline bool is_float(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16; }

// The block types the shaders decode (shaders/common/quant.h), Q8_0 to
// BF16; their variants are named "<shader>_<type name>" (CMakeLists.txt).
// BF16 decodes there as blocks of 4 values: rows of another length take the
// general shaders (bf16_in_blocks).
inline bool is_quant(bp_type t) { return t >= BP_TYPE_Q8_0 && t <= BP_TYPE_BF16; }
constexpr int kQuantKinds = BP_TYPE_BF16 - BP_TYPE_Q8_0 + 1;

// Whether the decoders read |a| (quant.glsl): always for the block types;
// BF16 when its rows are whole 4-value blocks and every row starts on a
// word (a block's second word then never reads past the row).
inline bool rows_in_blocks(const bp_tensor *a) {
  if (a->type != BP_TYPE_BF16) return true;
  return a->ne[0] % 4 == 0 && tensor_offset(a) % 4 == 0 && a->nb[1] % 4 == 0 && a->nb[2] % 4 == 0 && a->nb[3] % 4 == 0;
}

// ---- ops_support.cpp ----------------------------------------------------------

// Checks a node before planning: supported, allocated, sources allocated.
bp_status check_node(backend_ctx *be, const bp_tensor *node, bp_error *err);

// ---- dispatch.cpp -----------------------------------------------------------

struct planner {
  backend_ctx *be;
  const bp_tensor *node;
  bp_error *err;
  device_state *dev() const { return be->dev; }
};

// The storage binding of bytes [begin, end) of |b|: its window starts at the
// aligned offset at or below |begin|. False when it would exceed
// maxStorageBufferRange.
bool ssbo_window(const planner &p, vk_buffer *b, size_t begin, size_t end, binding *out);

// Storage-buffer binding of |t|'s bytes: the window starts at the aligned
// offset below the tensor; the element offset inside it goes to the shader.
bp_status bind_ssbo(const planner &p, const bp_tensor *t, binding *out, uint32_t *elem_off);

// Texel binding of |t| through its buffer's whole-buffer view; offset in texels.
bool bind_texel(const bp_tensor *t, bool f16, binding *out, uint32_t *texel_off);

void set_shape(uint32_t ne[4], uint32_t nb[4], const bp_tensor *t, size_t unit);

void add_range(std::vector<byte_range> &v, const bp_tensor *t);

// 1-D work of |n| items in groups of |local| as a 2-D grid (x <= 65535).
void grid_for(dispatch &d, uint64_t n, uint32_t local);

// Invocations of an elementwise shader that takes runs of kRun elements
// along dim 0 of |t| (common.glsl, run_of).
constexpr int64_t kRun = 8;
uint64_t runs_of(const bp_tensor *t);

// A general (storage buffer) dispatch over dst = node, a = src0, b = src1.
bp_status general(const planner &p, const char *variant, const bp_tensor *dst, const bp_tensor *a, const bp_tensor *b,
                  dispatch &d);

void copy_params(dispatch &d, const bp_tensor *node, int from, int count);

// Row shaders: one workgroup per row, sized to one subgroup on CPU-type
// devices (no barrier), else 4 subgroups combined through shared memory.
void row_spec(const planner &p, dispatch &d, uint32_t op);

// Strides of |t| in units of |unit| bytes, when every one divides evenly.
bool strides_in(const bp_tensor *t, size_t unit);

// Where quantized |t| starts, in bytes: its f16 scales need an even offset,
// the shaders' byte offsets 32 bits.
bp_status quant_start(const planner &p, const bp_tensor *t, size_t *start);

// Quantized |t| as a storage binding (the shaders index it in bytes): its
// byte offset inside the binding in a_off, its shape and byte strides in
// a_ne / a_nb.
bp_status bind_quant(const planner &p, const bp_tensor *t, dispatch &d);

// Quantized a through its buffer's R32UI view (offset in bytes from the
// buffer's start) and f32 b through the RGBA32F view (offset and strides in
// texels); false where a view does not reach, or |word_rows| asks for a's
// rows to start on a word (mul_mv_q_tex assumes they do: BP_Q_ROW_ALIGNED)
// and they do not; then the storage variants run.
bool bind_quant_texel(const bp_tensor *a, const bp_tensor *b, bool word_rows, dispatch &d);

// A variant name of a quantized type: the table holds one per type, Q8_0 first.
inline const char *quant_variant(const char *const (&names)[kQuantKinds], bp_type t) { return names[t - BP_TYPE_Q8_0]; }

// ---- plan_elementwise.cpp ---------------------------------------------------

bp_status plan_binary(const planner &p, std::vector<dispatch> &out);
bp_status plan_unary(const planner &p, std::vector<dispatch> &out);
bp_status plan_rows(const planner &p, std::vector<dispatch> &out);
bp_status plan_soft_max(const planner &p, std::vector<dispatch> &out);
bp_status plan_copy(const planner &p, std::vector<dispatch> &out);
bp_status plan_concat(const planner &p, std::vector<dispatch> &out);
bp_status plan_get_rows(const planner &p, std::vector<dispatch> &out);
// SET_ROWS: one dispatch (set_rows.comp) that writes through the node, a
// view of the destination, and writes nothing when an id is out of range.
bp_status plan_set_rows(const planner &p, std::vector<dispatch> &out);
bp_status plan_rope(const planner &p, std::vector<dispatch> &out);

// NORM, RMS_NORM, SOFT_MAX (|op|: the BP_VK_ROWS_* code) on dense f32 rows
// of a multiple of 4: one invocation per row through texel buffers
// (rows.comp, VEC4). |mul|, for a norm, is a MUL of the norm's result that
// runs in the same dispatch (plan_fused checked its shapes); false (nothing
// appended) when a binding does not fit.
bool plan_rows_vec4(const planner &p, uint32_t op, std::vector<dispatch> &out, const bp_tensor *mul = nullptr);

// NORM or RMS_NORM (|op|) and the MUL |mul| of its result (plan_fused checked
// the shapes: a dense product, a dense multiplier of one row or the norm's
// shape) in one dispatch of the general rows shader (MUL_AFTER), the GPU
// form of plan_rows_vec4's. False (nothing appended, *st untouched) when
// the product's binding does not fit; true with *st set otherwise.
bool plan_rows_mul(const planner &p, uint32_t op, const bp_tensor *mul, std::vector<dispatch> &out, bp_status *st);

// ---- plan_matmul.cpp --------------------------------------------------------

bp_status plan_mul_mat(const planner &p, std::vector<dispatch> &out);

// mul_mat_nt reads a in place for any number of columns (8 x 32 tiles), so
// no transposed copy of a is made first: the copy cost more than the
// m-major tile it enabled saved, measured on lavapipe.
bool nt_applies(const planner &p);

// mul_mat_shared.comp's block (64 or 128 square, CMakeLists.txt) for this
// product, or 0 for mul_mat_nt. Where the shaders are GPU-shaped, and
// (unless forced) where M and N fill a 64 block. The 128 block where it
// still gives 128 workgroups, enough to occupy a large GPU; the 64 block
// otherwise. Both thresholds await a GPU to measure them on
// (docs/plugins/vulkan.md).
uint32_t shared_tile_for(const planner &p);

// The product with |after| (plan_fused checked it: the next node, ADD or
// MUL of the product with a tensor of its shape and strides, or SILU of it)
// applied in the same dispatch (epilogue.glsl), on the shader plan_mul_mat
// would pick where that one takes an epilogue: mul_mv_q, mul_mv_wg, or
// mul_mat_nt (which stands in for mul_mv on CPU-type devices, fusion being
// worth more there). *planned is false (nothing appended) where none does
// or a binding does not fit.
bp_status plan_mul_mat_fused(const planner &p, const bp_tensor *after, std::vector<dispatch> &out, bool *planned);

// ---- plan_attention.cpp -----------------------------------------------------

// attention.comp: a workgroup of kAttentionGroup invocations per query row,
// each owning kAttentionSlots output channels (its BLK and ACC_N), so value
// rows of up to 256.
constexpr int64_t kAttentionGroup = 64, kAttentionSlots = 4;

// ATTENTION's checks beyond the common ones (op_supported): f32 q, f32 or
// f16 k and v, dense rows, a contiguous output, Dv within the slots.
bool attention_supported(const device_state *dev, const bp_tensor *node);

bp_status plan_attention(const planner &p, std::vector<dispatch> &out);

// ---- fusion.cpp -------------------------------------------------------------

// Plans |p|'s node and |next| as one dispatch where they fuse (*st: its
// status); false: plan them one by one.
bool plan_fused(const planner &p, const bp_tensor *next, std::vector<dispatch> &out, bp_status *st);

// The profile's name of a fused pair (profile=true).
const char *fused_label(bp_op first, bp_op second);

}  // namespace bp::vk

#endif  // BP_PLUGIN_VULKAN_PLAN_HPP_
