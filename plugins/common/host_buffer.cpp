// host_buffer.cpp: see host_buffer.hpp.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backplane/plugin_guard.hpp"
#include "host_buffer.hpp"
#include "memory_window.hpp"

namespace bp::plugins {
namespace {

extern const bp_buffer_i buffer_iface;  // below

constexpr size_t kAlignment = 64;

struct host_buffer {
  void *data = nullptr;
  size_t size = 0;
  bool owned = false;  // false: wraps caller memory (buffer_from_host_ptr)
};

// Range check shared by set/get/memset (host memory has no liveness to check).
bp_status check_range(const host_buffer *b, const bp_tensor *t, size_t offset, size_t size, const char *what,
                      bp_error *err) {
  if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s needs a buffer", what);
  return window_check({static_cast<const char *>(b->data), b->size}, t, offset, size, what, err);
}

void buffer_free(void *buf) noexcept {
  auto *b = static_cast<host_buffer *>(buf);
  if (!b) return;
  if (b->owned) std::free(b->data);
  delete b;
}

void *buffer_base(void *buf) noexcept { return buf ? static_cast<host_buffer *>(buf)->data : nullptr; }

bp_status buffer_set_tensor(void *buf, bp_tensor *t, const void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    bp_status s = check_range(static_cast<host_buffer *>(buf), t, offset, size, "set_tensor", err);
    if (s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "set_tensor with NULL data");
    std::memcpy(static_cast<char *>(t->data) + offset, data, size);
    return BP_OK;
  });
}

bp_status buffer_get_tensor(void *buf, const bp_tensor *t, void *data, size_t offset, size_t size,
                            bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    bp_status s = check_range(static_cast<host_buffer *>(buf), t, offset, size, "get_tensor", err);
    if (s != BP_OK || size == 0) return s;
    if (!data) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "get_tensor with NULL data");
    std::memcpy(data, static_cast<const char *>(t->data) + offset, size);
    return BP_OK;
  });
}

bp_status buffer_memset_tensor(void *buf, bp_tensor *t, uint8_t value, size_t offset, size_t size,
                               bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    bp_status s = check_range(static_cast<host_buffer *>(buf), t, offset, size, "memset_tensor", err);
    if (s != BP_OK || size == 0) return s;
    std::memset(static_cast<char *>(t->data) + offset, value, size);
    return BP_OK;
  });
}

bp_status buffer_copy_tensor(void *buf, const bp_tensor *src, bp_tensor *dst, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!buf || !src || !dst) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "copy_tensor needs src and dst");
    // Only plain byte copies between host buffers of this plugin; anything
    // else goes through the host's generic path.
    if (src->buffer_ctx == nullptr || !src->data || !dst->data || src->type != dst->type ||
        !bp_tensor_is_contiguous(src) || !bp_tensor_is_contiguous(dst))
      return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "copy_tensor only copies contiguous tensors of one type");
    size_t n = bp_tensor_nbytes(src);
    if (n != bp_tensor_nbytes(dst))
      return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "copy_tensor between tensors of different sizes");
    bp_status s = check_range(static_cast<host_buffer *>(buf), dst, 0, n, "copy_tensor", err);
    if (s != BP_OK) return s;
    std::memmove(dst->data, src->data, n);
    return BP_OK;
  });
}

bp_status buffer_clear(void *buf, uint8_t value, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *b = static_cast<host_buffer *>(buf);
    if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "clear needs a buffer");
    if (b->size) std::memset(b->data, value, b->size);
    return BP_OK;
  });
}

const char *buft_name(void *ctx) noexcept { return ctx ? static_cast<const char *>(ctx) : "Host"; }

bp_status buft_alloc(void *, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "alloc needs an out ref");
    out->iface = nullptr;
    out->ctx = nullptr;
    // aligned_alloc wants a multiple of the alignment; size 0 still gets a
    // real (tiny) block so base() is a valid pointer.
    if (size > SIZE_MAX - kAlignment)
      return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "cannot allocate %zu bytes", size);
    size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded == 0) rounded = kAlignment;
    void *data = std::aligned_alloc(kAlignment, rounded);
    if (!data) return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory allocating %zu bytes", size);
    auto *b = new (std::nothrow) host_buffer{data, size, true};
    if (!b) {
      std::free(data);
      return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    out->iface = &buffer_iface;
    out->ctx = b;
    return BP_OK;
  });
}

size_t buft_alignment(void *) noexcept { return kAlignment; }
int buft_is_host(void *) noexcept { return 1; }

const bp_buffer_i buffer_iface = {
    sizeof(bp_buffer_i),
    buffer_free,
    buffer_base,
    nullptr,  // init_tensor: nothing per tensor
    buffer_set_tensor,
    buffer_get_tensor,
    buffer_memset_tensor,
    buffer_copy_tensor,
    buffer_clear,
    nullptr,  // reset
    nullptr,  // set_usage
};

const bp_buffer_type_i buffer_type_iface = {
    sizeof(bp_buffer_type_i),
    buft_name,
    buft_alloc,
    buft_alignment,
    nullptr,  // max_size: SIZE_MAX
    nullptr,  // alloc_size: bp_tensor_nbytes
    buft_is_host,
};

}  // namespace

bp_buffer_type_ref host_buffer_type(const char *name) {
  return bp_buffer_type_ref{&buffer_type_iface, const_cast<char *>(name)};
}

bool is_host_buffer_type(bp_buffer_type_ref buft) {
  const bp_buffer_type_i *i = buft.iface;
  if (!i) return false;
  if (i == &buffer_type_iface) return true;
  if (i->struct_size < offsetof(bp_buffer_type_i, is_host) + sizeof(i->is_host) || !i->is_host) return false;
  return i->is_host(buft.ctx) != 0;
}

bp_status wrap_host_ptr(void *ptr, size_t size, bp_buffer_ref *out, bp_error *err) {
  if (!out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "buffer_from_host_ptr needs an out ref");
  out->iface = nullptr;
  out->ctx = nullptr;
  if (!ptr && size > 0)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "buffer_from_host_ptr got NULL for %zu bytes", size);
  auto *b = new host_buffer{ptr, size, false};
  out->iface = &buffer_iface;
  out->ctx = b;
  return BP_OK;
}

}  // namespace bp::plugins
