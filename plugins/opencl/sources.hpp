// sources.hpp: the kernel sources of shaders/opencl, embedded at build time
// (embedded_sources.cpp is generated in the build dir by embed_sources.cmake).
#ifndef BP_PLUGIN_OPENCL_SOURCES_HPP_
#define BP_PLUGIN_OPENCL_SOURCES_HPP_

#include <cstddef>

namespace bp::opencl {

struct embedded_source {
  const char *name;  // file name without ".cl": "common", "matmul", ...
  const char *text;
};

extern const embedded_source embedded_sources[];
extern const size_t embedded_source_count;

// The text of shaders/opencl/<name>.cl, or nullptr.
const char *find_source(const char *name);

}  // namespace bp::opencl

#endif  // BP_PLUGIN_OPENCL_SOURCES_HPP_
