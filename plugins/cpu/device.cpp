// device.cpp: the one "CPU" device: properties read from the OS, backend
// creation from the validated parameters, buffers over caller memory, events.
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "backplane/plugin_guard.hpp"
#include "cpu.hpp"
#include "plugin_common.hpp"
#include "repack.hpp"

namespace bp::cpu {

std::string read_cpu_model() {
  std::string model;
  if (FILE *f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "model name", 10) != 0) continue;
      const char *colon = std::strchr(line, ':');
      if (!colon) continue;
      model = colon + 1;
      break;
    }
    std::fclose(f);
  }
  // Trim the leading space and the newline.
  size_t b = model.find_first_not_of(" \t");
  size_t e = model.find_last_not_of(" \t\r\n");
  model = (b == std::string::npos) ? std::string() : model.substr(b, e - b + 1);
  return model.empty() ? std::string("CPU") : model;
}

namespace {

// Bytes of MemAvailable from /proc/meminfo, 0 if unknown.
uint64_t read_mem_available() {
  uint64_t kib = 0;
  if (FILE *f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long v = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
        kib = v;
        break;
      }
    }
    std::fclose(f);
  }
  return kib * 1024u;
}

uint64_t read_mem_total() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return (pages > 0 && page > 0) ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0u;
}

// The plugin's parts of plugins::device_slots; the device is the plugin.
struct cpu_device {
  using device = plugin_state;
  static plugins::device_facts facts(plugin_state &state) {
    const uint64_t total = read_mem_total();
    uint64_t free = read_mem_available();
    if (free == 0 || free > total) free = total;
    return {"CPU",
            state.description.c_str(),
            "cpu-0",
            BP_DEVICE_TYPE_CPU,
            BP_DEVICE_CAP_HOST_MEMORY | BP_DEVICE_CAP_BUFFER_FROM_HOST_PTR | BP_DEVICE_CAP_EVENTS,
            total,
            free};
  }
  static bp_status backend_init(plugin_state *state, const bp_param_value *params, uint32_t n_params,
                                bp_backend_ref *out, bp_error *err) {
    int64_t threads = 0;  // one per core
    if (bp_status s = plugins::read_int_in(params, n_params, "threads", 0, 256, &threads, err); s != BP_OK) return s;
    bool fuse = true;
    plugins::read_bool(params, n_params, "fuse", &fuse);
    return backend_create(state, threads, fuse, out, err);
  }
  static bp_status event_new(plugin_state *, bp_event_ref *out, bp_error *err) { return event_create(out, err); }
  static bp_buffer_type_ref buffer_type(plugin_state &) { return buffer_type_ref(); }
};

using slots = plugins::device_slots<cpu_device>;

bp_status device_buffer_from_host_ptr(void *, void *ptr, size_t size, bp_buffer_ref *out, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status { return plugins::wrap_host_ptr(ptr, size, out, err); });
}

bp_buffer_type_ref device_weight_buffer_type(void *) noexcept { return weight_buffer_type_ref(); }

}  // namespace

// host_buffer_type: none, the default type already is host memory.
const bp_device_i device_iface = slots::table(nullptr, device_buffer_from_host_ptr, device_weight_buffer_type);

}  // namespace bp::cpu
