// memory_window.hpp: the checks every plugin's buffer slots run before they
// touch memory, written once: a tensor's byte range inside its buffer, the
// target of an asynchronous transfer, and the precondition of a device-side
// copy_tensor. Each plugin keeps only its liveness check (device or
// session), as the first line of the slot, and its transport.
#pragma once

#include <cstddef>

#include "backplane/plugin.h"

namespace bp::plugins {

// A buffer's memory as its slots see it: the base address (real memory, or
// a reserved address range standing for device memory) and the size.
struct memory_window {
  const char *base = nullptr;
  size_t size = 0;
};

// INVALID_ARGUMENT unless |t| has memory and [t->data + offset, + size) lies
// inside |w| (overflow-safe); |what| names the slot in the message. A size
// of 0 passes. The host checked the range already; a plugin still never
// touches memory outside its buffer whatever it is handed.
bp_status window_check(const memory_window &w, const bp_tensor *t, size_t offset, size_t size, const char *what,
                       bp_error *err);

// Byte offset of |t|'s data inside |w| (after window_check).
inline size_t window_offset(const memory_window &w, const bp_tensor *t) {
  return static_cast<size_t>(static_cast<const char *>(t->data) - w.base);
}

// The target check of set_tensor_async and get_tensor_async: INVALID_ARGUMENT
// unless |t| lies in memory the backend reaches (|reachable|: the tensor's
// buffer is this plugin's and belongs to the backend's device or session;
// |w| is that buffer) and [offset, offset + size) lies inside the buffer.
// |memory| names what the backend reaches, for the message ("this backend's
// OpenCL device"). A size of 0 passes once the tensor is reachable.
bp_status transfer_target_check(bool reachable, const memory_window &w, const bp_tensor *t, size_t offset, size_t size,
                                const char *memory, bp_error *err);

// The same for a plugin's buffer object |b| (members base and size; NULL
// when |t| is in no buffer of this plugin): |*out| = |b| when it passes.
template <typename Buffer>
bp_status transfer_target(Buffer *b, bool reachable, const bp_tensor *t, size_t offset, size_t size, const char *memory,
                          Buffer **out, bp_error *err) {
  reachable = reachable && b != nullptr;
  const memory_window w = reachable
                              ? memory_window{static_cast<const char *>(static_cast<const void *>(b->base)), b->size}
                              : memory_window{};
  if (bp_status s = transfer_target_check(reachable, w, t, offset, size, memory, err); s != BP_OK) return s;
  *out = b;
  return BP_OK;
}

// UNIMPLEMENTED (the host then copies through host memory) unless |src| is
// in memory this plugin can copy from directly (|reachable|), and both
// tensors have one type, are contiguous and have the same size. |where|
// says what "directly" means for the plugin ("within one device").
bp_status copy_precondition(bool reachable, const bp_tensor *src, const bp_tensor *dst, const char *where,
                            bp_error *err);

}  // namespace bp::plugins
