// plan_matmul.cpp: the vulkan dispatches of MUL_MAT (plan.hpp), and which
// shader runs: mul_mv (matrix x vector) and mul_mat_nt (register tiles) shaped
// for CPU drivers, mul_mv_wg and mul_mat_shared (shared-memory blocks) for
// GPUs, mul_mv_q and mul_mat_shared's variants for quantized weights,
// mul_mat for any layout.
#include <algorithm>
#include <cstdint>

#include "plan.hpp"

namespace bp::vk {
namespace {

// Any layout: one invocation per output element over storage buffers (also
// BF16 rows that are not whole 4-value blocks).
bp_status plan_mul_mat_general(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node;
  dispatch d;
  const bp_type at = n->src[0]->type;
  const char *variant = at == BP_TYPE_F16 ? "mul_mat_f16" : at == BP_TYPE_BF16 ? "mul_mat_bf16" : "mul_mat_f32";
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

// Whether the GPU-shaped MUL_MAT shaders (mul_mv_wg, mul_mat_shared) may
// run: the device can, and mul_mat=gpu forces them or mul_mat=auto is on a
// GPU (on CPU-type drivers barriers and shared memory cost more than they
// save, docs/plugins/vulkan.md).
bool gpu_shaped(const planner &p) {
  const mul_mat_mode mode = p.be->opt.mul_mat;
  return p.dev()->gpu_mul_mat &&
         (mode == mul_mat_mode::gpu || (mode == mul_mat_mode::automatic && p.dev()->type != BP_DEVICE_TYPE_CPU));
}

// The GPU-shaped matrix x vector specialization (mul_mv_wg, mul_mv_q): 4
// subgroups per workgroup (at most 256 invocations); with mul_mv=subgroup
// (the default) each takes its own rows (SG_ROWS), else they share each row
// through shared memory (MULTI). Returns the rows one workgroup covers.
uint32_t gpu_mv_spec(const planner &p, dispatch &d) {
  const uint32_t sg = p.dev()->subgroup_size, local = std::min<uint32_t>(sg * 4, 256);
  const bool sg_rows = p.be->opt.mul_mv != mul_mv_mode::workgroup;
  d.spec[0] = local;
  d.spec[1] = sg_rows ? 0 : 1;
  d.spec[3] = sg_rows ? 1 : 0;
  d.n_spec = 4;
  return sg_rows ? local / sg : 1;
}

}  // namespace

bool nt_applies(const planner &p) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  const bool f16 = a->type == BP_TYPE_F16;
  return p.be->opt.fast_paths && a->ne[0] % 4 == 0 && strides_in(b, 16) && strides_in(a, f16 ? 8 : 16) &&
         n->ne[2] * n->ne[3] <= 65535;
}

namespace {

// |after| (the node fused into the product, or none) on dispatch |d|,
// whose product binding (3) is set: one storage binding over the product,
// |after|'s result and its operand, offsets p.y and p.z, and the shader's
// EPILOGUE at specialization constant |id| (epilogue.glsl). False where
// they do not share one binding.
bool bind_epilogue(const planner &p, const bp_tensor *after, uint32_t id, dispatch &d) {
  if (!after) return true;
  const bp_tensor *n = p.node;
  const bp_tensor *operand = after->op == BP_OP_SILU ? nullptr : after->src[0] == n ? after->src[1] : after->src[0];
  const bp_tensor *span[3] = {n, after, operand ? operand : n};
  uint32_t offs[3];
  if (!bind_ssbo_span(p, span, 3, &d.bind[3], offs)) return false;
  d.pc.d_off = offs[0];
  d.pc.p[1] = offs[1];
  d.pc.p[2] = offs[2];
  d.spec[id] = after->op == BP_OP_ADD   ? BP_VK_EPILOGUE_ADD
               : after->op == BP_OP_MUL ? BP_VK_EPILOGUE_MUL
                                        : BP_VK_EPILOGUE_SILU;
  d.n_spec = std::max(d.n_spec, id + 1);
  if (operand) add_range(d.reads, operand);
  add_range(d.writes, after);
  return true;
}

// The product through mul_mat_nt.comp, 8 x 32 outputs per invocation, 8 x 16
// or 8 x 8 where b has no more columns or the device tile (tile_cols) is
// narrower; |after| in its epilogue. *planned is false (nothing appended)
// where a binding does not fit.
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
  if (!bind_epilogue(p, after, 0, d)) return BP_OK;
  d.pc.p[0] = static_cast<uint32_t>(a->ne[0] / 4);
  d.groups[0] = static_cast<uint32_t>((M + rows * local - 1) / (rows * local));
  d.groups[1] = static_cast<uint32_t>((N + cols - 1) / cols);
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  *planned = true;
  return BP_OK;
}

}  // namespace

