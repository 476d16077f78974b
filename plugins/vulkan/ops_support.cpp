// ops_support.cpp: which ops the vulkan backend runs (op_supported), and the
// checks a node passes before it is planned (check_node).
#include "op_family.hpp"
#include "plan.hpp"

namespace bp::vk {
namespace {

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
  const bp_tensor *a = node->src[0], *b = node->src[1], *c = node->src[2], *m = node->src[3];
  if (!a) return false;
  if (uses_f16(node) && !opt.f16) return false;
  for (const bp_tensor *t : {node, a, b, c, m})
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
      // f32 <-> bf16 stores 16-bit values: 16-bit storage, as f16 needs.
      if ((a->type == BP_TYPE_F32 && node->type == BP_TYPE_BF16) ||
          (a->type == BP_TYPE_BF16 && node->type == BP_TYPE_F32))
        return opt.f16 && dev->has_16bit_storage;
      return (is_float(a->type) && is_float(node->type)) || (a->type == BP_TYPE_I32 && node->type == BP_TYPE_I32);
    case BP_OP_CONCAT:
      return b && !is_quant(a->type) && a->type == b->type && node->type == a->type &&
             bp_tensor_param_i32(node, 0) >= 0 && bp_tensor_param_i32(node, 0) < 4;
    case BP_OP_ROPE: {
      const int32_t n_dims = bp_tensor_param_i32(node, 0), mode = bp_tensor_param_i32(node, 1);
      const bp_tensor *ff = node->src[2];
      // rope_ff_f32 indexes the factors densely from their offset.
      const bool ff_ok = !ff || (ff->type == BP_TYPE_F32 && ff->ne[0] >= n_dims / 2 && bp_tensor_is_contiguous(ff));
      return b && a->type == BP_TYPE_F32 && b->type == BP_TYPE_I32 && n_dims >= 2 && n_dims % 2 == 0 &&
             n_dims <= a->ne[0] && (mode == BP_ROPE_NORMAL || mode == BP_ROPE_NEOX) && ff_ok;
    }
    case BP_OP_ATTENTION:
      return attention_supported(dev, node);
    case BP_OP_SET_ROWS:
      // set_rows.comp checks every id with subgroupMin before it writes.
      return dev->subgroup_arith && b && c && a->type == BP_TYPE_F32 && is_float(b->type) && node->type == b->type &&
             c->type == BP_TYPE_I32 && bp_tensor_rows_contiguous(node) && a->ne[0] == node->ne[0] &&
             c->ne[0] == a->ne[1] && a->ne[2] == node->ne[2] && a->ne[3] == node->ne[3];
    default:
      return false;
  }
}

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

}  // namespace bp::vk
