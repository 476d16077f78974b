// memory_window.hpp: the checks every plugin's buffer slots run before they
// touch memory, written once: a tensor's byte range inside its buffer, and
// the precondition of a device-side copy_tensor. Each plugin's buffer file
// keeps only its liveness check (device or session) and its transport.
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

// UNIMPLEMENTED (the host then copies through host memory) unless |src| is
// in memory this plugin can copy from directly (|reachable|), and both
// tensors have one type, are contiguous and have the same size. |where|
// says what "directly" means for the plugin ("within one device").
bp_status copy_precondition(bool reachable, const bp_tensor *src, const bp_tensor *dst, const char *where,
                            bp_error *err);

}  // namespace bp::plugins
