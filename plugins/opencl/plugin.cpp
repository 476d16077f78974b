// plugin.cpp: the opencl plugin's exported descriptor and entry, the plugin
// table (init, shutdown, enumerate, devices, parameter schema) and the
// logging and error helpers the other files share.
//
// init only stores the host table: loading the plugin costs nothing. The
// OpenCL platforms are asked for once, by the first of enumerate,
// device_count and device_get (the host calls enumerate when a device of
// this plugin is first listed or asked for); contexts and programs come
// later still (device.cpp, program_cache.cpp).
#include <CL/cl.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "backplane/plugin_guard.hpp"
#include "opencl.hpp"
#include "plugins/common/plugin_common.hpp"

namespace bp::opencl {
namespace {

const bp_param_info params_schema[] = {
    {sizeof(bp_param_info), "platform", BP_PARAM_INT, "-1",
     "count the device index within this platform (opencl:platform=1,device=0); -1 = across all platforms", -1, 1024},
    {sizeof(bp_param_info), "cache", BP_PARAM_BOOL, "true",
     "keep built program binaries on disk so the next process does not compile", 0, 0},
    {sizeof(bp_param_info), "cache_dir", BP_PARAM_STRING, "",
     "program cache folder; default $BP_CACHE_DIR, else $XDG_CACHE_HOME/backplane, else ~/.cache/backplane", 0, 0},
    {sizeof(bp_param_info), "matmul_cols", BP_PARAM_INT, "0",
     "MUL_MAT columns of b per work-item (1, 2 or 4; each takes 4 rows of a); 0 = chosen for the device", 0, 4},
    {sizeof(bp_param_info), "matmul_width", BP_PARAM_INT, "0",
     "MUL_MAT float lanes per vector along k (4, 8 or 16); 0 = the device's preferred width", 0, 16},
};

// The devices, found once by whichever of enumerate, device_count and
// device_get comes first (plugins/common/plugin_common.hpp).
bp_status find_devices(plugin_state *state, bp_error *err) {
  return state->found.once(err, [&](bp_error *e) { return enumerate_devices(state, e); });
}

bp_status plugin_init(void **out_plugin, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!out_plugin) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "init needs an out pointer");
    *out_plugin = nullptr;
    auto *state = new plugin_state();
    state->host = plugins::g_host;
    *out_plugin = state;
    return BP_OK;
  });
}

void plugin_shutdown(void *plugin) noexcept { delete static_cast<plugin_state *>(plugin); }

bp_status plugin_enumerate(void *plugin, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!plugin) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "enumerate needs the plugin");
    return find_devices(static_cast<plugin_state *>(plugin), err);
  });
}

uint32_t plugin_device_count(void *plugin) noexcept {
  return plugin_guard_value(0u, [&] {
    auto *state = static_cast<plugin_state *>(plugin);
    if (!state) return 0u;
    find_devices(state, nullptr);  // a host of ABI 1.0 has no enumerate: the count comes first
    return static_cast<uint32_t>(state->devices.size());
  });
}

bp_status plugin_device_get(void *plugin, uint32_t index, bp_device_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *state = static_cast<plugin_state *>(plugin);
    if (!state || !out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "device_get needs a plugin and an out ref");
    out->iface = nullptr;
    out->ctx = nullptr;
    find_devices(state, nullptr);
    if (index >= state->devices.size())
      return bp_error_setf(err, BP_ERR_NOT_FOUND, "no device %u (%zu devices)", index, state->devices.size());
    out->iface = &device_iface;
    out->ctx = state->devices[index].get();
    return BP_OK;
  });
}

const bp_plugin_i plugin_iface = {
    sizeof(bp_plugin_i),
    plugin_init,
    plugin_shutdown,
    plugin_device_count,
    plugin_device_get,
    params_schema,
    sizeof(params_schema) / sizeof(params_schema[0]),
    plugin_enumerate,
};

}  // namespace

const bp_plugin_i *plugin_table() { return &plugin_iface; }

}  // namespace bp::opencl

// The exported symbols, at global scope exactly as plugin.h declares them
// (so they carry its default visibility).
extern "C" {
const bp_plugin_descriptor_t bp_plugin_descriptor =
    BP_PLUGIN_DESCRIPTOR("opencl", "0.1.0", "OpenCL devices of every platform the ICD loader finds");

const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  return bp::plugins::plugin_entry(host_abi, host, err, bp::opencl::plugin_table());
}
}  // extern "C"
