// plugin.cpp: the cpu plugin's exported descriptor and entry, and the plugin
// table (init, shutdown, devices, parameter schema).
//
// Skeleton for a new plugin (copy this file, device.cpp and buffer.cpp):
//   1. Export exactly two symbols, built with -fvisibility=hidden:
//        bp_plugin_descriptor  const data: magic, ABI major/minor, name, version.
//                              The host reads it before running any code.
//        bp_plugin_entry       returns the plugin table (a const static), or
//                              NULL with |err| filled when the host is too old.
//      plugin.h declares both; define them as it shows, the descriptor with
//      BP_PLUGIN_DESCRIPTOR(name, version, description).
//   2. Every table (plugin, device, backend, buffer type, buffer, event) is a
//      const static struct with struct_size first; leave optional slots NULL.
//   3. Wrap every slot body in bp::plugin_guard so no exception escapes.
//   4. No static constructors, no thread_local, no atexit/signal hooks: state
//      (the host table included) lives in the object init_with_host()
//      returns and dies in shutdown().
//   5. Build: bp_add_plugin(name SOURCES ...) in CMake, or by hand
//      g++ -shared -fPIC -fvisibility=hidden -I<prefix>/include *.cpp -o libbp-name.so
// docs/plugin-guide.md walks through it.
#include <cstdio>
#include <new>

#include "backplane/plugin_guard.hpp"
#include "cpu.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "plugin_common.hpp"
#include "threadpool.hpp"

namespace bp::cpu {
namespace {

const bp_param_info params_schema[] = {
    {sizeof(bp_param_info), "threads", BP_PARAM_INT, "0", "worker threads for graph compute; 0 = one per CPU core", 0,
     256},
    {sizeof(bp_param_info), "fuse", BP_PARAM_BOOL, "true",
     "run a row op and the element-wise op that reads it (RMS_NORM then MUL, SILU then MUL, ...) as one task", 0, 1},
};

// What init adds to the shared lifecycle (plugins/common/plugin_common.hpp).
bp_status setup(plugin_state &state, bp_error *) {
  // The kernels' ISA in the description, so bp-devices shows which path
  // runs (BP_CPU_ISA caps it; plugins/common/isa.hpp).
  state.description = read_cpu_model() + ", kernels " + plugins::kernels_name();
  state.n_cores = plugins::count_cores();
  if (const char *w = plugins::isa_env_warning(); *w) bp_host_logf(state.host, BP_LOG_WARN, "%s", w);
  if (const char *w = stream_env_warning(); *w) bp_host_logf(state.host, BP_LOG_WARN, "%s", w);
  bp_host_logf(state.host, BP_LOG_DEBUG, "plugin ready, %u cores, %s", state.n_cores, state.description.c_str());
  return BP_OK;
}

using lifecycle = plugins::plugin_lifecycle<plugin_state, setup>;

uint32_t plugin_device_count(void *plugin) noexcept { return plugin ? 1u : 0u; }

bp_status plugin_device_get(void *plugin, uint32_t index, bp_device_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (!plugin || !out)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "device_get needs a plugin and an out pointer");
    out->iface = nullptr;
    out->ctx = nullptr;
    if (index != 0)
      return bp_error_setf(err, BP_ERR_NOT_FOUND, "no device %u (the cpu plugin has one device, 0)", index);
    out->iface = &device_iface;
    out->ctx = plugin;
    return BP_OK;
  });
}

const bp_plugin_i plugin_iface = {
    sizeof(bp_plugin_i),
    lifecycle::init,
    lifecycle::shutdown,
    plugin_device_count,
    plugin_device_get,
    params_schema,
    sizeof(params_schema) / sizeof(params_schema[0]),
    nullptr,  // enumerate: devices are cheap, listed at load
    lifecycle::init_with_host,
};

}  // namespace

// The exported symbols, defined as plugin.h declares them. Inside a
// namespace, extern "C" names the same global C symbols, but GCC takes the
// visibility from this declaration (hence BP_PLUGIN_EXPORT again) and a
// const object needs `extern` to keep external linkage.
extern "C" {
BP_PLUGIN_EXPORT extern const bp_plugin_descriptor_t bp_plugin_descriptor =
    BP_PLUGIN_DESCRIPTOR("cpu", "0.1.0", "reference and multi-threaded CPU kernels on host memory");

BP_PLUGIN_EXPORT const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  return plugins::plugin_entry(host_abi, host, err, &plugin_iface);
}
}  // extern "C"

}  // namespace bp::cpu
