// device.cpp: one Backplane device per Vulkan physical device with a compute
// queue: its description (read at enumerate), the VkDevice (opened at first
// use), submission on a timeline semaphore, and the device table.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backplane/plugin_guard.hpp"
#include "plugin_common.hpp"
#include "vulkan.hpp"

namespace bp::vk {
namespace {

constexpr uint64_t kWaitTimeoutNs = 600ull * 1000 * 1000 * 1000;  // bounded: a hung device is lost

bool has_extension(const std::vector<VkExtensionProperties> &exts, const char *name) {
  for (const auto &e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice phys) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  if (n) vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, exts.data());
  exts.resize(n);
  return exts;
}

bp_device_type device_type_of(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return BP_DEVICE_TYPE_CPU;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return BP_DEVICE_TYPE_IGPU;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return BP_DEVICE_TYPE_GPU;
    default:
      return BP_DEVICE_TYPE_ACCEL;
  }
}

// Memory type with all |want| flags, preferring |prefer| too; UINT32_MAX if none.
uint32_t pick_memory_type(const VkPhysicalDeviceMemoryProperties &mp, VkMemoryPropertyFlags want,
                          VkMemoryPropertyFlags prefer) {
  uint32_t found = UINT32_MAX;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if ((f & prefer) == prefer) return i;
    if (found == UINT32_MAX) found = i;
  }
  return found;
}

void memory_budget(const device_state *d, uint64_t *total, uint64_t *free_bytes) {
  auto budget = vk_struct<VkPhysicalDeviceMemoryBudgetPropertiesEXT>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT);
  auto mp2 = vk_struct<VkPhysicalDeviceMemoryProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2);
  if (d->has_budget) mp2.pNext = &budget;
  vkGetPhysicalDeviceMemoryProperties2(d->phys, &mp2);
  *total = 0;
  *free_bytes = 0;
  for (uint32_t h = 0; h < mp2.memoryProperties.memoryHeapCount; ++h) {
    if (!(mp2.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    *total += mp2.memoryProperties.memoryHeaps[h].size;
    if (d->has_budget) {
      const uint64_t b = budget.heapBudget[h], u = budget.heapUsage[h];
      *free_bytes += b > u ? b - u : 0;
    }
  }
  if (!d->has_budget) *free_bytes = *total;
}

std::string hex_uuid(const uint8_t *u) {
  char s[VK_UUID_SIZE * 2 + 1];
  for (unsigned i = 0; i < VK_UUID_SIZE; ++i) std::snprintf(s + 2 * i, 3, "%02x", u[i]);
  return s;
}

// Whether mul_mat_coopmat.comp can run on |phys|: VK_NV_cooperative_matrix
// (cooperativeMatrix), shaderFloat16, a 16 x 16 x 16 subgroup tile of f16
// A and B into f32 C and D, subgroups of 32 (the shader's 8 subgroups of a
// 256-invocation workgroup) and the GPU-shaped products' limits.
bool coopmat_support(const plugin_state *plugin, VkPhysicalDevice phys, const std::vector<VkExtensionProperties> &exts,
                     const device_state *d) {
  if (!has_extension(exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) || d->subgroup_size != 32 || !d->gpu_mul_mat)
    return false;
  auto cm = vk_struct<VkPhysicalDeviceCooperativeMatrixFeaturesNV>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
  auto f12 = vk_struct<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  f12.pNext = &cm;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f12, {}};
  vkGetPhysicalDeviceFeatures2(phys, &f2);
  if (!cm.cooperativeMatrix || !f12.shaderFloat16) return false;
  auto props = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(plugin->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!props) return false;
  uint32_t n = 0;
  if (props(phys, &n, nullptr) != VK_SUCCESS || n == 0) return false;
  std::vector<VkCooperativeMatrixPropertiesNV> tiles(
      n, vk_struct<VkCooperativeMatrixPropertiesNV>(VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV));
  if (props(phys, &n, tiles.data()) != VK_SUCCESS) return false;
  for (uint32_t i = 0; i < n; ++i) {
    const VkCooperativeMatrixPropertiesNV &t = tiles[i];
    if (t.MSize == 16 && t.NSize == 16 && t.KSize == 16 && t.AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
        t.BType == VK_COMPONENT_TYPE_FLOAT16_NV && t.CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
        t.DType == VK_COMPONENT_TYPE_FLOAT32_NV && t.scope == VK_SCOPE_SUBGROUP_NV)
      return true;
  }
  return false;
}

}  // namespace

