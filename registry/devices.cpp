// devices.cpp: turns a plugin's device tables into bp_device handles.
//
// Runs once per plugin: at load, after init succeeded, or, for a plugin with
// an enumerate slot (ABI 1.1), when one of its devices is first listed or
// asked for (PLG-21: an application that asks for "cpu" never pays for a
// Vulkan instance). Always under load_mutex, never under the state lock.
// Every device and buffer type table is checked here (PLG-5, PLG-9), the
// props strings are copied (PLG-14), and each device gets its spec string
// ("<plugin>:<index>", the exact text that selects it) and a stable id (the
// plugin's, else "<plugin>-<index>").
#include <cstring>
#include <set>
#include <vector>

#include "abi/tables.hpp"
#include "core/objects.hpp"
#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

std::string bounded(const char *s, size_t max) { return s ? std::string(s, strnlen(s, max)) : std::string(); }

bp_status plugin_failure(bp_status code, const bp_error &err, const std::string &context, std::string &message) {
  if (code <= BP_OK || code >= BP_STATUS_COUNT_) code = BP_ERR_INTERNAL;
  std::string detail = bounded(err.message, sizeof err.message);
  if (detail.empty()) detail = std::string("returned ") + bp_status_name(code) + " without a message";
  message = context + ": " + detail;
  return code;
}

// The core's buffer type message starts with the plugin and the device,
// which |who| already names: say them once.
std::string buft_failure(const bp_device *dev) {
  std::string m = bp_last_error();
  const std::string prefix = bp::core::plugin_name(dev) + ": device '" + bp::core::device_label(dev) + "': ";
  if (m.compare(0, prefix.size(), prefix) == 0) m.erase(0, prefix.size());
  return m;
}

bp_status make_device(bp_plugin *p, uint32_t index, std::set<std::string> &ids, std::unique_ptr<bp_device> &out,
                      std::string &message) {
  const std::string who = "plugin '" + p->name + "': device " + std::to_string(index);
  bp_device_ref ref{};
  bp_error err{};
  bp_status st = BP_OK;
  // Each slot call is guarded (PLG-10): see call_slot.
  if (!call_slot(who, "bp_plugin_i.device_get", message,
                 [&] { st = p->iface->device_get(p->ctx, index, &ref, &err); }))
    return BP_ERR_INTERNAL;
  if (st != BP_OK) return plugin_failure(st, err, who + ": device_get failed", message);
  const bp_device_i *di = ref.iface;
  std::string why = bp::abi::check_table(bp::abi::device_table, di);
  if (!why.empty()) {
    message = who + ": " + why;
    return BP_ERR_INCOMPATIBLE;
  }

  bp_device_props props{};
  props.struct_size = sizeof props;
  err = bp_error{};
  if (!call_slot(who, "bp_device_i.get_props", message, [&] { st = di->get_props(ref.ctx, &props, &err); }))
    return BP_ERR_INTERNAL;
  if (st != BP_OK) return plugin_failure(st, err, who + ": get_props failed", message);
  // Read the type as an integer: loading 99 into a bp_device_type is
  // undefined behaviour before it can be checked.
  int32_t type = 0;
  static_assert(sizeof type == sizeof props.type, "bp_device_type is 32 bits");
  std::memcpy(&type, &props.type, sizeof type);
  if (type < BP_DEVICE_TYPE_CPU || type > BP_DEVICE_TYPE_ACCEL) {
    message = who + ": unknown device type " + std::to_string(type) + " (PLG-9)";
    return BP_ERR_INCOMPATIBLE;
  }

  auto dev = std::make_unique<bp_device>();
  dev->plugin = p;
  dev->index = index;
  dev->ref = ref;
  dev->name = bounded(props.name, 256);
  if (dev->name.empty()) dev->name = p->name;
  dev->description = bounded(props.description, 1024);
  dev->type = static_cast<bp_device_type>(type);
  dev->caps = props.caps;
  dev->memory_total = props.memory_total;
  dev->memory_free = props.memory_free;
  dev->spec = p->name + ":" + std::to_string(index);
  std::string id = bounded(props.id, 256);
  if (!id.empty() && ids.count(id)) {
    bp::core::logf(BP_LOG_WARN, "registry", "%s: stable id '%s' is not unique; using '%s-%u' instead", who.c_str(),
                   id.c_str(), p->name.c_str(), index);
    id.clear();
  }
  if (id.empty()) id = p->name + "-" + std::to_string(index);
  ids.insert(id);
  dev->id = id;

  // Buffer type tables are checked here, at enumeration, with the device
  // (PLG-5); the core's wrapper says what is wrong, this adds where.
  bp_buffer_type_ref buft{};
  if (!call_slot(who, "bp_device_i.buffer_type", message, [&] { buft = di->buffer_type(ref.ctx); }))
    return BP_ERR_INTERNAL;
  if (!call_slot(who, "bp_buffer_type_i slots", message,
                 [&] { dev->buft = bp::core::buffer_type_wrap(dev.get(), buft); }))
    return BP_ERR_INTERNAL;
  if (!dev->buft) {
    message = who + ": default buffer type: " + buft_failure(dev.get());
    return BP_ERR_INCOMPATIBLE;
  }
  if (BP_HAS_SLOT(di, bp_device_i, host_buffer_type)) {
    bp_buffer_type_ref host{};
    if (!call_slot(who, "bp_device_i.host_buffer_type", message, [&] { host = di->host_buffer_type(ref.ctx); }))
      return BP_ERR_INTERNAL;
    if (host.iface) {
      if (!call_slot(who, "bp_buffer_type_i slots", message,
                     [&] { dev->host_buft = bp::core::buffer_type_wrap(dev.get(), host); }))
        return BP_ERR_INTERNAL;
      if (!dev->host_buft) {
        message = who + ": host buffer type: " + buft_failure(dev.get());
        return BP_ERR_INCOMPATIBLE;
      }
    }
  }
  out = std::move(dev);
  return BP_OK;
}

}  // namespace

