// buffer_slots.hpp: the bp_buffer_i and bp_buffer_type_i slots of a
// plugin's buffers, written once around the plugin's transport. Every slot
// runs the same steps in the same order: plugin_guard; the buffer (or
// buffer type) checked; the liveness of its device or session, the first
// check after that; the byte range inside the buffer (window_check); only
// then the plugin's transport call, at a byte offset inside the buffer.
// Both tables are here too (buffer_table, type_table): a plugin's buffer
// file holds only its Transport. Below: async_transfer_slots, the same for
// a backend's set/get_tensor_async, and opaque_range.
//
// Transport (all static; |at| is a byte offset inside the buffer, after the
// checks; |t| names the tensor for messages, NULL for a whole-buffer call):
//   using buffer = ...;     // the plugin's buffer object
//   using type_ctx = ...;   // the ctx of its buffer type
//   static constexpr const char *default_name;  // name() of a NULL type
//   static constexpr size_t default_alignment;  // alignment() of a NULL type
//   static constexpr const char *copy_where;    // copy_precondition's |where|
//   static buffer *as_buffer(void *buf);        // NULL unless one of ours
//   static bp_status alive(buffer *, bp_error *);  // device/session liveness
//   static memory_window window(const buffer *);
//   static void destroy(buffer *);
//   static bp_status write(buffer *, const bp_tensor *t, size_t at, const void *data, size_t size, bp_error *);
//   static bp_status read(buffer *, const bp_tensor *t, size_t at, void *data, size_t size, bp_error *);
//   static bp_status fill(buffer *, const bp_tensor *t, size_t at, uint8_t value, size_t size, bp_error *);
//   static bp_status clear(buffer *, uint8_t value, bp_error *);
//   static buffer *source_of(const bp_tensor *src);     // src's buffer, when ours
//   static bool same_memory(const buffer *src, const buffer *dst);  // copy directly?
//   static bp_status copy(buffer *src, size_t src_at, buffer *dst, size_t dst_at, size_t n,
//                         const bp_tensor *dst_t, bp_error *);
//   static const char *name(const type_ctx *);
//   static bp_status alloc(type_ctx *, size_t size, buffer **out, bp_error *);
//   static size_t alignment(const type_ctx *);
//   static size_t max_size(const type_ctx *);
//   static bool is_host(const type_ctx *);
#pragma once

#include <cstddef>
#include <cstdint>

#include "backplane/plugin.h"
#include "backplane/plugin_guard.hpp"
#include "memory_window.hpp"

namespace bp::plugins {

template <typename Transport>
struct buffer_slots {
  using T = Transport;
  using buffer = typename T::buffer;
  using type_ctx = typename T::type_ctx;

  static const bp_buffer_i buffer_table;
  static const bp_buffer_type_i type_table;

  // The checks of set, get and memset: a buffer of ours, alive, the range
  // inside it; |*at| = the range's byte offset inside the buffer.
  static bp_status target(buffer *b, const bp_tensor *t, size_t offset, size_t size, const char *what, size_t *at,
                          bp_error *err) {
    if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s needs a buffer", what);
    if (bp_status s = T::alive(b, err); s != BP_OK) return s;
    const memory_window w = T::window(b);
    if (bp_status s = window_check(w, t, offset, size, what, err); s != BP_OK || size == 0) return s;
    *at = window_offset(w, t) + offset;
    return BP_OK;
  }

  static void free(void *buf) noexcept {
    plugin_guard(nullptr, [&] {
      if (buffer *b = T::as_buffer(buf)) T::destroy(b);
      return BP_OK;
    });
  }

  static void *base(void *buf) noexcept {
    buffer *b = T::as_buffer(buf);
    return b ? const_cast<char *>(T::window(b).base) : nullptr;
  }