bool device_describe(plugin_state *plugin, VkPhysicalDevice phys, uint32_t index, device_state *d) {
  d->plugin = plugin;
  d->index = index;
  d->phys = phys;
  vkGetPhysicalDeviceProperties(phys, &d->props);
  const char *dev_name = d->props.deviceName;
  if (d->props.apiVersion < VK_API_VERSION_1_2) {
    bp_host_logf(plugin->host, BP_LOG_WARN, "skipping '%s': Vulkan %u.%u, 1.2 is needed", dev_name,
                 VK_API_VERSION_MAJOR(d->props.apiVersion), VK_API_VERSION_MINOR(d->props.apiVersion));
    return false;
  }
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf.data());
  // Prefer a compute queue without graphics (a dedicated compute engine).
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < nq; ++i) {
    if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best == UINT32_MAX || !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = i;
  }
  if (best == UINT32_MAX) {
    bp_host_logf(plugin->host, BP_LOG_WARN, "skipping '%s': no compute queue", dev_name);
    return false;
  }
  d->queue_family = best;
  const auto exts = device_extensions(phys);
  if (!has_extension(exts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) {
    bp_host_logf(plugin->host, BP_LOG_WARN, "skipping '%s': no %s", dev_name, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    return false;
  }
  d->has_budget = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);

  auto f11 = vk_struct<VkPhysicalDeviceVulkan11Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  auto f12 = vk_struct<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11, {}};
  vkGetPhysicalDeviceFeatures2(phys, &f2);
  if (!f12.timelineSemaphore) {
    bp_host_logf(plugin->host, BP_LOG_WARN, "skipping '%s': no timeline semaphores", dev_name);
    return false;
  }
  // Every pipeline layout declares kBindings storage buffers (Vulkan's
  // minimum per stage is 4; ATTENTION binds five tensors).
  if (d->props.limits.maxPerStageDescriptorStorageBuffers < static_cast<uint32_t>(kBindings)) {
    bp_host_logf(plugin->host, BP_LOG_WARN, "skipping '%s': %u storage buffers per shader stage, %d needed", dev_name,
                 d->props.limits.maxPerStageDescriptorStorageBuffers, kBindings);
    return false;
  }
  d->has_16bit_storage = f11.storageBuffer16BitAccess;
  auto sg = vk_struct<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sg, {}};
  auto drv = vk_struct<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
  sg.pNext = &drv;
  vkGetPhysicalDeviceProperties2(phys, &p2);
  d->subgroup_size = sg.subgroupSize ? sg.subgroupSize : 1;
  d->subgroup_arith = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                      (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                      (sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
  VkFormatProperties fp{};
  vkGetPhysicalDeviceFormatProperties(phys, VK_FORMAT_R16G16B16A16_SFLOAT, &fp);
  d->f16_view = (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                (fp.bufferFeatures & VK_FORMAT_FEATURE_STORAGE_TEXEL_BUFFER_BIT);

  d->type = device_type_of(d->props.deviceType);
  // CPU-type drivers (lavapipe) run a workgroup as one task: the register
  // tile is the only reuse there, and 8 x 32 is the measured best. GPUs:
  // 8 x 8 keeps a thread's registers (64 accumulators) from spilling.
  d->tile_cols = d->type == BP_DEVICE_TYPE_CPU ? 32 : 8;
  const VkPhysicalDeviceLimits &lim = d->props.limits;
  d->gpu_mul_mat = lim.maxComputeWorkGroupInvocations >= 256 && lim.maxComputeWorkGroupSize[0] >= 256 &&
                   lim.maxComputeSharedMemorySize >= 8192 && d->subgroup_arith;
  d->coopmat = coopmat_support(plugin, phys, exts, d) && lim.maxComputeSharedMemorySize >= 24576;
  d->name = dev_name;
  d->id = hex_uuid(d->props.pipelineCacheUUID);  // replaced below by deviceUUID
  auto idp = vk_struct<VkPhysicalDeviceIDProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES);
  VkPhysicalDeviceProperties2 pid{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &idp, {}};
  vkGetPhysicalDeviceProperties2(phys, &pid);
  d->id = hex_uuid(idp.deviceUUID);
  uint64_t free_bytes = 0;
  memory_budget(d, &d->memory_total, &free_bytes);
  char desc[1024];
  std::snprintf(desc, sizeof desc,
                "%s; driver %s %s; Vulkan %u.%u.%u; subgroup %u; f16 storage %s; memory budget %s; "
                "max storage range %u MiB; cooperative matrices %s",
                dev_name, drv.driverName, drv.driverInfo, VK_API_VERSION_MAJOR(d->props.apiVersion),
                VK_API_VERSION_MINOR(d->props.apiVersion), VK_API_VERSION_PATCH(d->props.apiVersion), d->subgroup_size,
                d->has_16bit_storage ? "yes" : "no", d->has_budget ? "yes" : "no",
                d->props.limits.maxStorageBufferRange >> 20, d->coopmat ? "NV 16x16x16 f16" : "no");
  d->description = desc;
  d->buft_device.dev = d;
  d->buft_device.name = "Vulkan" + std::to_string(index);
  d->buft_host.dev = d;
  d->buft_host.host = true;
  d->buft_host.name = "Vulkan" + std::to_string(index) + "_Host";
  return true;
}

bp_status device_open(device_state *d, bp_error *err) {
  std::lock_guard<std::mutex> lock(d->open_mu);
  if (d->opened) return device_check(d, err);
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, nullptr, 0, d->queue_family, 1, &prio};
  std::vector<const char *> exts = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  if (d->has_budget) exts.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  auto f11 = vk_struct<VkPhysicalDeviceVulkan11Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  auto f12 = vk_struct<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  auto cm = vk_struct<VkPhysicalDeviceCooperativeMatrixFeaturesNV>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
  f11.pNext = &f12;
  f11.storageBuffer16BitAccess = d->has_16bit_storage ? VK_TRUE : VK_FALSE;
  f12.timelineSemaphore = VK_TRUE;
  if (d->coopmat) {  // mul_mat_coopmat.comp: the extension, its feature, f16 arithmetic
    exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    f12.pNext = &cm;
    cm.cooperativeMatrix = VK_TRUE;
    f12.shaderFloat16 = VK_TRUE;
  }
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11, {}};
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2,         0,      1, &qci, 0, nullptr,
                         static_cast<uint32_t>(exts.size()),   exts.data(), nullptr};
  VkResult r = vkCreateDevice(d->phys, &dci, nullptr, &d->dev);
  if (r != VK_SUCCESS) {
    d->dev = VK_NULL_HANDLE;
    return bp_error_setf(err, status_of(r), "vkCreateDevice on '%s' failed (%s)", d->name.c_str(), vk_result_name(r));
  }
  vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);
  d->push_descriptor =
      reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(vkGetDeviceProcAddr(d->dev, "vkCmdPushDescriptorSetKHR"));
  VkSemaphoreTypeCreateInfo sti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, nullptr, VK_SEMAPHORE_TYPE_TIMELINE, 0};
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &sti, 0};
  r = vkCreateSemaphore(d->dev, &sci, nullptr, &d->timeline);
  if (r != VK_SUCCESS || !d->push_descriptor) {
    vkDestroyDevice(d->dev, nullptr);
    d->dev = VK_NULL_HANDLE;
    return bp_error_setf(err, BP_ERR_INTERNAL, "setting up '%s' failed (%s)", d->name.c_str(), vk_result_name(r));
  }
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(d->phys, &mp);
  const uint32_t dev_type = pick_memory_type(mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  const uint32_t host_type =
      pick_memory_type(mp, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                       VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (host_type == UINT32_MAX) {
    vkDestroySemaphore(d->dev, d->timeline, nullptr);
    vkDestroyDevice(d->dev, nullptr);
    d->dev = VK_NULL_HANDLE;
    return bp_error_setf(err, BP_ERR_UNAVAILABLE, "'%s' has no host-visible coherent memory", d->name.c_str());
  }
  // Device-local memory that is also host-visible (lavapipe, integrated
  // GPUs, resizable BAR) is mapped: set/get become memcpy.
  const uint32_t chosen = dev_type == UINT32_MAX ? host_type : dev_type;
  const VkMemoryPropertyFlags cf = mp.memoryTypes[chosen].propertyFlags;
  d->device_mem_mappable = (cf & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (cf & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  // BP_VULKAN_MAP_DEVICE_MEMORY=0 takes the discrete-GPU path on any device:
  // device memory is never mapped, so reads, writes and clears go through
  // staging copies and transfer commands (how tests cover that path on
  // lavapipe).
  if (const char *map = secure_getenv("BP_VULKAN_MAP_DEVICE_MEMORY"); map && std::strcmp(map, "0") == 0)
    d->device_mem_mappable = false;
  auto m3 =
      vk_struct<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &m3, {}};
  vkGetPhysicalDeviceProperties2(d->phys, &p2);
  const VkDeviceSize block = std::min<VkDeviceSize>(256ull << 20, m3.maxMemoryAllocationSize);
  d->device_mem.dev = d;
  d->device_mem.type_index = chosen;
  d->device_mem.mappable = d->device_mem_mappable;
  d->device_mem.block_size = block;
  d->host_mem.dev = d;
  d->host_mem.type_index = host_type;
  d->host_mem.mappable = true;
  d->host_mem.block_size = std::min<VkDeviceSize>(64ull << 20, m3.maxMemoryAllocationSize);
  bp_status st = pipelines_init(d, err);
  if (st != BP_OK) {
    vkDestroySemaphore(d->dev, d->timeline, nullptr);
    vkDestroyDevice(d->dev, nullptr);
    d->dev = VK_NULL_HANDLE;
    return st;
  }
  d->opened = true;
  bp_host_logf(d->plugin->host, BP_LOG_INFO, "opened '%s' (memory type %u%s)", d->name.c_str(), chosen,
               d->device_mem_mappable ? ", host-visible" : "");
  return BP_OK;
}

device_state::~device_state() {
  if (!dev) return;
  // Bounded: a lost device must not hang shutdown.
  uint64_t v = submitted.load();
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, nullptr, 0, 1, &timeline, &v};
  if (v) vkWaitSemaphores(dev, &wi, kWaitTimeoutNs);
  pipelines_destroy(this);
  device_mem.destroy_all();
  host_mem.destroy_all();
  vkDestroySemaphore(dev, timeline, nullptr);
  vkDestroyDevice(dev, nullptr);
}

bp_status device_check(device_state *d, bp_error *err) {
  if (d->lost.load())
    return bp_error_setf(err, BP_ERR_DEVICE_LOST, "device '%s' was lost; recreate the process's Vulkan objects",
                         d->name.c_str());
  return BP_OK;
}

bp_status device_fail(device_state *d, VkResult r, const char *what, bp_error *err) {
  if (r == VK_ERROR_DEVICE_LOST) d->lost.store(true);
  if (r == VK_ERROR_DEVICE_LOST) return device_check(d, err);
  return bp_error_setf(err, status_of(r), "%s failed on '%s' (%s)", what, d->name.c_str(), vk_result_name(r));
}

bp_status device_submit(device_state *d, VkCommandBuffer cb, uint64_t *value, bp_error *err) {
  if (bp_status st = device_check(d, err); st != BP_OK) return st;
  std::lock_guard<std::mutex> lock(d->queue_mu);
  const uint64_t v = d->submitted.load() + 1;
  VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, nullptr, 0, nullptr, 1, &v};
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO, &ts, 0, nullptr, nullptr, 1, &cb, 1, &d->timeline};
  VkResult r = vkQueueSubmit(d->queue, 1, &si, VK_NULL_HANDLE);
  if (r != VK_SUCCESS) return device_fail(d, r, "vkQueueSubmit", err);
  d->submitted.store(v);
  *value = v;
  return BP_OK;
}

