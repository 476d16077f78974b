// cpu.hpp: objects shared between the files of the cpu plugin.
//
// The plugin has one device ("CPU"), one buffer type (host memory, 64-byte
// aligned) and backends that own a persistent thread pool. Everything here
// is internal to libbp-cpu.so: only plugin.cpp exports symbols.
#ifndef BP_PLUGIN_CPU_CPU_HPP_
#define BP_PLUGIN_CPU_CPU_HPP_

#include <cstdarg>
#include <cstdint>
#include <string>

#include "backplane/plugin.h"
#include "host_buffer.hpp"

namespace bp::cpu {

// Plugin-wide state, created by init and destroyed by shutdown.
struct plugin_state {
  const bp_host_api *host = nullptr;
  std::string description;  // CPU model name, lives until shutdown
  uint32_t n_cores = 1;     // default for the threads parameter
};

// Reads "model name" from /proc/cpuinfo ("CPU" when unknown).
std::string read_cpu_model();

// Device table and context (device.cpp). The device ctx is the plugin_state.
extern const bp_device_i device_iface;

// The buffer type: host memory (plugins/common/host_buffer.hpp). The name is
// the ref's ctx, so the host tells buffer types apart by it: it must be one
// object, not a string literal per translation unit (an ASan build keeps
// identical literals apart, and the backend's type then differed from the
// device's).
inline bp_buffer_type_ref buffer_type_ref() {
  static const char name[] = "CPU";
  return plugins::host_buffer_type(name);
}

// Backend (backend.cpp): |threads| 0 means one per core; |fuse| runs node
// pairs as one task (fusion.hpp).
bp_status backend_create(plugin_state *plugin, int64_t threads, bool fuse, bp_backend_ref *out, bp_error *err);

// Events (backend.cpp): compute is synchronous, so events are always done.
bp_status event_create(bp_event_ref *out, bp_error *err);

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_CPU_HPP_