  // set, get and memset: guarded, the checks of target, then |transport|
  // (bp_status(buffer *, size_t at)) unless the size is 0.
  template <typename Transfer>
  static bp_status in_window(void *buf, const bp_tensor *t, size_t offset, size_t size, const char *what, bp_error *err,
                             Transfer &&transport) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      buffer *b = T::as_buffer(buf);
      size_t at = 0;
      if (bp_status s = target(b, t, offset, size, what, &at, err); s != BP_OK || size == 0) return s;
      return transport(b, at);
    });
  }

  static bp_status set_tensor(void *buf, bp_tensor *t, const void *data, size_t offset, size_t size,
                              bp_error *err) noexcept {
    return in_window(buf, t, offset, size, "set_tensor", err, [&](buffer *b, size_t at) {
      if (!data) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "set_tensor with NULL data");
      return T::write(b, t, at, data, size, err);
    });
  }

  static bp_status get_tensor(void *buf, const bp_tensor *t, void *data, size_t offset, size_t size,
                              bp_error *err) noexcept {
    return in_window(buf, t, offset, size, "get_tensor", err, [&](buffer *b, size_t at) {
      if (!data) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "get_tensor with NULL data");
      return T::read(b, t, at, data, size, err);
    });
  }

  static bp_status memset_tensor(void *buf, bp_tensor *t, uint8_t value, size_t offset, size_t size,
                                 bp_error *err) noexcept {
    return in_window(buf, t, offset, size, "memset_tensor", err,
                     [&](buffer *b, size_t at) { return T::fill(b, t, at, value, size, err); });
  }

  // Device-side copies only between buffers the plugin copies directly
  // (same_memory); anything else is UNIMPLEMENTED and goes through the
  // host's generic path. Both ranges are checked: nothing outside either
  // buffer is touched.
  static bp_status copy_tensor(void *buf, const bp_tensor *src, bp_tensor *dst, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      buffer *db = T::as_buffer(buf);
      if (!db) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "copy_tensor needs a buffer");
      if (bp_status s = T::alive(db, err); s != BP_OK) return s;
      buffer *sb = src ? T::source_of(src) : nullptr;
      if (bp_status s = copy_precondition(sb && T::same_memory(sb, db), src, dst, T::copy_where, err); s != BP_OK)
        return s;
      const size_t n = bp_tensor_nbytes(src);
      const memory_window dw = T::window(db), sw = T::window(sb);
      if (bp_status s = window_check(dw, dst, 0, n, "copy_tensor", err); s != BP_OK || n == 0) return s;
      if (bp_status s = window_check(sw, src, 0, n, "copy_tensor", err); s != BP_OK) return s;
      return T::copy(sb, window_offset(sw, src), db, window_offset(dw, dst), n, dst, err);
    });
  }

  static bp_status clear(void *buf, uint8_t value, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      buffer *b = T::as_buffer(buf);
      if (!b) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "clear needs a buffer");
      if (bp_status s = T::alive(b, err); s != BP_OK) return s;
      return T::clear(b, value, err);
    });
  }

  static const char *type_name(void *ctx) noexcept {
    return ctx ? T::name(static_cast<const type_ctx *>(ctx)) : T::default_name;
  }

  static bp_status type_alloc(void *ctx, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!ctx || !out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "alloc needs a buffer type and an out ref");
      out->iface = nullptr;
      out->ctx = nullptr;
      buffer *b = nullptr;
      if (bp_status s = T::alloc(static_cast<type_ctx *>(ctx), size, &b, err); s != BP_OK) return s;
      out->iface = &buffer_table;
      out->ctx = b;
      return BP_OK;
    });
  }

  static size_t type_alignment(void *ctx) noexcept {
    return ctx ? T::alignment(static_cast<const type_ctx *>(ctx)) : T::default_alignment;
  }

  static size_t type_max_size(void *ctx) noexcept {
    return plugin_guard_value(SIZE_MAX,
                              [&] { return ctx ? T::max_size(static_cast<const type_ctx *>(ctx)) : SIZE_MAX; });
  }

  static int type_is_host(void *ctx) noexcept { return ctx && T::is_host(static_cast<const type_ctx *>(ctx)) ? 1 : 0; }
};

template <typename Transport>
const bp_buffer_i buffer_slots<Transport>::buffer_table = {
    sizeof(bp_buffer_i),
    free,
    base,
    nullptr,  // init_tensor: nothing per tensor
    set_tensor,
    get_tensor,
    memset_tensor,
    copy_tensor,
    clear,
    nullptr,  // reset
    nullptr,  // set_usage
};

