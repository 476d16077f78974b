// plugin.cpp: the vulkan plugin's exported descriptor and entry, the plugin
// table and its parameter schema. init only stores the host table: the
// VkInstance is created once, by the first of enumerate, device_count and
// device_get (the host calls enumerate when a vulkan device is first listed
// or asked for), so a process that only uses the cpu plugin never loads a
// Vulkan driver.
#include <cstdio>
#include <cstring>

#include "backplane/plugin_guard.hpp"
#include "plugin_common.hpp"
#include "vulkan.hpp"

namespace bp::vk {
namespace {

const bp_param_info params_schema[] = {
    {sizeof(bp_param_info), "f16", BP_PARAM_BOOL, "true",
     "run f16 tensors with 16-bit storage when the device has it; false refuses them (they run elsewhere)", 0, 1},
    {sizeof(bp_param_info), "fast_paths", BP_PARAM_BOOL, "true",
     "texel-buffer shaders for MUL_MAT and elementwise ops; false keeps only the general shaders", 0, 1},
    {sizeof(bp_param_info), "fuse", BP_PARAM_BOOL, "true",
     "on CPU-type devices, run a norm and its MUL, or a MUL_MAT and its ADD/MUL/SILU, as one dispatch", 0, 1},
    {sizeof(bp_param_info), "tile_cols", BP_PARAM_INT, "0",
     "MUL_MAT register tile columns, at most (8, 16 or 32); 0 = the device's choice (32 on CPU-type devices, else 8)",
     0, 32},
    {sizeof(bp_param_info), "mul_mat", BP_PARAM_STRING, "auto",
     "MUL_MAT shaders: auto (GPU-shaped on GPUs, CPU-shaped on CPU-type devices), cpu or gpu (forced)", 0, 0},
    {sizeof(bp_param_info), "mul_mv", BP_PARAM_STRING, "auto",
     "GPU-shaped matrix x vector products: subgroup (a subgroup per row, no barrier), workgroup (a workgroup per "
     "row); auto = subgroup",
     0, 0},
    {sizeof(bp_param_info), "attention", BP_PARAM_STRING, "auto",
     "ATTENTION shaders: row (a workgroup per query row), tile (8 query rows per workgroup, keys staged in shared "
     "memory) or split (several workgroups per row over runs of the keys, then a merge); auto = on GPUs tile for "
     "prompts and split for a decode step over 512 keys or more, else row",
     0, 0},
    {sizeof(bp_param_info), "coopmat", BP_PARAM_BOOL, "false",
     "GPU-sized MUL_MAT on cooperative matrices (VK_NV_cooperative_matrix, f16 x f16 -> f32 16x16x16 tiles); "
     "refused where the device has none",
     0, 1},
    {sizeof(bp_param_info), "profile", BP_PARAM_BOOL, "false",
     "time every dispatch (serialised, no graph plans) and log the time per op at info level when the backend is freed",
     0, 1},
};

using lifecycle = plugins::plugin_lifecycle<plugin_state>;  // init keeps the host table, nothing more

// Creates the instance and describes every physical device; run once, by
// devices::find.
bp_status enumerate_devices(plugin_state *state, bp_error *err) {
  uint32_t loader_version = VK_API_VERSION_1_0;
  vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2)
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "the Vulkan loader supports only %u.%u; 1.2 is needed",
                         VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
  VkApplicationInfo app{
      VK_STRUCTURE_TYPE_APPLICATION_INFO, nullptr, "backplane", 1, "backplane", 1, VK_API_VERSION_1_2};
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, nullptr, 0, &app, 0, nullptr, 0, nullptr};
  VkResult r = vkCreateInstance(&ici, nullptr, &state->instance);
  if (r != VK_SUCCESS) {
    state->instance = VK_NULL_HANDLE;
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "vkCreateInstance failed (%s): no Vulkan driver is installed?",
                         vk_result_name(r));
  }
  uint32_t n = 0;
  r = vkEnumeratePhysicalDevices(state->instance, &n, nullptr);
  std::vector<VkPhysicalDevice> phys(n);
  if (r == VK_SUCCESS && n) r = vkEnumeratePhysicalDevices(state->instance, &n, phys.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "vkEnumeratePhysicalDevices failed (%s)", vk_result_name(r));
  for (uint32_t i = 0; i < n; ++i) {
    auto dev = std::make_unique<device_state>();
    if (device_describe(state, phys[i], static_cast<uint32_t>(state->devices.size()), dev.get()))
      state->devices.push_back(std::move(dev));
  }
  if (state->devices.empty())
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "%u physical device(s), none usable (see the log for why)", n);
  bp_host_logf(state->host, BP_LOG_DEBUG, "%zu device(s)", state->devices.size());
  return BP_OK;
}

// Devices found once, by the first of enumerate, device_count and
// device_get (plugins/common/plugin_common.hpp).
using devices = plugins::device_list<plugin_state, enumerate_devices, &device_iface>;

const bp_plugin_i plugin_iface = plugins::plugin_table_of<lifecycle, devices>(params_schema);

}  // namespace

plugin_state::~plugin_state() {
  devices.clear();  // devices before the instance they came from
  if (instance) vkDestroyInstance(instance, nullptr);
}

const char *vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
      return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VK_ERROR (other)";
  }
}

bp_status status_of(VkResult r) {
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return BP_ERR_OUT_OF_HOST_MEMORY;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS:
      return BP_ERR_OUT_OF_DEVICE_MEMORY;
    case VK_ERROR_DEVICE_LOST:
      return BP_ERR_DEVICE_LOST;
    case VK_ERROR_INITIALIZATION_FAILED:
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return BP_ERR_UNAVAILABLE;
    default:
      return BP_ERR_INTERNAL;
  }
}

const bp_plugin_i *plugin_table() { return &plugin_iface; }

}  // namespace bp::vk

// The exported symbols, defined at global scope exactly as plugin.h declares
// them (so they get its default visibility and external linkage).
extern "C" const bp_plugin_descriptor_t bp_plugin_descriptor = BP_PLUGIN_DESCRIPTOR(
    "vulkan", "0.1.0", "Vulkan compute: SPIR-V shaders on every Vulkan device (lavapipe included)");

extern "C" const bp_plugin_i *bp_plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err) {
  return bp::plugins::plugin_entry(host_abi, host, err, bp::vk::plugin_table());
}