bp_status device_wait(device_state *d, uint64_t value, bp_error *err) {
  if (bp_status st = device_check(d, err); st != BP_OK) return st;
  if (value == 0) return BP_OK;
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, nullptr, 0, 1, &d->timeline, &value};
  VkResult r = vkWaitSemaphores(d->dev, &wi, kWaitTimeoutNs);
  if (r == VK_TIMEOUT) {
    d->lost.store(true);
    return bp_error_setf(err, BP_ERR_DEVICE_LOST, "'%s' did not finish within 600 s; treating it as lost",
                         d->name.c_str());
  }
  if (r != VK_SUCCESS) return device_fail(d, r, "vkWaitSemaphores", err);
  return BP_OK;
}

bp_status device_wait_all(device_state *d, bp_error *err) { return device_wait(d, d->submitted.load(), err); }

namespace {

// The plugin's parts of plugins::device_slots.
struct vk_device {
  using device = device_state;
  static plugins::device_facts facts(device_state &d) {
    uint64_t total = 0, free = 0;
    memory_budget(&d, &total, &free);
    return {d.name.c_str(),
            d.description.c_str(),
            d.id.c_str(),
            d.type,
            BP_DEVICE_CAP_ASYNC | BP_DEVICE_CAP_EVENTS | BP_DEVICE_CAP_HOST_BUFFER,
            total,
            free};
  }
  static bp_status backend_init(device_state *d, const bp_param_value *params, uint32_t n_params, bp_backend_ref *out,
                                bp_error *err) {
    backend_options opt;
    plugins::read_bool(params, n_params, "f16", &opt.f16);
    plugins::read_bool(params, n_params, "fast_paths", &opt.fast_paths);
    plugins::read_bool(params, n_params, "profile", &opt.profile);
    plugins::read_bool(params, n_params, "fuse", &opt.fuse);
    int tile_cols = 0;
    if (bp_status s = plugins::read_choice(params, n_params, "tile_cols", {8, 16, 32}, &tile_cols, err); s != BP_OK)
      return s;
    opt.tile_cols = static_cast<uint32_t>(tile_cols);
    if (bp_status st = plugins::read_named(params, n_params, "mul_mat", kMulMatNames, &opt.mul_mat, err); st != BP_OK)
      return st;
    if (bp_status st = plugins::read_named(params, n_params, "mul_mv", kMulMvNames, &opt.mul_mv, err); st != BP_OK)
      return st;
    if (bp_status st = plugins::read_named(params, n_params, "attention", kAttentionNames, &opt.attention, err);
        st != BP_OK)
      return st;
    plugins::read_bool(params, n_params, "coopmat", &opt.coopmat);
    if (opt.coopmat && !d->coopmat)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                           "coopmat=true: '%s' has no VK_NV_cooperative_matrix with 16x16x16 f16 tiles into f32 and "
                           "subgroups of 32 (its description says what it has); use coopmat=false",
                           d->name.c_str());
    if (opt.mul_mat == mul_mat_mode::gpu && !d->gpu_mul_mat)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                           "mul_mat=gpu: '%s' allows %u invocations and %u bytes of shared memory per "
                           "workgroup (the shaders need 256 and 8192) and has %s subgroup arithmetic; use mul_mat=auto",
                           d->name.c_str(), d->props.limits.maxComputeWorkGroupInvocations,
                           d->props.limits.maxComputeSharedMemorySize, d->subgroup_arith ? "" : "no");
    if (bp_status st = device_open(d, err); st != BP_OK) return st;
    return backend_create(d, opt, out, err);
  }
  static constexpr auto event_new = event_create;
  static bp_buffer_type_ref buffer_type(device_state &d) {
    return bp_buffer_type_ref{&buffer_type_iface, &d.buft_device};
  }
};

using slots = plugins::device_slots<vk_device>;

bp_buffer_type_ref device_host_buffer_type(void *dev) noexcept {
  auto *d = static_cast<device_state *>(dev);
  return bp_buffer_type_ref{&buffer_type_iface, d ? &d->buft_host : nullptr};
}

}  // namespace

// buffer_from_host_ptr: none, it would need VK_EXT_external_memory_host.
const bp_device_i device_iface = slots::table(device_host_buffer_type);

}  // namespace bp::vk
