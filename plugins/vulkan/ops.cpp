// ops.cpp: which ops the vulkan backend runs (supports_op) and, per node,
// the dispatches that compute it: shader variant, specialization, bindings
// (byte windows of the tensors' buffers) and push constants (shapes, strides
// and offsets in elements of each binding). Fast paths (texel buffers) are
// taken when the layout allows; the general shaders handle any strides.
#include <algorithm>
#include <cstring>

#include "plugins/common/op_family.hpp"
#include "vulkan.hpp"

namespace bp::vk {
namespace {

bool is_float(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16; }

// The quantized types the shaders decode (shaders/common/quant.h); their
// variants are named "<shader>_<type name>" (CMakeLists.txt). Q5_K and BF16
// (values past Q6_K) have no shaders: their nodes are declined and the
// scheduler runs them elsewhere.
bool is_quant(bp_type t) { return t >= BP_TYPE_Q8_0 && t <= BP_TYPE_Q6_K; }

bool uses_f16(const bp_tensor *node) {
  if (node->type == BP_TYPE_F16) return true;
  for (const bp_tensor *s : node->src)
    if (s && s->type == BP_TYPE_F16) return true;
  return false;
}

// Every tensor must fit one storage-buffer binding and 32-bit indexing.
bool fits(const device_state *dev, const bp_tensor *t) {
  if (!t) return true;
  const uint64_t limit = dev->props.limits.maxStorageBufferRange;
  const uint64_t align = dev->props.limits.minStorageBufferOffsetAlignment;
  if (bp_tensor_nbytes(t) + align > limit) return false;
  if (static_cast<uint64_t>(bp_tensor_nelements(t)) >= (1ull << 31)) return false;
  for (int i = 0; i < 4; ++i)
    if (t->nb[i] / bp_type_size(t->type) >= (1ull << 31)) return false;
  return true;
}

}  // namespace

bool op_supported(const device_state *dev, const backend_options &opt, const bp_tensor *node) {
  const bp_tensor *a = node->src[0], *b = node->src[1];
  if (!a) return false;
  if (uses_f16(node) && !opt.f16) return false;
  for (const bp_tensor *t : {node, a, b})
    if (!fits(dev, t)) return false;
  switch (plugins::family_of(node->op)) {
    case plugins::op_family::binary:
      return b && is_float(a->type) && is_float(b->type) && node->type == a->type;
    case plugins::op_family::scalar:
    case plugins::op_family::unary:
      return is_float(a->type) && node->type == a->type;
    case plugins::op_family::row_reduce:
      return dev->subgroup_arith && a->type == BP_TYPE_F32;
    case plugins::op_family::other:
      break;
  }
  switch (node->op) {
    case BP_OP_SOFT_MAX:
      return dev->subgroup_arith && a->type == BP_TYPE_F32 && (!b || is_float(b->type));
    case BP_OP_MUL_MAT:
      // Quantized weights: mul_mv_q's batches are one dispatch dimension.
      return b && (is_float(a->type) || (is_quant(a->type) && node->ne[2] * node->ne[3] <= 65535)) &&
             b->type == BP_TYPE_F32 && node->type == BP_TYPE_F32 && bp_tensor_rows_contiguous(a) &&
             bp_tensor_rows_contiguous(b);
    case BP_OP_GET_ROWS:
      return b && b->type == BP_TYPE_I32 && (is_float(a->type) || a->type == BP_TYPE_I32 || is_quant(a->type)) &&
             (node->type == (a->type == BP_TYPE_I32 ? BP_TYPE_I32 : BP_TYPE_F32));
    case BP_OP_CPY:
    case BP_OP_CONT:
      return (is_float(a->type) && is_float(node->type)) || (a->type == BP_TYPE_I32 && node->type == BP_TYPE_I32);
    case BP_OP_CONCAT:
      return b && !is_quant(a->type) && a->type == b->type && node->type == a->type &&
             bp_tensor_param_i32(node, 0) >= 0 && bp_tensor_param_i32(node, 0) < 4;
    case BP_OP_ROPE: {
      const int32_t n_dims = bp_tensor_param_i32(node, 0), mode = bp_tensor_param_i32(node, 1);
      return b && a->type == BP_TYPE_F32 && b->type == BP_TYPE_I32 && n_dims >= 2 && n_dims % 2 == 0 &&
             n_dims <= a->ne[0] && (mode == BP_ROPE_NORMAL || mode == BP_ROPE_NEOX);
    }
    default:
      return false;
  }
}

namespace {

struct planner {
  backend_ctx *be;
  const bp_tensor *node;
  bp_error *err;
  device_state *dev() const { return be->dev; }
};

// The storage binding of bytes [begin, end) of |b|: its window starts at the
// aligned offset at or below |begin|. False when it would exceed
// maxStorageBufferRange.
bool ssbo_window(const planner &p, vk_buffer *b, size_t begin, size_t end, binding *out) {
  const size_t align = p.dev()->props.limits.minStorageBufferOffsetAlignment;
  const size_t off = begin / align * align;
  const size_t range = std::min((end - off + 3) / 4 * 4, b->vk_size - off);
  if (range > p.dev()->props.limits.maxStorageBufferRange) return false;
  out->buf = b;
  out->offset = off;
  out->range = std::max<size_t>(range, 4);
  return true;
}

// Storage-buffer binding of |t|'s bytes: the window starts at the aligned
// offset below the tensor; the element offset inside it goes to the shader.
bp_status bind_ssbo(const planner &p, const bp_tensor *t, binding *out, uint32_t *elem_off) {
  auto *b = static_cast<vk_buffer *>(t->buffer_ctx);
  if (!b || !t->data) return bp_error_setf(p.err, BP_ERR_INVALID_ARGUMENT, "tensor '%s' has no memory", t->name);
  if (b->dev != p.dev())
    return bp_error_setf(p.err, BP_ERR_INVALID_ARGUMENT, "tensor '%s' lives on another device", t->name);
  const size_t start = tensor_offset(t), len = bp_tensor_nbytes(t);
  if (!ssbo_window(p, b, start, start + len, out))
    return bp_error_setf(p.err, BP_ERR_INVALID_ARGUMENT,
                         "tensor '%s' spans %zu bytes, more than one binding may (maxStorageBufferRange %u)", t->name,
                         len, p.dev()->props.limits.maxStorageBufferRange);
  *elem_off = static_cast<uint32_t>((start - out->offset) / bp_type_size(t->type));
  return BP_OK;
}

// Texel binding of |t| through its buffer's whole-buffer view; offset in texels.
bool bind_texel(const bp_tensor *t, bool f16, binding *out, uint32_t *texel_off) {
  auto *b = static_cast<vk_buffer *>(t->buffer_ctx);
  if (!b) return false;
  VkBufferView v = f16 ? b->view_f16 : b->view_f32;
  const size_t texel = f16 ? 8 : 16;
  const size_t start = tensor_offset(t);
  if (!v || start % texel || start + bp_tensor_nbytes(t) > b->vk_size / texel * texel) return false;
  out->buf = b;
  out->view = v;
  *texel_off = static_cast<uint32_t>(start / texel);
  return true;
}

void set_shape(uint32_t ne[4], uint32_t nb[4], const bp_tensor *t, size_t unit) {
  for (int i = 0; i < 4; ++i) {
    ne[i] = static_cast<uint32_t>(t->ne[i]);
    nb[i] = static_cast<uint32_t>(t->nb[i] / unit);
  }
}

void add_range(std::vector<byte_range> &v, const bp_tensor *t) {
  auto *b = static_cast<vk_buffer *>(t->buffer_ctx);
  const size_t start = tensor_offset(t);
  v.push_back(byte_range{b->buffer, start, start + bp_tensor_nbytes(t)});
}

// 1-D work of |n| items in groups of |local| as a 2-D grid (x <= 65535).
void grid_for(dispatch &d, uint64_t n, uint32_t local) {
  const uint64_t groups = std::max<uint64_t>(1, (n + local - 1) / local);
  const uint64_t gx = std::min<uint64_t>(groups, 65535);
  d.groups[0] = static_cast<uint32_t>(gx);
  d.groups[1] = static_cast<uint32_t>((groups + gx - 1) / gx);
  d.groups[2] = 1;
}

// Invocations of an elementwise shader that takes runs of kRun elements
// along dim 0 of |t| (common.glsl, run_of).
constexpr int64_t kRun = 8;
uint64_t runs_of(const bp_tensor *t) {
  return static_cast<uint64_t>((t->ne[0] + kRun - 1) / kRun) * static_cast<uint64_t>(bp_tensor_nrows(t));
}

// A general (storage buffer) dispatch over dst = node, a = src0, b = src1.
bp_status general(const planner &p, const char *variant, const bp_tensor *dst, const bp_tensor *a, const bp_tensor *b,
                  dispatch &d) {
  d.variant = variant;
  d.layout = layout_kind::ssbo;
  if (bp_status st = bind_ssbo(p, dst, &d.bind[2], &d.pc.d_off); st != BP_OK) return st;
  set_shape(d.pc.d_ne, d.pc.d_nb, dst, bp_type_size(dst->type));
  add_range(d.writes, dst);
  if (a) {
    if (bp_status st = bind_ssbo(p, a, &d.bind[0], &d.pc.a_off); st != BP_OK) return st;
    set_shape(d.pc.a_ne, d.pc.a_nb, a, bp_type_size(a->type));
    add_range(d.reads, a);
  }
  if (b) {
    if (bp_status st = bind_ssbo(p, b, &d.bind[1], &d.pc.b_off); st != BP_OK) return st;
    set_shape(d.pc.b_ne, d.pc.b_nb, b, bp_type_size(b->type));
    add_range(d.reads, b);
  }
  return BP_OK;
}

void copy_params(dispatch &d, const bp_tensor *node, int from, int count) {
  for (int i = 0; i < count; ++i) d.pc.p[i] = static_cast<uint32_t>(node->op_params[from + i]);
}

// Row shaders: one workgroup per row, sized to one subgroup on CPU-type
// devices (no barrier), else 4 subgroups combined through shared memory.
void row_spec(const planner &p, dispatch &d, uint32_t op) {
  const bool single = p.dev()->type == BP_DEVICE_TYPE_CPU;
  const uint32_t sg = p.dev()->subgroup_size;
  d.spec[0] = single ? sg : std::min<uint32_t>(sg * 4, 256);
  d.spec[1] = single ? 0 : 1;
  d.spec[2] = op;
  d.n_spec = 3;
}

bool contiguous_all(std::initializer_list<const bp_tensor *> ts) {
  for (const bp_tensor *t : ts)
    if (!bp_tensor_is_contiguous(t)) return false;
  return true;
}

bp_status plan_binary(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  dispatch d;
  d.spec[0] = static_cast<uint32_t>(n->op - BP_OP_ADD);
  d.n_spec = 1;
  const int64_t count = bp_tensor_nelements(n);
  const bool row_bias = b->ne[0] == a->ne[0] && bp_tensor_nrows(b) == 1;
  if (p.be->opt.fast_paths && n->type == BP_TYPE_F32 && a->type == BP_TYPE_F32 && b->type == BP_TYPE_F32 &&
      count % 4 == 0 && a->ne[0] % 4 == 0 && contiguous_all({n, a, b}) && (bp_tensor_same_shape(a, b) || row_bias) &&
      bind_texel(a, false, &d.bind[0], &d.pc.a_off) && bind_texel(b, false, &d.bind[1], &d.pc.b_off) &&
      bind_texel(n, false, &d.bind[2], &d.pc.d_off)) {
    d.variant = "binary_vec4";
    d.layout = layout_kind::texel;
    d.spec[1] = bp_tensor_same_shape(a, b) ? 0 : 1;
    d.n_spec = 2;
    d.pc.n = static_cast<uint32_t>(count / 4);
    d.pc.p[0] = static_cast<uint32_t>(bp_tensor_nelements(b) / 4);
    add_range(d.reads, a);
    add_range(d.reads, b);
    add_range(d.writes, n);
    grid_for(d, (d.pc.n + 3) / 4, 256);
    out.push_back(std::move(d));
    return BP_OK;
  }
  const char *variant = a->type == BP_TYPE_F32 ? (b->type == BP_TYPE_F32 ? "binary_f32_f32" : "binary_f32_f16")
                                               : (b->type == BP_TYPE_F32 ? "binary_f16_f32" : "binary_f16_f16");
  if (bp_status st = general(p, variant, n, a, b, d); st != BP_OK) return st;
  d.pc.n = static_cast<uint32_t>(runs_of(n));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_unary(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0];
  dispatch d;
  d.spec[0] = static_cast<uint32_t>(n->op - BP_OP_SCALE);
  d.n_spec = 1;
  if (bp_status st = general(p, a->type == BP_TYPE_F32 ? "unary_f32" : "unary_f16", n, a, nullptr, d); st != BP_OK)
    return st;
  copy_params(d, n, 0, 2);
  d.pc.n = static_cast<uint32_t>(runs_of(n));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

// Strides of |t| in units of |unit| bytes, when every one divides evenly.
bool strides_in(const bp_tensor *t, size_t unit) {
  for (int i = 1; i < 4; ++i)
    if (t->ne[i] > 1 && t->nb[i] % unit) return false;
  return true;
}

// NORM, RMS_NORM, SOFT_MAX on dense f32 rows of a multiple of 4: one
// invocation per row through texel buffers (rows.comp, VEC4). |mul|, for a
// norm, is a MUL of the norm's result that runs in the same dispatch
// (plan_fused checked its shapes); false (nothing appended) when a binding
// does not fit.
bool plan_rows_vec4(const planner &p, uint32_t op, std::vector<dispatch> &out, const bp_tensor *mul = nullptr) {
  const bp_tensor *n = p.node, *a = n->src[0], *mask = op == 5 ? n->src[1] : nullptr;
  if (!p.be->opt.fast_paths || a->ne[0] % 4 || !bp_tensor_is_contiguous(a) || !bp_tensor_is_contiguous(n)) return false;
  if (mask && (mask->type != BP_TYPE_F32 || !bp_tensor_rows_contiguous(mask) || !strides_in(mask, 16))) return false;
  dispatch d;
  d.variant = "rows_vec4";
  d.layout = layout_kind::texel;
  d.spec[0] = op;
  d.n_spec = 1;
  if (!bind_texel(a, false, &d.bind[0], &d.pc.a_off) || !bind_texel(n, false, &d.bind[2], &d.pc.d_off)) return false;
  if (mask && !bind_texel(mask, false, &d.bind[1], &d.pc.b_off)) return false;
  set_shape(d.pc.a_ne, d.pc.a_nb, a, 16);
  for (int i = 0; i < 4; ++i) d.pc.b_ne[i] = 1;
  if (mask) set_shape(d.pc.b_ne, d.pc.b_nb, mask, 16);
  copy_params(d, n, 0, 1);
  d.pc.p[1] = mask ? 1u : 0u;
  if (mul) {
    const bp_tensor *m = mul->src[1];
    uint32_t prod_off = 0;
    if (!bind_texel(m, false, &d.bind[1], &d.pc.b_off)) return false;
    bp_error ignored{};
    const planner pm{p.be, mul, &ignored};
    if (bind_ssbo(pm, mul, &d.bind[3], &prod_off) != BP_OK) return false;
    d.spec[1] = 1;
    d.n_spec = 2;
    d.pc.p[1] = prod_off;
    d.pc.p[2] = static_cast<uint32_t>(bp_tensor_nelements(m) / 4);
    add_range(d.reads, m);
    add_range(d.writes, mul);
  }
  add_range(d.reads, a);
  if (mask) add_range(d.reads, mask);
  add_range(d.writes, n);
  d.pc.n = static_cast<uint32_t>(bp_tensor_nrows(a));
  grid_for(d, d.pc.n, 64);
  out.push_back(std::move(d));
  return true;
}

bp_status plan_rows(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0];
  dispatch d;
  static const uint32_t codes[] = {0, 1, 2, 3, 4};  // SUM_ROWS MEAN ARGMAX NORM RMS_NORM
  const uint32_t op = codes[n->op - BP_OP_SUM_ROWS];
  if (op >= 3 && p.dev()->type == BP_DEVICE_TYPE_CPU && plan_rows_vec4(p, op, out)) return BP_OK;
  row_spec(p, d, op);
  if (bp_status st = general(p, "rows", n, a, nullptr, d); st != BP_OK) return st;
  copy_params(d, n, 0, 1);
  d.pc.n = static_cast<uint32_t>(bp_tensor_nrows(a));
  grid_for(d, d.pc.n, 1);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_soft_max(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0], *mask = n->src[1];
  if (p.dev()->type == BP_DEVICE_TYPE_CPU && plan_rows_vec4(p, 5, out)) return BP_OK;
  dispatch d;
  row_spec(p, d, 0);
  const char *variant = mask && mask->type == BP_TYPE_F16 ? "soft_max_f16" : "soft_max_f32";
  if (bp_status st = general(p, variant, n, a, mask, d); st != BP_OK) return st;
  copy_params(d, n, 0, 1);
  d.pc.p[1] = mask ? 1u : 0u;
  if (!mask)
    for (int i = 0; i < 4; ++i) d.pc.b_ne[i] = 1;
  d.pc.n = static_cast<uint32_t>(bp_tensor_nrows(a));
  grid_for(d, d.pc.n, 1);
  out.push_back(std::move(d));
  return BP_OK;
}

// Any layout: one invocation per output element over storage buffers.
bp_status plan_mul_mat_general(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node;
  dispatch d;
  const char *variant = n->src[0]->type == BP_TYPE_F16 ? "mul_mat_f16" : "mul_mat_f32";
  if (bp_status st = general(p, variant, n, n->src[0], n->src[1], d); st != BP_OK) return st;
  d.pc.n = static_cast<uint32_t>(bp_tensor_nelements(n));
  grid_for(d, d.pc.n, 64);
  out.push_back(std::move(d));
  return BP_OK;
}

// What mul_mv and mul_mat_nt share: a and b read in place through texel
// views (an RGBA16F view widens f16 a), the result through an SSBO; shapes
// in texels (a, b) and floats (d). *bound is false when a view cannot cover
// a tensor (then another shader runs).
bp_status bind_in_place_operands(const planner &p, const char *variant, dispatch &d, bool *bound) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  const bool f16 = a->type == BP_TYPE_F16;
  d.variant = variant;
  d.layout = layout_kind::texel;
  *bound = bind_texel(a, f16, &d.bind[0], &d.pc.a_off) && bind_texel(b, false, &d.bind[1], &d.pc.b_off);
  if (!*bound) return BP_OK;
  if (bp_status st = bind_ssbo(p, n, &d.bind[3], &d.pc.d_off); st != BP_OK) return st;
  set_shape(d.pc.a_ne, d.pc.a_nb, a, f16 ? 8 : 16);
  set_shape(d.pc.b_ne, d.pc.b_nb, b, 16);
  set_shape(d.pc.d_ne, d.pc.d_nb, n, 4);
  add_range(d.reads, a);
  add_range(d.reads, b);
  add_range(d.writes, n);
  return BP_OK;
}

// mul_mat_nt reads a in place for any number of columns: with 8 x 32 tiles
// it runs 1024^3 on lavapipe at 54-55 GFLOP/s, where transposing a first
// for a 16 x 4 m-major tile (the former mul_mat_tex path) reached 37-38.
bool nt_applies(const planner &p) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  const bool f16 = a->type == BP_TYPE_F16;
  return p.be->opt.fast_paths && a->ne[0] % 4 == 0 && strides_in(b, 16) && strides_in(a, f16 ? 8 : 16) &&
         n->ne[2] * n->ne[3] <= 65535;
}

