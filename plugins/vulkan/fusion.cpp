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

// Two nodes in one dispatch. Each dispatch has a fixed cost: on CPU-type
// devices lavapipe hands every dispatch to its worker threads and back
// (about 100 us on a 2-core VM, more than a decoder layer's row ops
// themselves); on GPUs a decode step is hundreds of small dispatches, each
// a launch and a barrier. The first node's result is still written, so
// whatever else reads it (later nodes, another backend, the caller) sees
// it. Fused:
// - NORM or RMS_NORM, then MUL of that result by a dense f32 multiplier of
//   one row or the same shape (the norm's weight): rows_vec4 on CPU-type
//   devices where the rows allow it, else the workgroup-per-row rows shader;
// - a MUL_MAT, then ADD or MUL of the product with an f32 tensor of its
//   layout in the same buffer (a residual, SwiGLU's gate), or SILU of it,
//   in the product shader's epilogue (plan_mul_mat_fused).
// False: plan them one by one.
bool plan_fused(const planner &p, const bp_tensor *next, std::vector<dispatch> &out, bp_status *st) {
  const bp_tensor *n = p.node;
  if (!next || !p.be->opt.fuse || !p.be->opt.fast_paths) return false;
  bp_error ignored{};  // a next node that fails its checks is planned alone, and reports there
  auto next_ok = [&] { return check_node(p.be, next, &ignored) == BP_OK; };
  if (n->op == BP_OP_MUL_MAT && n->type == BP_TYPE_F32) {
    const bool binary = (next->op == BP_OP_ADD || next->op == BP_OP_MUL) && (next->src[0] == n) != (next->src[1] == n);
    const bool silu = next->op == BP_OP_SILU && next->src[0] == n;
    if (!binary && !silu) return false;
    const bp_tensor *operand = silu ? n : next->src[0] == n ? next->src[1] : next->src[0];
    if (!same_layout(next, n) || !same_layout(operand, n) || !next_ok()) return false;
    bool planned = false;
    *st = plan_mul_mat_fused(p, next, out, &planned);
    return *st != BP_OK || planned;
  }
  if ((n->op == BP_OP_RMS_NORM || n->op == BP_OP_NORM) && next->op == BP_OP_MUL && next->src[0] == n) {
    const bp_tensor *m = next->src[1];
    const bool row = m->ne[0] == n->ne[0] && bp_tensor_nelements(m) == m->ne[0];
    if (n->type != BP_TYPE_F32 || next->type != BP_TYPE_F32 || m->type != BP_TYPE_F32 || !bp_tensor_is_contiguous(m) ||
        !bp_tensor_is_contiguous(next) || !bp_tensor_same_shape(n, next) || !(row || bp_tensor_same_shape(m, n)) ||
        !next_ok())
      return false;
    // CPU-type devices: the texel path where the rows allow it.
    if (p.dev()->type == BP_DEVICE_TYPE_CPU && plan_rows_vec4(p, rows_code(n->op), out, next)) return true;
    return plan_rows_mul(p, rows_code(n->op), next, out, st);
  }
  return false;
}

const char *fused_label(bp_op first, bp_op second) {
  if (first == BP_OP_NORM) return "NORM+MUL";
  if (first == BP_OP_RMS_NORM) return "RMS_NORM+MUL";
  return second == BP_OP_ADD ? "MUL_MAT+ADD" : second == BP_OP_MUL ? "MUL_MAT+MUL" : "MUL_MAT+SILU";
}

}  // namespace bp::vk