namespace {

// Fills |out| from device_count/device_get (load_mutex held).
bp_status list_devices(bp_plugin *p, std::vector<std::unique_ptr<bp_device>> &out, std::string &message) {
  uint32_t n = 0;
  if (!call_slot("plugin '" + p->name + "'", "bp_plugin_i.device_count", message,
                 [&] { n = p->iface->device_count(p->ctx); }))
    return BP_ERR_INTERNAL;
  if (n > k_max_devices_per_plugin) {
    // A fixed capacity: clamp and say so (docs/failures.md #23).
    bp::core::logf(BP_LOG_WARN, "registry", "plugin '%s' reports %u devices; only the first %u are used (limit)",
                   p->name.c_str(), n, k_max_devices_per_plugin);
    n = k_max_devices_per_plugin;
  }
  std::set<std::string> ids;
  for (uint32_t i = 0; i < n; ++i) {
    std::unique_ptr<bp_device> dev;
    bp_status st = make_device(p, i, ids, dev, message);
    if (st != BP_OK) return st;
    out.push_back(std::move(dev));
  }
  return BP_OK;
}

bool has_enumerate(const bp_plugin *p) { return BP_HAS_SLOT(p->iface, bp_plugin_i, enumerate); }

}  // namespace

bp_status enumerate_devices(bp_plugin *p, std::string &message) {
  if (has_enumerate(p)) return BP_OK;  // deferred: ensure_devices
  std::vector<std::unique_ptr<bp_device>> devs;
  bp_status st = list_devices(p, devs, message);
  if (st != BP_OK) return st;
  p->devices = std::move(devs);
  p->enumerated.store(true, std::memory_order_release);
  return BP_OK;
}

namespace {

// The slow path: |p| is not dereferenced before it is known to be listed
// (an unload may have freed it since the caller found it).
bp_status enumerate_deferred(bp_plugin *p) {
  // A log callback fired by plugin code during a load must not load again.
  if (in_load_on_this_thread()) return BP_ERR_FAILED_PRECONDITION;
  std::lock_guard<std::mutex> load_lock(state().load_mutex);
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    if (!is_loaded_locked(p)) return BP_ERR_NOT_FOUND;
  }
  if (p->enumerated.load(std::memory_order_acquire)) return p->enumerate_status;
  load_scope scope;
  std::string message;
  bp_status st = BP_OK;
  std::vector<std::unique_ptr<bp_device>> devs;
  bp_error err{};
  if (!call_slot("plugin '" + p->name + "'", "bp_plugin_i.enumerate", message,
                 [&] { st = p->iface->enumerate(p->ctx, &err); })) {
    // The plugin stays listed with no devices instead of taking the
    // process down.
    st = BP_ERR_INTERNAL;
  } else if (st != BP_OK) {
    if (st <= BP_OK || st >= BP_STATUS_COUNT_) st = BP_ERR_INTERNAL;
    std::string detail = bounded(err.message, sizeof err.message);
    if (detail.empty()) detail = std::string("enumerate returned ") + bp_status_name(st) + " without a message";
    message = st == BP_ERR_UNAVAILABLE ? "plugin '" + p->name + "' is unavailable on this machine: " + detail
                                       : "plugin '" + p->name + "': device enumeration failed: " + detail + " (PLG-21)";
  } else {
    st = list_devices(p, devs, message);
  }
  if (st != BP_OK) devs.clear();
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    p->devices = std::move(devs);
    p->enumerate_status = st;
    p->enumerate_message = message;
    p->enumerated.store(true, std::memory_order_release);
  }
  if (st != BP_OK)
    bp::core::log(st == BP_ERR_UNAVAILABLE ? BP_LOG_INFO : BP_LOG_WARN, "registry", message);
  else
    bp::core::logf(BP_LOG_DEBUG, "registry", "plugin '%s': %zu devices enumerated on first use", p->name.c_str(),
                   p->devices.size());
  return st;
}

}  // namespace

bp_status ensure_devices(bp_plugin *p) {
  if (p->enumerated.load(std::memory_order_acquire)) return p->enumerate_status;
  return enumerate_deferred(p);
}

void ensure_devices_named(const std::string &name) {
  bp_plugin *p = nullptr;
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    p = find_by_name_locked(name);
    if (p && p->enumerated.load(std::memory_order_acquire)) return;
  }
  if (p) enumerate_deferred(p);
}

void ensure_all_devices() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    for (auto &p : state().plugins)
      if (!p->enumerated.load(std::memory_order_acquire)) names.push_back(p->name);
  }
  for (const std::string &name : names) ensure_devices_named(name);
}

}  // namespace bp::registry