// mul_mat_nt.comp's EPILOGUE codes.
constexpr uint32_t kEpilogueAdd = 1, kEpilogueMul = 2, kEpilogueSilu = 3;

// One storage binding over several f32 tensors of one buffer (the product,
// its epilogue's operand and result); float offsets into it in |offs|.
// False when they live in different buffers or span more than a binding.
bool bind_ssbo_span(const planner &p, const bp_tensor *const *ts, int count, binding *out, uint32_t *offs) {
  auto *b = static_cast<vk_buffer *>(ts[0]->buffer_ctx);
  size_t begin = SIZE_MAX, end = 0;
  for (int i = 0; i < count; ++i) {
    if (ts[i]->buffer_ctx != b || ts[i]->type != BP_TYPE_F32) return false;
    begin = std::min(begin, tensor_offset(ts[i]));
    end = std::max(end, tensor_offset(ts[i]) + bp_tensor_nbytes(ts[i]));
  }
  if (!ssbo_window(p, b, begin, end, out)) return false;
  for (int i = 0; i < count; ++i) offs[i] = static_cast<uint32_t>((tensor_offset(ts[i]) - out->offset) / 4);
  return true;
}

// The product through mul_mat_nt.comp, 8 x 32 outputs per invocation, 8 x 16
// or 8 x 8 where b has no more columns or the device tile (tile_cols) is
// narrower. |after| (plan_fused checked it): the next
// node, ADD or MUL of the product with a tensor of its shape and strides,
// or SILU of it, applied in the same dispatch. *planned is false (nothing
// appended) where a binding does not fit.
bp_status plan_mul_mat_nt(const planner &p, const bp_tensor *after, std::vector<dispatch> &out, bool *planned) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  const int64_t M = a->ne[1], N = b->ne[1];
  // mul_mat_nt.comp's ROWS, COLS, LOCAL (CMakeLists.txt)
  const uint32_t rows = 8, cols = std::min<uint32_t>(p.be->opt.tile_cols, N <= 8 ? 8 : N <= 16 ? 16 : 32), local = 16;
  dispatch d;
  bool bound = false;
  *planned = false;
  const char *variant = cols == 8 ? "mul_mat_nt_c8" : cols == 16 ? "mul_mat_nt_c16" : "mul_mat_nt_c32";
  if (bp_status st = bind_in_place_operands(p, variant, d, &bound); st != BP_OK || !bound) return st;
  if (after) {
    const bp_tensor *operand = after->op == BP_OP_SILU ? nullptr : after->src[0] == n ? after->src[1] : after->src[0];
    const bp_tensor *span[3] = {n, after, operand ? operand : n};
    uint32_t offs[3];
    if (!bind_ssbo_span(p, span, 3, &d.bind[3], offs)) return BP_OK;
    d.pc.d_off = offs[0];
    d.pc.p[1] = offs[1];
    d.pc.p[2] = offs[2];
    d.spec[0] = after->op == BP_OP_ADD ? kEpilogueAdd : after->op == BP_OP_MUL ? kEpilogueMul : kEpilogueSilu;
    d.n_spec = 1;
    if (operand) add_range(d.reads, operand);
    add_range(d.writes, after);
  }
  d.pc.p[0] = static_cast<uint32_t>(a->ne[0] / 4);
  d.groups[0] = static_cast<uint32_t>((M + rows * local - 1) / (rows * local));
  d.groups[1] = static_cast<uint32_t>((N + cols - 1) / cols);
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  *planned = true;
  return BP_OK;
}

