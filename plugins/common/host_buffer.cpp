// host_buffer.cpp: see host_buffer.hpp.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "buffer_slots.hpp"
#include "host_buffer.hpp"

namespace bp::plugins {
namespace {

constexpr size_t kAlignment = 64;

struct host_buffer {
  uint32_t magic = 0x42484d42u;  // tells host buffers from anyone else's
  void *data = nullptr;
  size_t size = 0;
  bool owned = false;  // false: wraps caller memory (buffer_from_host_ptr)
};

// The transport of buffer_slots: host memory, no liveness to check, and
// copies between any two host buffers (this plugin's or another shipped
// host plugin's: the same struct).
struct host_transport {
  using buffer = host_buffer;
  using type_ctx = const char;  // the type's name
  static constexpr const char *default_name = "Host";
  static constexpr size_t default_alignment = kAlignment;
  static constexpr const char *copy_where = "between host buffers";

  static host_buffer *as_buffer(void *buf) {
    auto *b = static_cast<host_buffer *>(buf);
    return b && b->magic == host_buffer{}.magic ? b : nullptr;
  }
  static bp_status alive(host_buffer *, bp_error *) { return BP_OK; }
  static memory_window window(const host_buffer *b) { return {static_cast<const char *>(b->data), b->size}; }
  static char *at(host_buffer *b, size_t offset) { return static_cast<char *>(b->data) + offset; }
  static void destroy(host_buffer *b) {
    if (b->owned) std::free(b->data);
    delete b;
  }
  static bp_status write(host_buffer *b, const bp_tensor *, size_t at, const void *data, size_t size, bp_error *) {
    std::memcpy(host_transport::at(b, at), data, size);
    return BP_OK;
  }
  static bp_status read(host_buffer *b, const bp_tensor *, size_t at, void *data, size_t size, bp_error *) {
    std::memcpy(data, host_transport::at(b, at), size);
    return BP_OK;
  }
  static bp_status fill(host_buffer *b, const bp_tensor *, size_t at, uint8_t value, size_t size, bp_error *) {
    std::memset(host_transport::at(b, at), value, size);
    return BP_OK;
  }
  static bp_status clear(host_buffer *b, uint8_t value, bp_error *) {
    if (b->size) std::memset(b->data, value, b->size);
    return BP_OK;
  }
  static host_buffer *source_of(const bp_tensor *src) { return src->data ? as_buffer(src->buffer_ctx) : nullptr; }
  static bool same_memory(const host_buffer *, const host_buffer *) { return true; }
  static bp_status copy(host_buffer *src, size_t src_at, host_buffer *dst, size_t dst_at, size_t n, const bp_tensor *,
                        bp_error *) {
    std::memmove(at(dst, dst_at), at(src, src_at), n);
    return BP_OK;
  }

  static const char *name(const char *ctx) { return ctx; }
  static bp_status alloc(const char *, size_t size, host_buffer **out, bp_error *err) {
    // aligned_alloc wants a multiple of the alignment; size 0 still gets a
    // real (tiny) block so base() is a valid pointer.
    if (size > SIZE_MAX - kAlignment)
      return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "cannot allocate %zu bytes", size);
    size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded == 0) rounded = kAlignment;
    void *data = std::aligned_alloc(kAlignment, rounded);
    if (!data) return bp_error_setf(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory allocating %zu bytes", size);
    auto *b = new (std::nothrow) host_buffer{};
    if (!b) {
      std::free(data);
      return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    b->data = data;
    b->size = size;
    b->owned = true;
    *out = b;
    return BP_OK;
  }
  static size_t alignment(const char *) { return kAlignment; }
  static size_t max_size(const char *) { return SIZE_MAX; }
  static bool is_host(const char *) { return true; }
};

using slots = buffer_slots<host_transport>;

}  // namespace

bp_buffer_type_ref host_buffer_type(const char *name) {
  return bp_buffer_type_ref{&slots::type_table, const_cast<char *>(name)};
}

bool is_host_buffer_type(bp_buffer_type_ref buft) {
  const bp_buffer_type_i *i = buft.iface;
  if (!i) return false;
  if (i == &slots::type_table) return true;
  if (i->struct_size < offsetof(bp_buffer_type_i, is_host) + sizeof(i->is_host) || !i->is_host) return false;
  return i->is_host(buft.ctx) != 0;
}

bp_status wrap_host_ptr(void *ptr, size_t size, bp_buffer_ref *out, bp_error *err) {
  if (!out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "buffer_from_host_ptr needs an out ref");
  out->iface = nullptr;
  out->ctx = nullptr;
  if (!ptr && size > 0)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "buffer_from_host_ptr got NULL for %zu bytes", size);
  auto *b = new host_buffer{};
  b->data = ptr;
  b->size = size;
  out->iface = &slots::buffer_table;
  out->ctx = b;
  return BP_OK;
}

}  // namespace bp::plugins
