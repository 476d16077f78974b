// memory_window.cpp: the shared buffer-slot checks (memory_window.hpp).
#include "memory_window.hpp"

namespace bp::plugins {

bp_status window_check(const memory_window &w, const bp_tensor *t, size_t offset, size_t size, const char *what,
                       bp_error *err) {
  if (!t) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s needs a tensor", what);
  if (size == 0) return BP_OK;
  if (!t->data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s on tensor '%s' without memory", what, t->name);
  const char *p = static_cast<const char *>(t->data);
  // Each clause keeps the next one's subtraction from wrapping.
  if (p < w.base || static_cast<size_t>(p - w.base) > w.size || offset > w.size || size > w.size - offset ||
      static_cast<size_t>(p - w.base) > w.size - offset - size) {
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s of %zu bytes at offset %zu of tensor '%s' leaves its buffer",
                         what, size, offset, t->name);
  }
  return BP_OK;
}

bp_status transfer_target_check(bool reachable, const memory_window &w, const bp_tensor *t, size_t offset, size_t size,
                                const char *memory, bp_error *err) {
  if (!t) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "async transfer needs a tensor");
  if (!reachable)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "async transfer of tensor '%s', which is not in memory of %s",
                         t->name, memory);
  return window_check(w, t, offset, size, "async transfer", err);
}

bp_status copy_precondition(bool reachable, const bp_tensor *src, const bp_tensor *dst, const char *where,
                            bp_error *err) {
  if (!src || !dst) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "copy_tensor needs src and dst");
  if (!reachable || src->type != dst->type || !bp_tensor_is_contiguous(src) || !bp_tensor_is_contiguous(dst) ||
      bp_tensor_nbytes(src) != bp_tensor_nbytes(dst)) {
    return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "copy_tensor copies contiguous tensors %s", where);
  }
  return BP_OK;
}

}  // namespace bp::plugins