// Whether the GPU-shaped MUL_MAT shaders (mul_mv_wg, mul_mat_shared) may
// run: the device can, and mul_mat=gpu forces them or mul_mat=auto is on a
// GPU (on CPU-type drivers barriers and shared memory cost more than they
// save, docs/plugins/vulkan.md).
bool gpu_shaped(const planner &p) {
  const mul_mat_mode mode = p.be->opt.mul_mat;
  return p.dev()->gpu_mul_mat &&
         (mode == mul_mat_mode::gpu || (mode == mul_mat_mode::automatic && p.dev()->type != BP_DEVICE_TYPE_CPU));
}

// mul_mat_shared.comp's block (64 or 128 square, CMakeLists.txt) for this
// product, or 0 for mul_mat_nt. Where the shaders are GPU-shaped, and
// (unless forced) where M and N fill a 64 block. The 128 block where it
// still gives 128 workgroups, enough to occupy a large GPU; the 64 block
// otherwise. Both thresholds await a GPU to measure them on
// (docs/plugins/vulkan.md).
uint32_t shared_tile_for(const planner &p) {
  const bp_tensor *n = p.node;
  const int64_t M = n->ne[0], N = n->ne[1], batches = n->ne[2] * n->ne[3];
  if (!gpu_shaped(p) || (p.be->opt.mul_mat == mul_mat_mode::automatic && (M < 64 || N < 64))) return 0;
  return (M + 127) / 128 * ((N + 127) / 128) * batches >= 128 ? 128 : 64;
}