template <typename Transport>
const bp_buffer_type_i buffer_slots<Transport>::type_table = {
    sizeof(bp_buffer_type_i),
    type_name,
    type_alloc,
    type_alignment,
    type_max_size,
    nullptr,  // alloc_size: bp_tensor_nbytes
    type_is_host,
};

// A fresh range of |bytes| of an opaque address space (never dereferenced)
// for a device buffer's base(), aligned to |align| (a power of two) and
// followed by a gap, so every buffer's tensors have distinct addresses.
// |next| is the plugin's counter of the space.
template <typename Counter>
char *opaque_range(Counter &next, size_t bytes, size_t align) {
  const uint64_t a = align ? align : 1;
  const uint64_t span = (static_cast<uint64_t>(bytes) + 2 * a + 4095) & ~uint64_t(4095);
  const uint64_t at = (next.fetch_add(span + a) + a - 1) & ~(a - 1);
  return reinterpret_cast<char *>(at);
}

// The backend-table slots set_tensor_async and get_tensor_async, written
// once around a plugin's queue. The same order as buffer_slots: the
// backend checked; its device's or session's liveness first; the target
// (transfer_target: the tensor in memory the backend reaches, the range
// inside its buffer); then the plugin's call, at a byte offset inside the
// buffer. Nothing is sent for a size of 0.
//
// Queue (all static):
//   using backend = ...;  using buffer = ...;
//   static constexpr const char *memory;  // what the backend reaches, for messages
//   static bp_status alive(backend *, bp_error *);
//   static buffer *buffer_of(const bp_tensor *);  // NULL unless one of ours
//   static bool reaches(const backend *, const buffer *);
//   static bp_status write(backend *, buffer *, size_t at, const void *data, size_t size, bp_error *);
//   static bp_status read(backend *, buffer *, size_t at, void *data, size_t size, bp_error *);
template <typename Queue>
struct async_transfer_slots {
  using Q = Queue;
  using backend = typename Q::backend;
  using buffer = typename Q::buffer;

  static bp_status target(backend *be, const bp_tensor *t, size_t offset, size_t size, buffer **out, size_t *at,
                          bp_error *err) {
    if (!be) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "async transfer needs a backend");
    if (bp_status s = Q::alive(be, err); s != BP_OK) return s;
    buffer *b = Q::buffer_of(t);
    if (bp_status s = transfer_target(b, b && Q::reaches(be, b), t, offset, size, Q::memory, out, err);
        s != BP_OK || size == 0)
      return s;
    *at = static_cast<size_t>(static_cast<const char *>(t->data) - static_cast<const char *>(b->base)) + offset;
    return BP_OK;
  }

  // Guarded, the checks of target, then |call| (bp_status(backend *,
  // buffer *, size_t at)) unless the size is 0.
  template <typename Call>
  static bp_status to_target(void *backend_ctx, const bp_tensor *t, size_t offset, size_t size, bp_error *err,
                             Call &&call) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      auto *be = static_cast<backend *>(backend_ctx);
      buffer *b = nullptr;
      size_t at = 0;
      if (bp_status s = target(be, t, offset, size, &b, &at, err); s != BP_OK || size == 0) return s;
      return call(be, b, at);
    });
  }

  static bp_status set_async(void *backend_ctx, bp_tensor *t, const void *data, size_t offset, size_t size,
                             bp_error *err) noexcept {
    return to_target(backend_ctx, t, offset, size, err,
                     [&](backend *be, buffer *b, size_t at) { return Q::write(be, b, at, data, size, err); });
  }

  static bp_status get_async(void *backend_ctx, const bp_tensor *t, void *data, size_t offset, size_t size,
                             bp_error *err) noexcept {
    return to_target(backend_ctx, t, offset, size, err,
                     [&](backend *be, buffer *b, size_t at) { return Q::read(be, b, at, data, size, err); });
  }
};

}  // namespace bp::plugins
