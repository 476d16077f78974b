// backend_init.cpp: the spec-string entry points that create backends.
//
// bp_backend_new("cpu:threads=2"), bp_backend_new_list("vulkan;cpu") and
// bp_backend_new_on_device(dev, "threads=2"): parse (pure), resolve against
// the registry (params.cpp, which loads only the plugins a spec names:
// demand.cpp), then hand validated, default-filled parameters to core's
// backend_create. No lock is held while the plugin runs.
#include "core/objects.hpp"  // backend_create
#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

bp_status create_from(const parsed_spec &spec, const std::string &context, bp_backend **out) {
  resolved_spec r;
  bp_status st = resolve_spec(spec, context, r);
  if (st != BP_OK) return st;
  st = bp::core::backend_create(r.device, r.values.data(), static_cast<uint32_t>(r.values.size()), r.device->spec, out);
  bp::core::plugin_release(r.device->plugin);  // the backend holds its own reference
  return st;
}

bp_status parse_failed(const spec_parse_result &parsed) { return bp::core::set_error(parsed.status, parsed.message); }

}  // namespace
}  // namespace bp::registry

extern "C" {

BP_API bp_status bp_backend_new(const char *spec, bp_backend **out_backend) {
  using namespace bp::registry;
  if (out_backend) *out_backend = nullptr;
  return bp::core::api_guard([&]() -> bp_status {
    if (!out_backend) return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_new: out_backend is NULL");
    if (!spec)
      return bp::core::set_error(BP_ERR_INVALID_ARGUMENT,
                                 "bp_backend_new: spec is NULL; pass e.g. \"cpu\" or \"auto\"");
    if (bp_status st = check_not_shut_down()) return st;
    spec_parse_result parsed = parse_spec(spec);
    if (parsed.status != BP_OK) return parse_failed(parsed);
    return create_from(parsed.specs.front(), "device spec " + quote_for_message(spec), out_backend);
  });
}

BP_API bp_status bp_backend_new_list(const char *list, bp_backend **out, size_t capacity, size_t *out_count) {
  using namespace bp::registry;
  if (out_count) *out_count = 0;
  return bp::core::api_guard([&]() -> bp_status {
    if (!list)
      return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_new_list: list is NULL; pass e.g. \"vulkan;cpu\"");
    if (!out && capacity > 0)
      return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_new_list: out is NULL but capacity > 0");
    // Without the count the caller cannot know which entries to free.
    if (!out_count)
      return bp::core::set_error(BP_ERR_INVALID_ARGUMENT,
                                 "bp_backend_new_list: out_count is NULL: pass a size_t to receive how many were made");
    if (bp_status st = check_not_shut_down()) return st;
    spec_parse_result parsed = parse_spec_list(list);
    if (parsed.status != BP_OK) return parse_failed(parsed);
    if (parsed.specs.size() > capacity)
      return bp::core::set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
                                  "bp_backend_new_list: the list names %zu backends but capacity is %zu; pass a larger "
                                  "array",
                                  parsed.specs.size(), capacity);
    // The plugins the list names load together, in search order.
    load_need need;
    for (const parsed_spec &s : parsed.specs) {
      need.all = need.all || s.name == "auto";
      need.names.push_back(s.name);
    }
    if (bp_status st = ensure_loaded(need)) return st;
    const std::string context = "device list " + quote_for_message(list);
    for (size_t i = 0; i < parsed.specs.size(); ++i) {
      out[i] = nullptr;
      bp_status st = create_from(parsed.specs[i], context, &out[i]);
      if (st != BP_OK) {
        // Whole or nothing: free what this call created (keeps the message).
        std::string message = bp_last_error();
        for (size_t j = 0; j < i; ++j) {
          bp_backend_free(out[j]);
          out[j] = nullptr;
        }
        return bp::core::set_error(st, message);
      }
    }
    if (out_count) *out_count = parsed.specs.size();
    return BP_OK;
  });
}

BP_API bp_status bp_backend_new_on_device(bp_device *dev, const char *params, bp_backend **out_backend) {
  using namespace bp::registry;
  if (out_backend) *out_backend = nullptr;
  return bp::core::api_guard([&]() -> bp_status {
    if (!out_backend)
      return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_new_on_device: out_backend is NULL");
    if (!dev || dev->tag != bp::core::TAG_DEVICE)
      return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_new_on_device: invalid device handle");
    if (bp_status st = check_not_shut_down()) return st;
    spec_parse_result parsed = parse_spec_params(params ? params : "");
    if (parsed.status != BP_OK) return parse_failed(parsed);
    const parsed_spec &spec = parsed.specs.front();
    const std::string context = "backend params " + quote_for_message(params ? params : "");
    for (const spec_param &p : spec.params)
      if (p.key == "device" || p.key == "id")
        return bp::core::set_error(BP_ERR_INVALID_ARGUMENT,
                                   "bad " + context + " at column " + std::to_string(p.column) +
                                       ": the device is given by the handle; drop '" + p.key + "'");
    {
      std::lock_guard<std::mutex> lock(state().state_mutex);
      if (!is_loaded_locked(owner(dev)))
        return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_new_on_device: the device's plugin is unloaded");
      bp::core::plugin_retain(dev->plugin);
    }
    resolved_spec r;
    bp_status st = fill_params(dev, spec, context, r);
    if (st == BP_OK)
      st = bp::core::backend_create(dev, r.values.data(), static_cast<uint32_t>(r.values.size()), dev->spec,
                                    out_backend);
    bp::core::plugin_release(dev->plugin);
    return st;
  });
}

}  // extern "C"