uint32_t shared_tile_for(const planner &p) {
  const bp_tensor *n = p.node;
  const int64_t M = n->ne[0], N = n->ne[1], batches = n->ne[2] * n->ne[3];
  if (!gpu_shaped(p) || (p.be->opt.mul_mat == mul_mat_mode::automatic && (M < 64 || N < 64))) return 0;
  return (M + 127) / 128 * ((N + 127) / 128) * batches >= 128 ? 128 : 64;
}

namespace {

// The product through mul_mat_shared.comp in |tile| x |tile| blocks, or
// with coopmat=true through mul_mat_coopmat.comp (64 x 64 blocks on
// cooperative matrices; the backend refused coopmat=true on a device
// without them).
bp_status plan_mul_mat_shared(const planner &p, uint32_t tile, std::vector<dispatch> &out, bool *planned) {
  const bp_tensor *n = p.node;
  dispatch d;
  bool bound = false;
  *planned = false;
  if (p.be->opt.coopmat) tile = 64;
  const char *variant = p.be->opt.coopmat ? "mul_mat_coopmat"
                        : tile == 128     ? "mul_mat_shared_128"
                                          : "mul_mat_shared_64";
  if (bp_status st = bind_in_place_operands(p, variant, d, &bound); st != BP_OK || !bound) return st;
  d.pc.p[0] = static_cast<uint32_t>(n->src[0]->ne[0] / 4);
  d.groups[0] = static_cast<uint32_t>((n->ne[0] + tile - 1) / tile);
  d.groups[1] = static_cast<uint32_t>((n->ne[1] + tile - 1) / tile);
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  *planned = true;
  return BP_OK;
}

// Quantized weights on a GPU-shaped device, where the product fills the
// blocks: mul_mat_shared's quantized variant (mul_mat_coopmat's with
// coopmat=true). *planned is false (nothing appended) where the views do
// not reach the operands.
bp_status plan_mul_mat_shared_q(const planner &p, uint32_t tile, std::vector<dispatch> &out, bool *planned) {
  static const char *const k64[] = {"mul_mat_shared_64_q8_0", "mul_mat_shared_64_q4_0", "mul_mat_shared_64_q5_0",
                                    "mul_mat_shared_64_q4_k", "mul_mat_shared_64_q6_k", "mul_mat_shared_64_q5_k",
                                    "mul_mat_shared_64_bf16"};
  static const char *const k128[] = {"mul_mat_shared_128_q8_0", "mul_mat_shared_128_q4_0", "mul_mat_shared_128_q5_0",
                                     "mul_mat_shared_128_q4_k", "mul_mat_shared_128_q6_k", "mul_mat_shared_128_q5_k",
                                     "mul_mat_shared_128_bf16"};
  static const char *const kCoop[] = {"mul_mat_coopmat_q8_0", "mul_mat_coopmat_q4_0", "mul_mat_coopmat_q5_0",
                                      "mul_mat_coopmat_q4_k", "mul_mat_coopmat_q6_k", "mul_mat_coopmat_q5_k",
                                      "mul_mat_coopmat_bf16"};
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  *planned = false;
  size_t start = 0;
  if (bp_status st = quant_start(p, a, &start); st != BP_OK) return st;
  dispatch d;
  if (p.be->opt.coopmat) tile = 64;
  d.variant = quant_variant(p.be->opt.coopmat ? kCoop : tile == 128 ? k128 : k64, a->type);
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
// on CPU-type devices (no barrier, as row_spec); where GPU-shaped, 4
// subgroups, each on rows of its own or all on one row (gpu_mv_spec).
// |after| (fused) runs in mul_mv_q's epilogue; where the blocks would run,
// *planned is false and nothing is appended.
bp_status plan_mul_mat_quant(const planner &p, const bp_tensor *after, std::vector<dispatch> &out, bool *planned) {
  static const char *const kMv[] = {"mul_mv_q_q8_0", "mul_mv_q_q4_0", "mul_mv_q_q5_0", "mul_mv_q_q4_k",
                                    "mul_mv_q_q6_k", "mul_mv_q_q5_k", "mul_mv_q_bf16"};
  static const char *const kMvTex[] = {"mul_mv_q_tex_q8_0", "mul_mv_q_tex_q4_0", "mul_mv_q_tex_q5_0",
                                       "mul_mv_q_tex_q4_k", "mul_mv_q_tex_q6_k", "mul_mv_q_tex_q5_k",
                                       "mul_mv_q_tex_bf16"};
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  *planned = false;
  if (const uint32_t tile = p.be->opt.fast_paths && b->ne[1] >= 8 ? shared_tile_for(p) : 0; tile != 0) {
    if (after) return BP_OK;
    if (bp_status st = plan_mul_mat_shared_q(p, tile, out, planned); st != BP_OK || *planned) return st;
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
  const uint32_t cols = static_cast<uint32_t>(std::min<int64_t>(n->ne[1], 8));
  uint32_t rows_per_group = 1;
  if (gpu_shaped(p)) {
    rows_per_group = gpu_mv_spec(p, d);
  } else {
    d.spec[0] = p.dev()->subgroup_size;  // one subgroup: no barrier
    d.n_spec = 3;
  }
  d.spec[2] = cols;
  if (!bind_epilogue(p, after, 4, d)) return BP_OK;
  d.groups[0] = static_cast<uint32_t>(std::min<int64_t>((n->ne[0] + rows_per_group - 1) / rows_per_group, 65535));
  d.groups[1] = static_cast<uint32_t>((n->ne[1] + cols - 1) / cols);
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  *planned = true;
  return BP_OK;
}

// Whether f32 or f16 |a| by few columns (N < 8) reads through the texel
// views as a matrix x vector product (mul_mv, or mul_mv_wg where GPU-shaped).
bool mv_applies(const planner &p) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  const bool f16 = a->type == BP_TYPE_F16;
  return p.be->opt.fast_paths && a->ne[0] % 4 == 0 && strides_in(b, 16) && b->ne[1] < 8 && strides_in(a, f16 ? 8 : 16);
}

// The GPU-shaped matrix x vector product (mul_mv_wg) of f32 or f16 weights,
// |after| in its epilogue. *planned is false (nothing appended) where the
// views or the span do not reach.
bp_status plan_mul_mv_wg(const planner &p, const bp_tensor *after, std::vector<dispatch> &out, bool *planned) {
  const bp_tensor *n = p.node;
  dispatch d;
  bool bound = false;
  *planned = false;
  if (bp_status st = bind_in_place_operands(p, "mul_mv_wg", d, &bound); st != BP_OK || !bound) return st;
  // The GPU shape also when forced on a CPU-type device, so the tests there
  // run it.
  const uint32_t rows_per_group = gpu_mv_spec(p, d);
  if (!bind_epilogue(p, after, 4, d)) return BP_OK;
  d.pc.p[0] = static_cast<uint32_t>(n->src[0]->ne[0] / 4);
  d.groups[0] = static_cast<uint32_t>(std::min<int64_t>((n->ne[0] + rows_per_group - 1) / rows_per_group, 65535));
  d.groups[2] = static_cast<uint32_t>(n->ne[2] * n->ne[3]);
  out.push_back(std::move(d));
  *planned = true;
  return BP_OK;
}

bool mv_wg_applies(const planner &p) {
  const bp_tensor *n = p.node;
  return mv_applies(p) && gpu_shaped(p) && n->ne[2] * n->ne[3] <= 65535;
}

}  // namespace

bp_status plan_mul_mat_fused(const planner &p, const bp_tensor *after, std::vector<dispatch> &out, bool *planned) {
  const bp_tensor *a = p.node->src[0];
  *planned = false;
  if (is_quant(a->type)) return rows_in_blocks(a) ? plan_mul_mat_quant(p, after, out, planned) : BP_OK;
  if (mv_wg_applies(p)) return plan_mul_mv_wg(p, after, out, planned);
  if (nt_applies(p) && shared_tile_for(p) == 0) return plan_mul_mat_nt(p, after, out, planned);
  return BP_OK;
}

bp_status plan_mul_mat(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0];
  bool planned = false;
  if (is_quant(a->type)) {
    if (!rows_in_blocks(a)) return plan_mul_mat_general(p, out);
    if (bp_status st = plan_mul_mat_quant(p, nullptr, out, &planned); st != BP_OK || planned) return st;
    return plan_mul_mat_general(p, out);  // not reached: without an epilogue mul_mv_q always plans
  }
  // Matrix x vector: few columns of b, so a is read once; its rows are
  // K-contiguous already and a texel view widens f16.
  if (mv_wg_applies(p)) {
    if (bp_status st = plan_mul_mv_wg(p, nullptr, out, &planned); st != BP_OK || planned) return st;
  } else if (mv_applies(p)) {
    dispatch d;
    bool bound = false;
    if (bp_status st = bind_in_place_operands(p, "mul_mv", d, &bound); st != BP_OK) return st;
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
    if (const uint32_t tile = shared_tile_for(p); tile != 0) {
      if (bp_status st = plan_mul_mat_shared(p, tile, out, &planned); st != BP_OK || planned) return st;
    }
    if (bp_status st = plan_mul_mat_nt(p, nullptr, out, &planned); st != BP_OK || planned) return st;
  }
  return plan_mul_mat_general(p, out);
}

}  // namespace bp::vk
