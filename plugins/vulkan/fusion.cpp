// fusion.cpp: two nodes of a graph in one vulkan dispatch (plan_fused,
// plan.hpp), and the profile's names of the fused pairs.
#include "plan.hpp"

namespace bp::vk {
namespace {

// The same shape and strides: the epilogue indexes both like the product.
bool same_layout(const bp_tensor *x, const bp_tensor *y) {
  if (x->type != y->type) return false;
  for (int i = 0; i < 4; ++i)
    if (x->ne[i] != y->ne[i] || x->nb[i] != y->nb[i]) return false;
  return true;
}

}  // namespace

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
    return plan_rows_vec4(p, rows_code(n->op), out, next);
  }
  return false;
}

const char *fused_label(bp_op first, bp_op second) {
  if (first == BP_OP_NORM) return "NORM+MUL";
  if (first == BP_OP_RMS_NORM) return "RMS_NORM+MUL";
  return second == BP_OP_ADD ? "MUL_MAT+ADD" : second == BP_OP_MUL ? "MUL_MAT+MUL" : "MUL_MAT+SILU";
}

}  // namespace bp::vk
