// event.cpp: events, points in a backend's queue that order work between
// backends: bp_event_new, free, record, wait, synchronize.
//
// An event belongs to one device; only backends of that device may record
// it (the plugin reads the event's own context). A backend of another plugin
// cannot wait on it in its queue, so the host waits instead (correct, only
// less overlapped). An event holds one reference to its plugin.
#include <string>

#include "abi/tables.hpp"
#include "core/objects.hpp"

using namespace bp::core;

namespace {

bool event_ok(const bp_event *ev, const char *fn) {
  if (handle_ok(ev, TAG_EVENT)) return true;
  bad_handle(fn, "event", ev, TAG_EVENT);
  return false;
}

bool backend_ok(const bp_backend *be, const char *fn) {
  if (handle_ok(be, TAG_BACKEND)) return true;
  bad_handle(fn, "backend", be, TAG_BACKEND);
  return false;
}

bp_status host_wait(bp_event *ev, const std::string &what) {
  bp_error err{};
  bp_status st = ev->ref.iface->synchronize(ev->ref.ctx, &err);
  if (st != BP_OK) return plugin_failed(ev->device, st, err, what);
  return BP_OK;
}

}  // namespace

extern "C" {

BP_API bp_status bp_event_new(bp_device *dev, bp_event **out_event) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_event_new";
    if (out_event == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_event is NULL", fn);
    *out_event = nullptr;
    if (!handle_ok(dev, TAG_DEVICE)) return bad_handle(fn, "device", dev, TAG_DEVICE);
    if (bp_status st = check_not_lost(dev, fn); st != BP_OK) return st;
    if (!BP_HAS_SLOT(dev->ref.iface, bp_device_i, event_new)) {
      return set_errorf(BP_ERR_UNIMPLEMENTED,
                        "%s: device '%s' has no events (no BP_DEVICE_CAP_EVENTS): synchronize the backend instead", fn,
                        device_label(dev).c_str());
    }
    bp_error err{};
    bp_event_ref ref{};
    bp_status st = dev->ref.iface->event_new(dev->ref.ctx, &ref, &err);
    if (st != BP_OK) return plugin_failed(dev, st, err, "creating an event");
    std::string why = bp::abi::check_table(bp::abi::event_table, ref.iface);
    if (!why.empty()) {
      if (BP_HAS_SLOT(ref.iface, bp_event_i, free)) ref.iface->free(ref.ctx);
      return set_errorf(BP_ERR_INCOMPATIBLE, "%s: %s: the event returned: %s", fn, plugin_name(dev).c_str(),
                        why.c_str());
    }
    auto *ev = new (std::nothrow) bp_event();
    if (ev == nullptr) {
      ref.iface->free(ref.ctx);
      return set_errorf(BP_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    }
    ev->device = dev;
    ev->ref = ref;
    plugin_retain(dev->plugin);
    *out_event = ev;
    return BP_OK;
  });
}

BP_API void bp_event_free(bp_event *event) {
  BP_API_SCOPE();
  if (event == nullptr) return;
  if (!free_check(event, TAG_EVENT, "bp_event_free", "event")) return;
  bp::core::plugin_core *plugin = event->device->plugin;
  event->ref.iface->free(event->ref.ctx);
  retire_handle(event);
  plugin_release(plugin);
}

BP_API bp_status bp_event_record(bp_event *event, bp_backend *backend) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_event_record";
    if (!event_ok(event, fn) || !backend_ok(backend, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (event->device != backend->device) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: the event belongs to device '%s' but backend '%s' runs on '%s': record events on a "
                        "backend of their own device",
                        fn, device_label(event->device).c_str(), backend->name.c_str(),
                        device_label(backend->device).c_str());
    }
    if (bp_status st = check_not_lost(backend->device, fn); st != BP_OK) return st;
    if (!BP_HAS_SLOT(backend->ref.iface, bp_backend_i, event_record)) {
      return set_errorf(BP_ERR_UNIMPLEMENTED, "%s: backend '%s' cannot record events", fn, backend->name.c_str());
    }
    bp_error err{};
    bp_status st = backend->ref.iface->event_record(backend->ref.ctx, event->ref.ctx, &err);
    if (st != BP_OK) return plugin_failed(backend->device, st, err, "recording an event on '" + backend->name + "'");
    return BP_OK;
  });
}

BP_API bp_status bp_backend_wait_event(bp_backend *backend, bp_event *event) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_backend_wait_event";
    if (!backend_ok(backend, fn) || !event_ok(event, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (bp_status st = check_not_lost(backend->device, fn); st != BP_OK) return st;
    if (bp_status st = check_not_lost(event->device, fn); st != BP_OK) return st;
    const std::string what = "waiting for an event on '" + backend->name + "'";
    if (event->device->plugin != backend->device->plugin ||
        !BP_HAS_SLOT(backend->ref.iface, bp_backend_i, event_wait)) {
      return host_wait(event, what);
    }
    bp_error err{};
    bp_status st = backend->ref.iface->event_wait(backend->ref.ctx, event->ref.ctx, &err);
    if (st != BP_OK) return plugin_failed(backend->device, st, err, what);
    return BP_OK;
  });
}

BP_API bp_status bp_event_synchronize(bp_event *event) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_event_synchronize";
    if (!event_ok(event, fn)) return BP_ERR_INVALID_ARGUMENT;
    if (bp_status st = check_not_lost(event->device, fn); st != BP_OK) return st;
    return host_wait(event, "synchronizing an event");
  });
}

}  // extern "C"