// The product through mul_mat_shared.comp in |tile| x |tile| blocks.
bp_status plan_mul_mat_shared(const planner &p, uint32_t tile, std::vector<dispatch> &out, bool *planned) {
  const bp_tensor *n = p.node;
  dispatch d;
  bool bound = false;
  *planned = false;
  const char *variant = tile == 128 ? "mul_mat_shared_128" : "mul_mat_shared_64";
  if (bp_status st = bind_in_place_operands(p, variant, d, &bound); st != BP_OK || !bound) return st;
  d.pc.p[0] = static_cast<uint32_t>(n->src[0]->ne[0] / 4);
  d.groups[0] = static_cast<uint32_t>((n->ne[0] + tile - 1) / tile);
  d.groups[1] = static_cast<uint32_t>((n->ne[1] + tile - 1) / tile);
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  *planned = true;
  return BP_OK;
}

// Where quantized |t| starts, in bytes: its f16 scales need an even offset,
// the shaders' byte offsets 32 bits.
bp_status quant_start(const planner &p, const bp_tensor *t, size_t *start) {
  auto *b = static_cast<vk_buffer *>(t->buffer_ctx);
  if (!b || !t->data) return bp_error_setf(p.err, BP_ERR_INVALID_ARGUMENT, "tensor '%s' has no memory", t->name);
  if (b->dev != p.dev())
    return bp_error_setf(p.err, BP_ERR_INVALID_ARGUMENT, "tensor '%s' lives on another device", t->name);
  *start = tensor_offset(t);
  if (*start % 2)
    return bp_error_setf(p.err, BP_ERR_INVALID_ARGUMENT,
                         "quantized tensor '%s' starts at an odd byte offset (%zu); its f16 scales need 2-byte "
                         "alignment: place it at an even offset",
                         t->name, *start);
  return BP_OK;
}

