// spirv_table.hpp: the SPIR-V variants embedded at build time (the generated
// spirv_table.cpp in the build dir, made by embed_spirv.cmake from the
// bp_vulkan_shader() list in CMakeLists.txt).
#ifndef BP_PLUGIN_VULKAN_SPIRV_TABLE_HPP_
#define BP_PLUGIN_VULKAN_SPIRV_TABLE_HPP_

#include <cstddef>
#include <cstdint>

namespace bp::vk {

struct spirv_blob {
  const char *name;  // the variant, e.g. "binary_f32_f16"
  const uint32_t *words;
  size_t n_words;
};

extern const spirv_blob spirv_table[];
extern const size_t spirv_table_size;

}  // namespace bp::vk

#endif  // BP_PLUGIN_VULKAN_SPIRV_TABLE_HPP_
