// dispatch.cpp: the vulkan planners' binding and dispatch helpers (plan.hpp):
// storage and texel bindings of tensors (byte windows of their buffers),
// shapes and strides in a binding's elements, the ranges a dispatch reads and
// writes, its grid and push constants.
#include <algorithm>

#include "plan.hpp"

namespace bp::vk {

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

void grid_for(dispatch &d, uint64_t n, uint32_t local) {
  const uint64_t groups = std::max<uint64_t>(1, (n + local - 1) / local);
  const uint64_t gx = std::min<uint64_t>(groups, 65535);
  d.groups[0] = static_cast<uint32_t>(gx);
  d.groups[1] = static_cast<uint32_t>((groups + gx - 1) / gx);
  d.groups[2] = 1;
}

uint64_t runs_of(const bp_tensor *t) {
  return static_cast<uint64_t>((t->ne[0] + kRun - 1) / kRun) * static_cast<uint64_t>(bp_tensor_nrows(t));
}

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

void row_spec(const planner &p, dispatch &d, uint32_t op) {
  const bool single = p.dev()->type == BP_DEVICE_TYPE_CPU;
  const uint32_t sg = p.dev()->subgroup_size;
  d.spec[0] = single ? sg : std::min<uint32_t>(sg * 4, 256);
  d.spec[1] = single ? 0 : 1;
  d.spec[2] = op;
  d.n_spec = 3;
}

bool strides_in(const bp_tensor *t, size_t unit) {
  for (int i = 1; i < 4; ++i)
    if (t->ne[i] > 1 && t->nb[i] % unit) return false;
  return true;
}

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

}  // namespace bp::vk