// Quantized |t| as a storage binding (the shaders index it in bytes): its
// byte offset inside the binding in a_off, its shape and byte strides in
// a_ne / a_nb.
bp_status bind_quant(const planner &p, const bp_tensor *t, dispatch &d) {
  size_t start = 0;
  if (bp_status st = quant_start(p, t, &start); st != BP_OK) return st;
  const size_t len = bp_tensor_nbytes(t);
  if (!ssbo_window(p, static_cast<vk_buffer *>(t->buffer_ctx), start, start + len, &d.bind[0]))
    return bp_error_setf(p.err, BP_ERR_INVALID_ARGUMENT,
                         "tensor '%s' spans %zu bytes, more than one binding may (maxStorageBufferRange %u)", t->name,
                         len, p.dev()->props.limits.maxStorageBufferRange);
  d.pc.a_off = static_cast<uint32_t>(start - d.bind[0].offset);
  set_shape(d.pc.a_ne, d.pc.a_nb, t, 1);
  add_range(d.reads, t);
  return BP_OK;
}

// Quantized a through its buffer's R32UI view (offset in bytes from the
// buffer's start) and f32 b through the RGBA32F view (offset and strides in
// texels); false where a view does not reach, or |word_rows| asks for a's
// rows to start on a word (mul_mv_q_tex assumes they do: BP_Q_ROW_ALIGNED)
// and they do not; then the storage variants run.
bool bind_quant_texel(const bp_tensor *a, const bp_tensor *b, bool word_rows, dispatch &d) {
  auto *ab = static_cast<vk_buffer *>(a->buffer_ctx);
  const size_t start = tensor_offset(a), end = start + bp_tensor_nbytes(a);
  if (!ab->view_u32 || end > ab->vk_size / 4 * 4 || end >= (size_t{1} << 32)) return false;
  if (word_rows && (start % 4 || !strides_in(a, 4))) return false;
  if (!strides_in(b, 16) || !bind_texel(b, false, &d.bind[1], &d.pc.b_off)) return false;
  d.bind[0] = binding{ab, 0, 0, ab->view_u32};
  d.pc.a_off = static_cast<uint32_t>(start);
  set_shape(d.pc.a_ne, d.pc.a_nb, a, 1);
  set_shape(d.pc.b_ne, d.pc.b_nb, b, 16);
  add_range(d.reads, a);
  add_range(d.reads, b);
  return true;
}

