// plugin_lifetime.cpp: the reference count that keeps a plugin's code
// mapped while any of its backends, buffers or events is alive.
//
// The core owns the count (plugin_core::live_objects): every backend, buffer
// and event takes one reference when it is created and drops it when freed.
// The registry only reads it: bp_plugin_unload and bp_runtime_shutdown
// refuse while it is above 0 (PLG-12, docs/failures.md #17).
#include <atomic>
#include <string>

#include "core/handles.hpp"
#include "core/log.hpp"

namespace bp::core {

void plugin_retain(plugin_core *p) {
  if (p) p->live_objects.fetch_add(1, std::memory_order_relaxed);
}

void plugin_release(plugin_core *p) {
  if (!p) return;
  long before = p->live_objects.fetch_sub(1, std::memory_order_acq_rel);
  if (before <= 0) {
    // A release without a retain is our bug; keep the count sane.
    p->live_objects.fetch_add(1, std::memory_order_relaxed);
    log(BP_LOG_ERROR, "core", "plugin_release without plugin_retain on '" + p->name + "'");
  }
}

}  // namespace bp::core
