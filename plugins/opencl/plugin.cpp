// plugin.cpp: the opencl plugin's exported descriptor and entry, the plugin
// table (init, shutdown, enumerate, devices, parameter schema) and the
// logging and error helpers the other files share.
//
// init only stores the host table: loading the plugin costs nothing. The
// OpenCL platforms are asked for in enumerate, which the host calls when a
// device of this plugin is first listed or asked for; contexts and programs
// come later still (device.cpp, program_cache.cpp).
#include <CL/cl.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "backplane/plugin_guard.hpp"
#include "opencl.hpp"

namespace bp::opencl {
namespace {

// The host table handed to bp_plugin_entry, read by the next init (which has
// no host argument). A plain pointer: constant-initialised, no constructor.
const bp_host_api *g_host = nullptr;

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

bp_status plugin_init(void **out_plugin, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!out_plugin) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "opencl: init needs an out pointer");
    *out_plugin = nullptr;
    auto *state = new plugin_state();
    state->host = g_host;
    *out_plugin = state;
    return BP_OK;
  });
}

void plugin_shutdown(void *plugin) noexcept { delete static_cast<plugin_state *>(plugin); }

bp_status plugin_enumerate(void *plugin, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!plugin) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "opencl: enumerate needs the plugin");
    return enumerate_devices(static_cast<plugin_state *>(plugin), err);
  });
}

uint32_t plugin_device_count(void *plugin) noexcept {
  return plugin_guard_value(0u, [&] {
    auto *state = static_cast<plugin_state *>(plugin);
    if (!state) return 0u;
    // A host that predates the enumerate slot asks for the count directly.
    if (!state->enumerated) enumerate_devices(state, nullptr);
    return static_cast<uint32_t>(state->devices.size());
  });
}

bp_status plugin_device_get(void *plugin, uint32_t index, bp_device_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *state = static_cast<plugin_state *>(plugin);
    if (!state || !out)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "opencl: device_get needs a plugin and an out ref");
    out->iface = nullptr;
    out->ctx = nullptr;
    if (index >= state->devices.size())
      return bp_error_setf(err, BP_ERR_NOT_FOUND, "opencl: no device %u (%zu devices)", index, state->devices.size());
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

std::string cl_error_name(cl_int code) {
  const char *name = "CL error";
  switch (code) {
    case CL_DEVICE_NOT_FOUND:
      name = "CL_DEVICE_NOT_FOUND";
      break;
    case CL_DEVICE_NOT_AVAILABLE:
      name = "CL_DEVICE_NOT_AVAILABLE";
      break;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
      name = "CL_MEM_OBJECT_ALLOCATION_FAILURE";
      break;
    case CL_OUT_OF_RESOURCES:
      name = "CL_OUT_OF_RESOURCES";
      break;
    case CL_OUT_OF_HOST_MEMORY:
      name = "CL_OUT_OF_HOST_MEMORY";
      break;
    case CL_BUILD_PROGRAM_FAILURE:
      name = "CL_BUILD_PROGRAM_FAILURE";
      break;
    case CL_INVALID_VALUE:
      name = "CL_INVALID_VALUE";
      break;
    case CL_INVALID_BUFFER_SIZE:
      name = "CL_INVALID_BUFFER_SIZE";
      break;
    case CL_INVALID_BINARY:
      name = "CL_INVALID_BINARY";
      break;
    case CL_INVALID_KERNEL_ARGS:
      name = "CL_INVALID_KERNEL_ARGS";
      break;
    case CL_INVALID_WORK_GROUP_SIZE:
      name = "CL_INVALID_WORK_GROUP_SIZE";
      break;
    case CL_INVALID_ARG_SIZE:
      name = "CL_INVALID_ARG_SIZE";
      break;
    case CL_INVALID_ARG_VALUE:
      name = "CL_INVALID_ARG_VALUE";
      break;
    case CL_INVALID_KERNEL_NAME:
      name = "CL_INVALID_KERNEL_NAME";
      break;
    case -1001:
      name = "CL_PLATFORM_NOT_FOUND_KHR";
      break;
    default:
      break;
  }
  return std::string(name) + " (" + std::to_string(code) + ")";
}

bp_status status_of(cl_int code) {
  switch (code) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
    case CL_INVALID_BUFFER_SIZE:
      return BP_ERR_OUT_OF_DEVICE_MEMORY;
    case CL_OUT_OF_HOST_MEMORY:
      return BP_ERR_OUT_OF_HOST_MEMORY;
    default:
      return BP_ERR_INTERNAL;
  }
}

const bp_plugin_i *plugin_entry_table(const bp_host_api *host) {
  g_host = host;
  return &plugin_iface;
}

}  // namespace bp::opencl

// The exported symbols, at global scope exactly as plugin.h declares them
// (so they carry its default visibility).
extern "C" {
const bp_plugin_descriptor_t bp_plugin_descriptor =
    BP_PLUGIN_DESCRIPTOR("opencl", "0.1.0", "OpenCL devices of every platform the ICD loader finds");

const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  if (host_abi != BP_PLUGIN_ABI_VERSION) {
    bp_error_setf(err, BP_ERR_INCOMPATIBLE, "opencl: built for plugin ABI %u, host speaks %u; rebuild the plugin",
                  (unsigned)BP_PLUGIN_ABI_VERSION, (unsigned)host_abi);
    return nullptr;
  }
  if (host && host->struct_size < offsetof(bp_host_api, log)) {
    bp_error_setf(err, BP_ERR_INCOMPATIBLE, "opencl: host services table too small (%u bytes)",
                  (unsigned)host->struct_size);
    return nullptr;
  }
  return bp::opencl::plugin_entry_table(host);
}
}  // extern "C"