// A variant name of a quantized type: the table holds one per type, Q8_0 first.
const char *quant_variant(const char *const (&names)[5], bp_type t) { return names[t - BP_TYPE_Q8_0]; }

// Quantized weights on a GPU-shaped device, where the product fills the
// blocks: mul_mat_shared's quantized variant. *planned is false (nothing
// appended) where the views do not reach the operands.
bp_status plan_mul_mat_shared_q(const planner &p, uint32_t tile, std::vector<dispatch> &out, bool *planned) {
  static const char *const k64[] = {"mul_mat_shared_64_q8_0", "mul_mat_shared_64_q4_0", "mul_mat_shared_64_q5_0",
                                    "mul_mat_shared_64_q4_k", "mul_mat_shared_64_q6_k"};
  static const char *const k128[] = {"mul_mat_shared_128_q8_0", "mul_mat_shared_128_q4_0", "mul_mat_shared_128_q5_0",
                                     "mul_mat_shared_128_q4_k", "mul_mat_shared_128_q6_k"};
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  *planned = false;
  size_t start = 0;
  if (bp_status st = quant_start(p, a, &start); st != BP_OK) return st;
  dispatch d;
  d.variant = quant_variant(tile == 128 ? k128 : k64, a->type);
  d.layout = layout_kind::texel;
  if (!bind_quant_texel(a, b, false, d)) return BP_OK;
  if (bp_status st = bind_ssbo(p, n, &d.bind[3], &d.pc.d_off); st != BP_OK) return st;
  set_shape(d.pc.d_ne, d.pc.d_nb, n, 4);
  add_range(d.writes, n);
  d.pc.p[0] = static_cast<uint32_t>(a->ne[0] / 4);
  d.groups[0] = static_cast<uint32_t>((n->ne[0] + tile - 1) / tile);
  d.groups[1] = static_cast<uint32_t>((n->ne[1] + tile - 1) / tile);
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  *planned = true;
  return BP_OK;
}

