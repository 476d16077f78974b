// opencl.hpp: objects shared between the files of the opencl plugin.
//
// Objects: plugin_state (init) owns device_state objects (enumerate), one per
// OpenCL device of every platform. A device's context, transfer queue and
// built programs are created on first use (a buffer or a backend), never at
// init or enumerate. A backend owns one in-order queue, its kernel objects
// (created once, args set per node).
// Everything here is internal: only plugin.cpp exports symbols.
#ifndef BP_PLUGIN_OPENCL_OPENCL_HPP_
#define BP_PLUGIN_OPENCL_OPENCL_HPP_

#include <CL/cl.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backplane/plugin.h"
#include "cl_status.hpp"
#include "memory_window.hpp"
#include "plugin_common.hpp"

namespace bp::opencl {

struct plugin_state;

// Where built program binaries are kept (program_cache.cpp).
struct cache_settings {
  bool enabled = true;
  std::string dir;  // resolved folder ("" = none could be found)
};

struct device_state {
  plugin_state *plugin = nullptr;
  uint32_t index = 0;           // index within the plugin
  uint32_t platform_index = 0;  // which platform, and the device's place in it
  uint32_t index_in_platform = 0;
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::string name, vendor, platform_name, version, driver_version, c_version, id, description;
  bp_device_type type = BP_DEVICE_TYPE_GPU;
  uint32_t compute_units = 1;
  uint64_t global_mem = 0, max_alloc = 0;
  size_t alignment = 128;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes (>= 128)
  size_t max_work_group = 1;
  bool fp16 = false;
  uint32_t vector_width = 4;  // CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT

  // Created on first use under |mu|.
  std::mutex mu;
  cl_context context = nullptr;
  cl_command_queue transfer_queue = nullptr;   // synchronous buffer set/get
  std::map<std::string, cl_program> programs;  // key: family|options
  bool cache_warned = false;
  // Set by the first DEVICE_LOST (device_fail); never cleared.
  std::atomic<bool> lost{false};

  ~device_state();
};

struct plugin_state {
  const bp_host_api *host = nullptr;
  plugins::discovery found;  // runs enumerate_devices once
  std::vector<std::unique_ptr<device_state>> devices;
  // Opaque, never dereferenced base addresses handed out by buffers: each
  // buffer gets its own range so tensors of two buffers never compare equal.
  std::atomic<uint64_t> next_base{uint64_t(1) << 44};
};

// plugin.cpp: the plugin table.
const bp_plugin_i *plugin_table();

// device.cpp: finds the devices of every platform (through plugin->found:
// once, by the first of enumerate, device_count and device_get).
bp_status enumerate_devices(plugin_state *plugin, bp_error *err);
extern const bp_device_i device_iface;
// Creates the device's context and transfer queue if needed.
bp_status device_open(device_state *dev, bp_error *err);
// DEVICE_LOST once |dev| was lost: sticky, every later call on the device
// and its objects returns it at once (PLG-16); freeing still works.
bp_status device_check(const device_state *dev, bp_error *err);
// A failed OpenCL call on |dev|: the status |rc| means at |site|
// (cl_status.hpp) with "<what>: <CL name>"; DEVICE_LOST marks the device.
bp_status device_fail(device_state *dev, cl_int rc, cl_site site, const std::string &what, bp_error *err);

// buffer.cpp
struct cl_buffer {
  uint32_t magic = 0x42434C42u;  // tells our buffers from anyone else's
  device_state *dev = nullptr;
  cl_mem mem = nullptr;
  size_t size = 0;
  char *base = nullptr;  // opaque address of byte 0
};
bp_buffer_type_ref buffer_type_of(device_state *dev);
extern const bp_buffer_type_i &buffer_type_iface;
// The cl_buffer holding |t| or nullptr when it is not one of ours.
cl_buffer *buffer_of(const bp_tensor *t);
// Byte offset of |t| inside its cl_buffer.
inline uint64_t offset_of(const bp_tensor *t, const cl_buffer *b) {
  return static_cast<uint64_t>(static_cast<const char *>(t->data) - b->base);
}

// program_cache.cpp: the program for |family| (a shaders/opencl file) built
// with |options|, from memory, the disk cache or source.
bp_status get_program(device_state *dev, const cache_settings &cache, const std::string &family,
                      const std::string &options, cl_program *out, bp_error *err);
cache_settings resolve_cache(bool enabled, const std::string &dir_param);

}  // namespace bp::opencl

#endif  // BP_PLUGIN_OPENCL_OPENCL_HPP_
