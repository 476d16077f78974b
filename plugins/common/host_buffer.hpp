// host_buffer.hpp: the buffers of the host-memory plugins (cpu, blas):
// 64-byte aligned host memory, tensors at real host pointers, so any host
// backend reads and writes them in place; also buffers that wrap caller
// memory without owning it (buffer_from_host_ptr).
#ifndef BP_PLUGINS_COMMON_HOST_BUFFER_HPP_
#define BP_PLUGINS_COMMON_HOST_BUFFER_HPP_

#include <cstddef>

#include "backplane/plugin.h"

namespace bp::plugins {

// The buffer type named |name|, which is also the type's ctx: pass one object
// with static storage (not a literal written in several places), so that
// every ref the plugin hands out compares equal.
bp_buffer_type_ref host_buffer_type(const char *name);
// Wraps |ptr| (not owned) of |size| bytes as a buffer.
bp_status wrap_host_ptr(void *ptr, size_t size, bp_buffer_ref *out, bp_error *err);
// True for a buffer type whose memory the host addresses directly: this
// plugin's own, or any other whose is_host says so.
bool is_host_buffer_type(bp_buffer_type_ref buft);

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_HOST_BUFFER_HPP_
