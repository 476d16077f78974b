// pipelines.cpp: the embedded SPIR-V table, the two pipeline layouts (every
// shader binds through push descriptors: no descriptor pools or sets exist)
// and the per-device pipeline cache: a pipeline is made at the first use of
// its (variant, specialization) and kept until the device closes.
#include <cstring>
#include <string>

#include "spirv_table.hpp"
#include "vulkan.hpp"

namespace bp::vk {
namespace {

constexpr uint32_t kSpirvMagic = 0x07230203u;

const spirv_blob *find_blob(const char *variant) {
  for (size_t i = 0; i < spirv_table_size; ++i)
    if (std::strcmp(spirv_table[i].name, variant) == 0) return &spirv_table[i];
  return nullptr;
}

bp_status make_set_layout(device_state *dev, layout_kind kind, VkDescriptorSetLayout *out, bp_error *err) {
  VkDescriptorSetLayoutBinding b[kBindings];
  for (uint32_t i = 0; i < kBindings; ++i) {
    VkDescriptorType t = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    if (kind == layout_kind::texel && i < 2) t = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    if (kind == layout_kind::texel && i == 2) t = VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
    b[i] = VkDescriptorSetLayoutBinding{i, t, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  VkDescriptorSetLayoutCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, nullptr,
                                     VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR, kBindings, b};
  VkResult r = vkCreateDescriptorSetLayout(dev->dev, &ci, nullptr, out);
  return r == VK_SUCCESS ? BP_OK : device_fail(dev, r, "vkCreateDescriptorSetLayout", err);
}

}  // namespace

bp_status pipelines_init(device_state *dev, bp_error *err) {
  pipeline_cache &pc = dev->pipes;
  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push_consts)};
  for (int k = 0; k < 2; ++k) {
    if (bp_status st = make_set_layout(dev, static_cast<layout_kind>(k), &pc.set_layout[k], err); st != BP_OK)
      return st;
    VkPipelineLayoutCreateInfo li{
        VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, nullptr, 0, 1, &pc.set_layout[k], 1, &range};
    VkResult r = vkCreatePipelineLayout(dev->dev, &li, nullptr, &pc.layout[k]);
    if (r != VK_SUCCESS) return device_fail(dev, r, "vkCreatePipelineLayout", err);
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, nullptr, 0, 0, nullptr};
  VkResult r = vkCreatePipelineCache(dev->dev, &ci, nullptr, &pc.cache);
  if (r != VK_SUCCESS) return device_fail(dev, r, "vkCreatePipelineCache", err);
  return BP_OK;
}

void pipelines_destroy(device_state *dev) {
  pipeline_cache &pc = dev->pipes;
  for (auto &kv : pc.pipelines) vkDestroyPipeline(dev->dev, kv.second, nullptr);
  for (auto &kv : pc.modules) vkDestroyShaderModule(dev->dev, kv.second, nullptr);
  pc.pipelines.clear();
  pc.modules.clear();
  if (pc.cache) vkDestroyPipelineCache(dev->dev, pc.cache, nullptr);
  for (int k = 0; k < 2; ++k) {
    if (pc.layout[k]) vkDestroyPipelineLayout(dev->dev, pc.layout[k], nullptr);
    if (pc.set_layout[k]) vkDestroyDescriptorSetLayout(dev->dev, pc.set_layout[k], nullptr);
  }
}

bp_status pipeline_get(device_state *dev, const char *variant, layout_kind layout, const uint32_t *spec,
                       uint32_t n_spec, VkPipeline *out, bp_error *err) {
  std::string key = variant;
  key += layout == layout_kind::texel ? "/t" : "/s";
  for (uint32_t i = 0; i < n_spec; ++i) key += ":" + std::to_string(spec[i]);
  pipeline_cache &pc = dev->pipes;
  std::lock_guard<std::mutex> lock(pc.mu);
  if (auto it = pc.pipelines.find(key); it != pc.pipelines.end()) {
    *out = it->second;
    return BP_OK;
  }
  VkShaderModule module = VK_NULL_HANDLE;
  if (auto it = pc.modules.find(variant); it != pc.modules.end()) {
    module = it->second;
  } else {
    const spirv_blob *blob = find_blob(variant);
    if (!blob) return bp_error_setf(err, BP_ERR_INTERNAL, "no embedded shader '%s'", variant);
    // Never hand unchecked bytes to the driver (docs/failures.md #22).
    if (blob->n_words < 5 || blob->words[0] != kSpirvMagic)
      return bp_error_setf(err, BP_ERR_INTERNAL, "embedded shader '%s' is not SPIR-V", variant);
    VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, nullptr, 0,
                                blob->n_words * sizeof(uint32_t), blob->words};
    VkResult r = vkCreateShaderModule(dev->dev, &mi, nullptr, &module);
    if (r != VK_SUCCESS) return device_fail(dev, r, "vkCreateShaderModule", err);
    pc.modules.emplace(variant, module);
  }
  VkSpecializationMapEntry entries[kMaxSpec];
  for (uint32_t i = 0; i < n_spec; ++i) entries[i] = VkSpecializationMapEntry{i, i * 4, 4};
  VkSpecializationInfo si{n_spec, entries, n_spec * sizeof(uint32_t), spec};
  VkPipelineShaderStageCreateInfo stage{VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                        nullptr,
                                        0,
                                        VK_SHADER_STAGE_COMPUTE_BIT,
                                        module,
                                        "main",
                                        n_spec ? &si : nullptr};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                 nullptr,
                                 0,
                                 stage,
                                 pc.layout[static_cast<int>(layout)],
                                 VK_NULL_HANDLE,
                                 -1};
  VkPipeline p = VK_NULL_HANDLE;
  VkResult r = vkCreateComputePipelines(dev->dev, pc.cache, 1, &ci, nullptr, &p);
  if (r != VK_SUCCESS) return device_fail(dev, r, "vkCreateComputePipelines", err);
  pc.pipelines.emplace(key, p);
  *out = p;
  return BP_OK;
}

}  // namespace bp::vk
