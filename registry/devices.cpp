// devices.cpp: turns a plugin's device tables into bp_device handles.
//
// Runs once per plugin at load, after init succeeded (load_mutex held, no
// state lock). Every required device slot is checked here (PLG-9), the
// props strings are copied (PLG-14), and each device gets its spec string
// ("<plugin>:<index>", the exact text that selects it) and a stable id (the
// plugin's, else "<plugin>-<index>").
#include <cstring>
#include <set>

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

bp_status make_device(bp_plugin *p, uint32_t index, std::set<std::string> &ids, std::unique_ptr<bp_device> &out,
                      std::string &message) {
  const std::string who = "plugin '" + p->name + "': device " + std::to_string(index);
  bp_device_ref ref{};
  bp_error err{};
  bp_status st = p->iface->device_get(p->ctx, index, &ref, &err);
  if (st != BP_OK) return plugin_failure(st, err, who + ": device_get failed", message);
  const bp_device_i *di = ref.iface;
  if (!di) {
    message = who + ": device_get returned no table (PLG-9)";
    return BP_ERR_INCOMPATIBLE;
  }
  if (di->struct_size < sizeof(bp_device_i)) {
    message = who + ": device table is " + std::to_string(di->struct_size) + " bytes, ABI " +
              std::to_string(BP_PLUGIN_ABI_VERSION) + " needs at least " + std::to_string(sizeof(bp_device_i)) +
              " (PLG-9)";
    return BP_ERR_INCOMPATIBLE;
  }
  const char *missing = !di->get_props ? "get_props" : !di->backend_init ? "backend_init" : !di->buffer_type ? "buffer_type" : nullptr;
  if (missing) {
    message = who + ": required slot bp_device_i." + missing + " is NULL (PLG-9)";
    return BP_ERR_INCOMPATIBLE;
  }

  bp_device_props props{};
  props.struct_size = sizeof props;
  err = bp_error{};
  st = di->get_props(ref.ctx, &props, &err);
  if (st != BP_OK) return plugin_failure(st, err, who + ": get_props failed", message);
  if (props.type < BP_DEVICE_TYPE_CPU || props.type > BP_DEVICE_TYPE_ACCEL) {
    message = who + ": unknown device type " + std::to_string(props.type) + " (PLG-9)";
    return BP_ERR_INCOMPATIBLE;
  }

  auto dev = std::make_unique<bp_device>();
  dev->plugin = p;
  dev->index = index;
  dev->ref = ref;
  dev->name = bounded(props.name, 256);
  if (dev->name.empty()) dev->name = p->name;
  dev->description = bounded(props.description, 1024);
  dev->type = props.type;
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

  bp_buffer_type_ref buft = di->buffer_type(ref.ctx);
  if (!buft.iface) {
    message = who + ": buffer_type returned no table (PLG-9)";
    return BP_ERR_INCOMPATIBLE;
  }
  dev->buft = bp::core::buffer_type_wrap(dev.get(), buft);
  if (!dev->buft) {
    message = who + ": default buffer type: " + bp_last_error();
    return BP_ERR_INCOMPATIBLE;
  }
  if (BP_HAS_SLOT(di, bp_device_i, host_buffer_type)) {
    bp_buffer_type_ref host = di->host_buffer_type(ref.ctx);
    if (host.iface) {
      dev->host_buft = bp::core::buffer_type_wrap(dev.get(), host);
      if (!dev->host_buft) {
        message = who + ": host buffer type: " + bp_last_error();
        return BP_ERR_INCOMPATIBLE;
      }
    }
  }
  out = std::move(dev);
  return BP_OK;
}

}  // namespace

bp_status enumerate_devices(bp_plugin *p, std::string &message) {
  uint32_t n = p->iface->device_count(p->ctx);
  if (n > k_max_devices_per_plugin) {
    // A fixed capacity: clamp and say so (FAILURES.md #23).
    bp::core::logf(BP_LOG_WARN, "registry", "plugin '%s' reports %u devices; only the first %u are used (limit)",
                   p->name.c_str(), n, k_max_devices_per_plugin);
    n = k_max_devices_per_plugin;
  }
  std::set<std::string> ids;
  for (uint32_t i = 0; i < n; ++i) {
    std::unique_ptr<bp_device> dev;
    bp_status st = make_device(p, i, ids, dev, message);
    if (st != BP_OK) return st;
    p->devices.push_back(std::move(dev));
  }
  return BP_OK;
}

}  // namespace bp::registry