// Quantized weights: mul_mat_shared's quantized variant where a GPU-shaped
// product fills its blocks (and, forced, from 8 columns up, as for f32),
// else mul_mv_q, a workgroup per row of a and up to 8 columns of b per
// workgroup (a decoded once per 8 columns), through texel views where they
// reach (mul_mv_q_tex), else storage buffers. Its workgroup is one subgroup
// on CPU-type devices (no barrier, as row_spec), 4 subgroups reduced
// through shared memory where GPU-shaped.
bp_status plan_mul_mat_quant(const planner &p, std::vector<dispatch> &out) {
  static const char *const kMv[] = {"mul_mv_q_q8_0", "mul_mv_q_q4_0", "mul_mv_q_q5_0", "mul_mv_q_q4_k",
                                    "mul_mv_q_q6_k"};
  static const char *const kMvTex[] = {"mul_mv_q_tex_q8_0", "mul_mv_q_tex_q4_0", "mul_mv_q_tex_q5_0",
                                       "mul_mv_q_tex_q4_k", "mul_mv_q_tex_q6_k"};
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  if (const uint32_t tile = p.be->opt.fast_paths && b->ne[1] >= 8 ? shared_tile_for(p) : 0; tile != 0) {
    bool planned = false;
    if (bp_status st = plan_mul_mat_shared_q(p, tile, out, &planned); st != BP_OK || planned) return st;
  }
  size_t start = 0;
  if (bp_status st = quant_start(p, a, &start); st != BP_OK) return st;
  dispatch d;
  if (p.be->opt.fast_paths && bind_quant_texel(a, b, true, d)) {
    d.variant = quant_variant(kMvTex, a->type);
    d.layout = layout_kind::texel;
    d.pc.b_off *= 4;  // the shader indexes b in floats
    set_shape(d.pc.b_ne, d.pc.b_nb, b, 4);
  } else {
    d = dispatch{};
    d.variant = quant_variant(kMv, a->type);
    d.layout = layout_kind::ssbo;
    if (bp_status st = bind_quant(p, a, d); st != BP_OK) return st;
    if (bp_status st = bind_ssbo(p, b, &d.bind[1], &d.pc.b_off); st != BP_OK) return st;
    set_shape(d.pc.b_ne, d.pc.b_nb, b, 4);
    add_range(d.reads, b);
  }
  if (bp_status st = bind_ssbo(p, n, &d.bind[3], &d.pc.d_off); st != BP_OK) return st;
  set_shape(d.pc.d_ne, d.pc.d_nb, n, 4);
  add_range(d.writes, n);
  const bool multi = gpu_shaped(p);
  const uint32_t sg = p.dev()->subgroup_size, cols = static_cast<uint32_t>(std::min<int64_t>(n->ne[1], 8));
  d.spec[0] = multi ? std::min<uint32_t>(sg * 4, 256) : sg;
  d.spec[1] = multi ? 1 : 0;
  d.spec[2] = cols;
  d.n_spec = 3;
  d.groups[0] = static_cast<uint32_t>(std::min<int64_t>(n->ne[0], 65535));
  d.groups[1] = static_cast<uint32_t>((n->ne[1] + cols - 1) / cols);
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_mul_mat(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  if (is_quant(a->type)) return plan_mul_mat_quant(p, out);
  const int64_t K = a->ne[0], N = b->ne[1];
  const bool f16 = a->type == BP_TYPE_F16;
  const bool fast = p.be->opt.fast_paths && K % 4 == 0 && strides_in(b, 16);
  // Matrix x vector: few columns of b, so a is read once; its rows are
  // K-contiguous already and a texel view widens f16.
  if (fast && N < 8 && strides_in(a, f16 ? 8 : 16)) {
    dispatch d;
    bool bound = false;
    const bool gpu = gpu_shaped(p) && n->ne[2] * n->ne[3] <= 65535;
    if (bp_status st = bind_in_place_operands(p, gpu ? "mul_mv_wg" : "mul_mv", d, &bound); st != BP_OK) return st;
    if (bound && gpu) {
      // Several subgroups per row (reduce.glsl's MULTI path), also when
      // forced on a CPU-type device, so the tests there run the GPU shape.
      d.spec[0] = std::min<uint32_t>(p.dev()->subgroup_size * 4, 256);
      d.spec[1] = 1;
      d.n_spec = 2;
      d.pc.p[0] = static_cast<uint32_t>(K / 4);
      d.groups[0] = static_cast<uint32_t>(std::min<int64_t>(n->ne[0], 65535));
      d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
      out.push_back(std::move(d));
      return BP_OK;
    }
    if (bound) {
      d.pc.n = static_cast<uint32_t>(bp_tensor_nelements(n));
      grid_for(d, d.pc.n, 64);
      out.push_back(std::move(d));
      return BP_OK;
    }
  }
  // Register-blocked straight from a's rows, for any number of columns;
  // on GPUs, blocks staged through shared memory where they fill.
  if (nt_applies(p)) {
    bool planned = false;
    if (const uint32_t tile = shared_tile_for(p); tile != 0) {
      if (bp_status st = plan_mul_mat_shared(p, tile, out, &planned); st != BP_OK || planned) return st;
    }
    if (bp_status st = plan_mul_mat_nt(p, nullptr, out, &planned); st != BP_OK || planned) return st;
  }
  return plan_mul_mat_general(p, out);
}

const char *copy_variant(bp_type s, bp_type d) {
  if (s == BP_TYPE_I32) return "copy_i32_i32";
  if (s == BP_TYPE_F32) return d == BP_TYPE_F32 ? "copy_f32_f32" : "copy_f32_f16";
  return d == BP_TYPE_F32 ? "copy_f16_f32" : "copy_f16_f16";
}

bp_status plan_copy(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0];
  dispatch d;
  if (bp_status st = general(p, copy_variant(a->type, n->type), n, a, nullptr, d); st != BP_OK) return st;
  const bool same_shape = bp_tensor_same_shape(a, n);
  d.pc.p[3] = same_shape ? 1u : 0u;
  d.pc.n = static_cast<uint32_t>(same_shape ? runs_of(n) : static_cast<uint64_t>(bp_tensor_nelements(a)));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_concat(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node;
  dispatch d;
  const char *variant = n->type == BP_TYPE_F32 ? "concat_f32" : n->type == BP_TYPE_F16 ? "concat_f16" : "concat_i32";
  if (bp_status st = general(p, variant, n, n->src[0], n->src[1], d); st != BP_OK) return st;
  copy_params(d, n, 0, 1);
  d.pc.n = static_cast<uint32_t>(bp_tensor_nelements(n));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

// Quantized rows: 4 values per invocation (get_rows_q.comp).
bp_status plan_get_rows_quant(const planner &p, std::vector<dispatch> &out) {
  static const char *const kRows[] = {"get_rows_q8_0", "get_rows_q4_0", "get_rows_q5_0", "get_rows_q4_k",
                                      "get_rows_q6_k"};
  const bp_tensor *n = p.node, *a = n->src[0], *ids = n->src[1];
  dispatch d;
  d.variant = quant_variant(kRows, a->type);
  d.layout = layout_kind::ssbo;
  if (bp_status st = bind_quant(p, a, d); st != BP_OK) return st;
  if (bp_status st = bind_ssbo(p, ids, &d.bind[1], &d.pc.b_off); st != BP_OK) return st;
  if (bp_status st = bind_ssbo(p, n, &d.bind[2], &d.pc.d_off); st != BP_OK) return st;
  set_shape(d.pc.b_ne, d.pc.b_nb, ids, 4);
  set_shape(d.pc.d_ne, d.pc.d_nb, n, 4);
  add_range(d.reads, ids);
  add_range(d.writes, n);
  d.bind[3] = binding{p.be->status, 0, p.be->status->vk_size, VK_NULL_HANDLE};
  d.pc.n = static_cast<uint32_t>(bp_tensor_nelements(n) / 4);
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_get_rows(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0];
  if (is_quant(a->type)) return plan_get_rows_quant(p, out);
  dispatch d;
  const char *variant = a->type == BP_TYPE_F32   ? "get_rows_f32"
                        : a->type == BP_TYPE_F16 ? "get_rows_f16"
                                                 : "get_rows_i32";
  if (bp_status st = general(p, variant, n, a, n->src[1], d); st != BP_OK) return st;
  d.bind[3] = binding{p.be->status, 0, p.be->status->vk_size, VK_NULL_HANDLE};
  d.pc.n = static_cast<uint32_t>(runs_of(n));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_rope(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0];
  dispatch d;
  if (bp_status st = general(p, "rope_f32", n, a, n->src[1], d); st != BP_OK) return st;
  d.pc.p[0] = static_cast<uint32_t>(bp_tensor_param_i32(n, 0));
  d.pc.p[1] = static_cast<uint32_t>(bp_tensor_param_i32(n, 1));
  d.pc.p[2] = static_cast<uint32_t>(n->op_params[2]);
  d.pc.p[3] = static_cast<uint32_t>(n->op_params[3]);
  const uint64_t per_row = static_cast<uint64_t>(d.pc.p[0] / 2 + (a->ne[0] - d.pc.p[0]));
  d.pc.n = static_cast<uint32_t>(per_row * static_cast<uint64_t>(bp_tensor_nrows(a)));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_node(const planner &p, std::vector<dispatch> &out) {
  switch (p.node->op) {
    case BP_OP_ADD:
    case BP_OP_SUB:
    case BP_OP_MUL:
    case BP_OP_DIV:
      return plan_binary(p, out);
    case BP_OP_SUM_ROWS:
    case BP_OP_MEAN:
    case BP_OP_ARGMAX:
    case BP_OP_NORM:
    case BP_OP_RMS_NORM:
      return plan_rows(p, out);
    case BP_OP_SOFT_MAX:
      return plan_soft_max(p, out);
    case BP_OP_MUL_MAT:
      return plan_mul_mat(p, out);
    case BP_OP_GET_ROWS:
      return plan_get_rows(p, out);
    case BP_OP_CPY:
    case BP_OP_CONT:
      return plan_copy(p, out);
    case BP_OP_CONCAT:
      return plan_concat(p, out);
    case BP_OP_ROPE:
      return plan_rope(p, out);
    default:
      return plan_unary(p, out);
  }
}

// The profile's name of a fused pair (profile=true).
const char *fused_label(bp_op first, bp_op second) {
  if (first == BP_OP_NORM) return "NORM+MUL";
  if (first == BP_OP_RMS_NORM) return "RMS_NORM+MUL";
  return second == BP_OP_ADD ? "MUL_MAT+ADD" : second == BP_OP_MUL ? "MUL_MAT+MUL" : "MUL_MAT+SILU";
}

// Checks a node before planning: supported, allocated, sources allocated.
bp_status check_node(backend_ctx *be, const bp_tensor *node, bp_error *err) {
  if (!op_supported(be->dev, be->opt, node))
    return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "node '%s' (%s, %s) is not supported by this backend", node->name,
                         plugins::op_name(node->op), bp_type_name(node->type));
  if (!node->data)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "node '%s' has no memory; allocate the graph first", node->name);
  for (const bp_tensor *s : node->src)
    if (s && (!s->data || !s->buffer_ctx))
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "a source of node '%s' has no memory", node->name);
  return BP_OK;
}

