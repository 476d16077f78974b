// plan_elementwise.cpp: the vulkan dispatches of the elementwise ops (ADD SUB
// MUL DIV, SCALE CLAMP and the unary ops), the row ops (SUM_ROWS MEAN ARGMAX
// NORM RMS_NORM SOFT_MAX), CPY CONT CONCAT GET_ROWS SET_ROWS and ROPE
// (plan.hpp).
#include <cstdint>
#include <utility>

#include "plan.hpp"

namespace bp::vk {
namespace {

bool contiguous_all(std::initializer_list<const bp_tensor *> ts) {
  for (const bp_tensor *t : ts)
    if (!bp_tensor_is_contiguous(t)) return false;
  return true;
}

}  // namespace

bp_status plan_binary(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0], *b = n->src[1];
  dispatch d;
  d.spec[0] = binary_code(n->op);
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
  d.spec[0] = unary_code(n->op);
  d.n_spec = 1;
  if (bp_status st = general(p, a->type == BP_TYPE_F32 ? "unary_f32" : "unary_f16", n, a, nullptr, d); st != BP_OK)
    return st;
  copy_params(d, n, 0, 2);
  d.pc.n = static_cast<uint32_t>(runs_of(n));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

bool plan_rows_vec4(const planner &p, uint32_t op, std::vector<dispatch> &out, const bp_tensor *mul) {
  const bp_tensor *n = p.node, *a = n->src[0], *mask = op == BP_VK_ROWS_SOFT_MAX ? n->src[1] : nullptr;
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
  const uint32_t op = rows_code(n->op);
  if (op >= BP_VK_ROWS_NORM && p.dev()->type == BP_DEVICE_TYPE_CPU && plan_rows_vec4(p, op, out)) return BP_OK;
  row_spec(p, d, op);
  if (bp_status st = general(p, "rows", n, a, nullptr, d); st != BP_OK) return st;
  copy_params(d, n, 0, 1);
  d.pc.n = static_cast<uint32_t>(bp_tensor_nrows(a));
  grid_for(d, d.pc.n, 1);
  out.push_back(std::move(d));
  return BP_OK;
}

bool plan_rows_mul(const planner &p, uint32_t op, const bp_tensor *mul, std::vector<dispatch> &out, bp_status *st) {
  const bp_tensor *n = p.node, *a = n->src[0], *m = mul->src[1];
  dispatch d;
  row_spec(p, d, op);
  if ((*st = general(p, "rows", n, a, m, d)) != BP_OK) return true;
  bp_error ignored{};
  const planner pm{p.be, mul, &ignored};
  uint32_t prod_off = 0;
  if (bind_ssbo(pm, mul, &d.bind[3], &prod_off) != BP_OK) return false;
  copy_params(d, n, 0, 1);
  d.pc.p[1] = prod_off;
  d.pc.p[2] = static_cast<uint32_t>(bp_tensor_nelements(m));
  d.spec[3] = 1;
  d.n_spec = 4;
  add_range(d.writes, mul);
  d.pc.n = static_cast<uint32_t>(bp_tensor_nrows(a));
  grid_for(d, d.pc.n, 1);
  out.push_back(std::move(d));
  return true;
}

bp_status plan_soft_max(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0], *mask = n->src[1];
  if (p.dev()->type == BP_DEVICE_TYPE_CPU && plan_rows_vec4(p, BP_VK_ROWS_SOFT_MAX, out)) return BP_OK;
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

namespace {

const char *copy_variant(bp_type s, bp_type d) {
  if (s == BP_TYPE_I32) return "copy_i32_i32";
  if (d == BP_TYPE_BF16) return "copy_f32_bf16";
  if (s == BP_TYPE_BF16) return "copy_bf16_f32";
  if (s == BP_TYPE_F32) return d == BP_TYPE_F32 ? "copy_f32_f32" : "copy_f32_f16";
  return d == BP_TYPE_F32 ? "copy_f16_f32" : "copy_f16_f16";
}

}  // namespace

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

namespace {

// Quantized rows: 4 values per invocation (get_rows_q.comp).
bp_status plan_get_rows_quant(const planner &p, std::vector<dispatch> &out) {
  static const char *const kRows[] = {"get_rows_q8_0", "get_rows_q4_0", "get_rows_q5_0", "get_rows_q4_k",
                                      "get_rows_q6_k", "get_rows_q5_k", "get_rows_bf16"};
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

}  // namespace

bp_status plan_get_rows(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0];
  // BF16 tables in whole 4-value blocks decode as the block types do;
  // others one value per step (get_rows.comp's S_BF16).
  if (is_quant(a->type) && rows_in_blocks(a)) return plan_get_rows_quant(p, out);
  dispatch d;
  const char *variant = a->type == BP_TYPE_F32    ? "get_rows_f32"
                        : a->type == BP_TYPE_F16  ? "get_rows_f16"
                        : a->type == BP_TYPE_BF16 ? "get_rows_bf16_any"
                                                  : "get_rows_i32";
  if (bp_status st = general(p, variant, n, a, n->src[1], d); st != BP_OK) return st;
  d.bind[3] = binding{p.be->status, 0, p.be->status->vk_size, VK_NULL_HANDLE};
  d.pc.n = static_cast<uint32_t>(runs_of(n));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

namespace {

// The index of |n|'s names in the backend's SET_ROWS labels (a report at
// synchronize names them), or none past kMaxSetRowsLabels.
uint32_t set_rows_label_of(backend_ctx *be, const bp_tensor *n) {
  std::vector<set_rows_label> &labels = be->set_rows_labels;
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i].node == n->name && labels[i].ids == n->src[2]->name && labels[i].dst == n->src[1]->name)
      return static_cast<uint32_t>(i);
  if (labels.size() >= kMaxSetRowsLabels) return UINT32_MAX;
  labels.push_back(set_rows_label{n->name, n->src[2]->name, n->src[1]->name});
  return static_cast<uint32_t>(labels.size() - 1);
}

}  // namespace

bp_status plan_set_rows(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *src = n->src[0], *ids = n->src[2];
  dispatch d;
  // The node is the destination's view: its shape gives the shader R (d_ne.y).
  if (bp_status st = general(p, n->type == BP_TYPE_F16 ? "set_rows_f16" : "set_rows_f32", n, src, ids, d); st != BP_OK)
    return st;
  d.bind[3] = binding{p.be->status, 0, p.be->status->vk_size, VK_NULL_HANDLE};
  d.pc.p[0] = set_rows_label_of(p.be, n);
  d.pc.n = static_cast<uint32_t>(runs_of(src));
  grid_for(d, d.pc.n, 256);
  out.push_back(std::move(d));
  return BP_OK;
}

bp_status plan_rope(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *a = n->src[0], *ff = n->src[2];
  dispatch d;
  if (bp_status st = general(p, ff ? "rope_ff_f32" : "rope_f32", n, a, n->src[1], d); st != BP_OK) return st;
  if (ff) {
    // rope.comp reads the factors' offset from b_nb.y (the push constants have no other free word).
    if (bp_status st = bind_ssbo(p, ff, &d.bind[3], &d.pc.b_nb[1]); st != BP_OK) return st;
    add_range(d.reads, ff);
  }
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

}  // namespace bp::vk
