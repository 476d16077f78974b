// plan.cpp: a node's vulkan dispatches (op_plan, vulkan.hpp): checked, fused
// with the next node where they fuse (fusion.cpp), else planned by its op's
// planner (plan_elementwise.cpp, plan_matmul.cpp, plan_attention.cpp), and
// labelled for profiles.
#include "plan.hpp"
#include "op_family.hpp"

namespace bp::vk {
namespace {

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
    case BP_OP_SET_ROWS:
      return plan_set_rows(p, out);
    case BP_OP_ATTENTION:
      return plan_attention(p, out);
    default:
      return plan_unary(p, out);
  }
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
    for (size_t i = first; i < out.size(); ++i) {
      out[i].op = fused_label(node->op, next->op);
      out[i].node = node;
      out[i].fused = next;
    }
    return BP_OK;
  }
  bp_status st = plan_node(p, out);
  for (size_t i = first; i < out.size(); ++i) {
    out[i].op = plugins::op_name(node->op);
    out[i].node = node;
  }
  return st;
}

}  // namespace bp::vk