// The same shape and strides: the epilogue indexes both like the product.
bool same_layout(const bp_tensor *x, const bp_tensor *y) {
  if (x->type != y->type) return false;
  for (int i = 0; i < 4; ++i)
    if (x->ne[i] != y->ne[i] || x->nb[i] != y->nb[i]) return false;
  return true;
}

// Two nodes in one dispatch, where a dispatch's fixed cost is worth saving
// (CPU-type devices: lavapipe hands every dispatch to its worker threads and
// back, about 100 us on a 2-core VM, more than a decoder layer's row ops
// themselves). The first node's result is still written, so whatever else
// reads it (later nodes, another backend, the caller) sees it. Fused:
// - NORM or RMS_NORM, then MUL of that result by a dense f32 multiplier of
//   one row or the same shape (the norm's weight);
// - a MUL_MAT on mul_mat_nt, then ADD or MUL of the product with an f32
//   tensor of its layout in the same buffer (a residual, SwiGLU's gate), or
//   SILU of it.
// False: plan them one by one.
bool plan_fused(const planner &p, const bp_tensor *next, std::vector<dispatch> &out, bp_status *st) {
  const bp_tensor *n = p.node;
  if (!next || !p.be->opt.fuse || p.dev()->type != BP_DEVICE_TYPE_CPU || !p.be->opt.fast_paths) return false;
  bp_error ignored{};  // a next node that fails its checks is planned alone, and reports there
  auto next_ok = [&] { return check_node(p.be, next, &ignored) == BP_OK; };
  if (n->op == BP_OP_MUL_MAT && n->type == BP_TYPE_F32 && !is_quant(n->src[0]->type) && nt_applies(p) &&
      shared_tile_for(p) == 0) {
    const bool binary = (next->op == BP_OP_ADD || next->op == BP_OP_MUL) && (next->src[0] == n) != (next->src[1] == n);
    const bool silu = next->op == BP_OP_SILU && next->src[0] == n;
    if (!binary && !silu) return false;
    const bp_tensor *operand = silu ? n : next->src[0] == n ? next->src[1] : next->src[0];
    if (!same_layout(next, n) || !same_layout(operand, n) || !next_ok()) return false;
    bool planned = false;
    *st = plan_mul_mat_nt(p, next, out, &planned);
    return *st != BP_OK || planned;
  }
  if ((n->op == BP_OP_RMS_NORM || n->op == BP_OP_NORM) && next->op == BP_OP_MUL && next->src[0] == n) {
    const bp_tensor *m = next->src[1];
    const bool row = m->ne[0] == n->ne[0] && bp_tensor_nelements(m) == m->ne[0];
    if (n->type != BP_TYPE_F32 || next->type != BP_TYPE_F32 || m->type != BP_TYPE_F32 || !bp_tensor_is_contiguous(m) ||
        !bp_tensor_is_contiguous(next) || !bp_tensor_same_shape(n, next) || !(row || bp_tensor_same_shape(m, n)) ||
        !next_ok())
      return false;
    return plan_rows_vec4(p, n->op == BP_OP_NORM ? 3 : 4, out, next);
  }
  return false;
}

}  // namespace

bp_status op_plan(backend_ctx *be, const bp_tensor *node, const bp_tensor *next, std::vector<dispatch> &out,
                  uint32_t *consumed, bp_error *err) {
  *consumed = 1;
  if (bp_status st = check_node(be, node, err); st != BP_OK) return st;
  const planner p{be, node, err};
  const size_t first = out.size();
  bp_status fused = BP_OK;
  if (plan_fused(p, next, out, &fused)) {
    if (fused != BP_OK) return fused;
    *consumed = 2;
    for (size_t i = first; i < out.size(); ++i) out[i].op = fused_label(node->op, next->op);
    return BP_OK;
  }
  bp_status st = plan_node(p, out);
  for (size_t i = first; i < out.size(); ++i) out[i].op = plugins::op_name(node->op);
  return st;
}

}  // namespace bp::vk
