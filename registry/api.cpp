// api.cpp: the public read side of the registry (plugins, devices, rejects).
//
// Every listing call first loads every plugin file found (thread-safe; at
// most once per file, registry/demand.cpp), bp_registry_find_plugin only the files
// that may provide its name, and then reads the lists under the state mutex
// only, so it never waits for plugin code. Handles are checked for NULL and
// for their tag (docs/failures.md #24).
#include <cstring>

#include "core/tensor_util.hpp"
#include "registry/registry_internal.hpp"

namespace {

using namespace bp::registry;

bool valid_plugin(const bp_plugin *p, const char *fn) {
  if (p && p->tag == bp::core::TAG_PLUGIN) return true;
  bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s plugin handle", fn, p ? "invalid (unloaded?)" : "NULL");
  return false;
}

bool valid_device(const bp_device *d, const char *fn) {
  if (d && d->tag == bp::core::TAG_DEVICE) return true;
  bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s device handle", fn, d ? "invalid (plugin unloaded?)" : "NULL");
  return false;
}

// Loads every plugin file found; false (error set) after bp_runtime_shutdown.
bool discovered() { return bp::registry::ensure_all_loaded() != BP_ERR_FAILED_PRECONDITION; }

}  // namespace

extern "C" {

BP_API size_t bp_plugin_count(void) {
  BP_API_SCOPE();
  if (!discovered()) return 0;
  std::lock_guard<std::mutex> lock(state().state_mutex);
  return state().plugins.size();
}

BP_API bp_plugin *bp_plugin_get(size_t i) {
  BP_API_SCOPE();
  if (!discovered()) return nullptr;
  std::unique_lock<std::mutex> lock(state().state_mutex);
  size_t n = state().plugins.size();
  if (i < n) return state().plugins[i].get();
  lock.unlock();  // never log (set_error) under the state lock: callbacks may call us
  bp::core::set_errorf(BP_ERR_NOT_FOUND, "bp_plugin_get: index %zu out of range (%zu plugins loaded)", i, n);
  return nullptr;
}

BP_API bp_status bp_registry_find_plugin(const char *name, bp_plugin **out) {
  BP_API_SCOPE();
  if (out) *out = nullptr;
  if (!name || !out)
    return bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_registry_find_plugin: %s is NULL", name ? "out" : "name");
  if (bp_status st = ensure_named_loaded(name); st == BP_ERR_FAILED_PRECONDITION) return st;
  std::unique_lock<std::mutex> lock(state().state_mutex);
  bp_plugin *p = find_by_name_locked(name);
  lock.unlock();
  if (!p)
    return bp::core::set_errorf(BP_ERR_NOT_FOUND,
                                "no plugin named '%.64s' is loaded; bp-devices lists the plugins found and why a file "
                                "was refused",
                                name);
  *out = p;
  return BP_OK;
}

BP_API const char *bp_plugin_name(const bp_plugin *p) {
  BP_API_SCOPE();
  return valid_plugin(p, "bp_plugin_name") ? p->name.c_str() : nullptr;
}
BP_API const char *bp_plugin_version(const bp_plugin *p) {
  BP_API_SCOPE();
  return valid_plugin(p, "bp_plugin_version") ? p->version.c_str() : nullptr;
}
BP_API const char *bp_plugin_path(const bp_plugin *p) {
  BP_API_SCOPE();
  return valid_plugin(p, "bp_plugin_path") ? p->path.c_str() : nullptr;
}
BP_API const char *bp_plugin_description(const bp_plugin *p) {
  BP_API_SCOPE();
  return valid_plugin(p, "bp_plugin_description") ? p->description.c_str() : nullptr;
}
BP_API size_t bp_plugin_param_count(const bp_plugin *p) {
  BP_API_SCOPE();
  return valid_plugin(p, "bp_plugin_param_count") ? p->params.size() : 0;
}
BP_API const bp_param_info *bp_plugin_param(const bp_plugin *p, size_t i) {
  BP_API_SCOPE();
  if (!valid_plugin(p, "bp_plugin_param")) return nullptr;
  if (i >= p->params.size()) {
    bp::core::set_errorf(BP_ERR_NOT_FOUND, "bp_plugin_param: index %zu out of range (plugin '%s' has %zu)", i,
                         p->name.c_str(), p->params.size());
    return nullptr;
  }
  return &p->params[i];
}
BP_API size_t bp_plugin_device_count(const bp_plugin *p) {
  BP_API_SCOPE();
  if (!valid_plugin(p, "bp_plugin_device_count")) return 0;
  ensure_devices(const_cast<bp_plugin *>(p));
  return p->devices.size();
}
BP_API bp_status bp_plugin_status(const bp_plugin *p, const char **out_message) {
  BP_API_SCOPE();
  if (out_message) *out_message = nullptr;
  if (!valid_plugin(p, "bp_plugin_status")) return BP_ERR_INVALID_ARGUMENT;
  bp_status st = ensure_devices(const_cast<bp_plugin *>(p));
  if (st == BP_ERR_FAILED_PRECONDITION && !p->enumerated.load())
    return bp::core::set_error(st, "bp_plugin_status: called from inside a plugin load; ask again afterwards");
  if (out_message && st != BP_OK) *out_message = p->enumerate_message.c_str();
  return st;
}
BP_API bp_device *bp_plugin_device(const bp_plugin *p, size_t i) {
  BP_API_SCOPE();
  if (!valid_plugin(p, "bp_plugin_device")) return nullptr;
  ensure_devices(const_cast<bp_plugin *>(p));
  if (i >= p->devices.size()) {
    bp::core::set_errorf(BP_ERR_NOT_FOUND, "bp_plugin_device: index %zu out of range (plugin '%s' has %zu devices)", i,
                         p->name.c_str(), p->devices.size());
    return nullptr;
  }
  return p->devices[i].get();
}

BP_API size_t bp_rejected_count(void) {
  BP_API_SCOPE();
  if (!discovered()) return 0;
  std::lock_guard<std::mutex> lock(state().state_mutex);
  return state().rejected.size();
}

BP_API bp_status bp_rejected_get(size_t i, const char **out_path, bp_status *out_status, const char **out_message) {
  BP_API_SCOPE();
  if (out_path) *out_path = nullptr;
  if (out_message) *out_message = nullptr;
  if (out_status) *out_status = BP_OK;
  if (!discovered()) return BP_ERR_FAILED_PRECONDITION;
  std::unique_lock<std::mutex> lock(state().state_mutex);
  const auto &list = state().rejected;
  if (i >= list.size()) {
    size_t n = list.size();
    lock.unlock();
    return bp::core::set_errorf(BP_ERR_NOT_FOUND, "bp_rejected_get: index %zu out of range (%zu rejected)", i, n);
  }
  if (out_path) *out_path = list[i].path.c_str();
  if (out_status) *out_status = list[i].status;
  if (out_message) *out_message = list[i].message.c_str();
  return BP_OK;
}

BP_API size_t bp_device_count(void) {
  BP_API_SCOPE();
  if (!discovered()) return 0;
  ensure_all_devices();
  std::lock_guard<std::mutex> lock(state().state_mutex);
  size_t n = 0;
  for (auto &p : state().plugins) n += p->devices.size();
  return n;
}

BP_API bp_device *bp_device_get(size_t i) {
  BP_API_SCOPE();
  if (!discovered()) return nullptr;
  ensure_all_devices();
  std::unique_lock<std::mutex> lock(state().state_mutex);
  size_t total = 0;
  for (auto &p : state().plugins) {
    if (i < p->devices.size()) return p->devices[i].get();
    i -= p->devices.size();
    total += p->devices.size();
  }
  lock.unlock();
  bp::core::set_errorf(BP_ERR_NOT_FOUND, "bp_device_get: index out of range (%zu devices)", total);
  return nullptr;
}

BP_API bp_status bp_device_describe(const bp_device *dev, bp_device_info *out) {
  BP_API_SCOPE();
  if (!valid_device(dev, "bp_device_describe")) return BP_ERR_INVALID_ARGUMENT;
  if (!out) return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_device_describe: out is NULL");
  if (out->struct_size < sizeof(bp_device_info))
    return bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT,
                                "bp_device_describe: out->struct_size is %u; set it to sizeof(bp_device_info) (%zu)",
                                out->struct_size, sizeof(bp_device_info));
  out->name = dev->name.c_str();
  out->description = dev->description.c_str();
  out->id = dev->id.c_str();
  out->spec = dev->spec.c_str();
  out->type = dev->type;
  out->memory_total = dev->memory_total;
  out->memory_free = dev->memory_free;
  out->caps = dev->caps;
  out->index = dev->index;
  out->plugin = owner(dev);
  return BP_OK;
}

BP_API const char *bp_device_type_name(bp_device_type type) {
  // A C caller may pass any int: switch on the integer, not an enum load.
  switch (bp::core::enum_value(type)) {
    case BP_DEVICE_TYPE_CPU:
      return "CPU";
    case BP_DEVICE_TYPE_GPU:
      return "GPU";
    case BP_DEVICE_TYPE_IGPU:
      return "IGPU";
    case BP_DEVICE_TYPE_ACCEL:
      return "ACCEL";
  }
  return "UNKNOWN";
}

}  // extern "C"
