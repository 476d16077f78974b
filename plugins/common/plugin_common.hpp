// plugin_common.hpp: what every shipped plugin (cpu, blas, vulkan, opencl)
// does alike at its ABI edge: the entry checks and the host table, the
// device properties copied out, the parameters read, and device discovery
// run once. Linked statically into each plugin (bp_plugin_common): every .so
// has its own copy and still links nothing of Backplane.
//
// Messages never start with the plugin's name: the host adds it to every
// error and log line (PLG-13, docs/errors.md).
#ifndef BP_PLUGINS_COMMON_PLUGIN_COMMON_HPP_
#define BP_PLUGINS_COMMON_PLUGIN_COMMON_HPP_

#include <cstdint>
#include <initializer_list>
#include <mutex>

#include "backplane/plugin.h"

namespace bp::plugins {

// The host table handed to bp_plugin_entry, valid until the plugin's
// shutdown; read by init, which has no host argument. One per plugin .so.
// A plain pointer: constant-initialised, no constructor.
extern const bp_host_api *g_host;

// The checks every bp_plugin_entry makes: the host speaks this plugin's ABI
// major and its table reaches the log slot. Then remembers |host| in g_host
// and returns |table|; else NULL with |err| filled.
const bp_plugin_i *plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err,
                                const bp_plugin_i *table) noexcept;

// Copies |props| into |out|, no further than the host's struct_size (an
// older host has a shorter struct); struct_size itself stays the host's.
void copy_props(const bp_device_props &props, bp_device_props *out) noexcept;

// ---- parameters ------------------------------------------------------------
// The host checked each value against the schema (type and range); these
// read what a plugin needs, the last of repeated names winning.

const bp_param_value *find_param(const bp_param_value *params, uint32_t n, const char *name);
// BOOL: |*out| = value when given.
void read_bool(const bp_param_value *params, uint32_t n, const char *name, bool *out);
// INT: |*out| = value when given.
void read_int(const bp_param_value *params, uint32_t n, const char *name, int64_t *out);
// STRING: |*out| = value when given (borrowed: valid during the call).
void read_string(const bp_param_value *params, uint32_t n, const char *name, const char **out);
// INT that must be 0 (auto) or one of |allowed|: INVALID_ARGUMENT naming the
// valid values otherwise ("matmul_cols=3; use 0 (auto), 1, 2 or 4").
bp_status read_choice(const bp_param_value *params, uint32_t n, const char *name, std::initializer_list<int> allowed,
                      int *out, bp_error *err);
// INT within [lo, hi]: INVALID_ARGUMENT naming the range otherwise.
bp_status read_int_in(const bp_param_value *params, uint32_t n, const char *name, int64_t lo, int64_t hi, int64_t *out,
                      bp_error *err);

// ---- device discovery ------------------------------------------------------
// The one rule every plugin follows: devices are found once, by the first of
// enumerate, device_count or device_get the host calls (a host of ABI 1.1
// calls enumerate first, PLG-21; a 1.0 host, which has no enumerate, calls
// device_count). The outcome is kept: later calls find nothing new and
// repeat a failure with its message. Loading the plugin finds nothing.
class discovery {
 public:
  // Runs |find| (bp_status(bp_error *)) the first time, under a lock; a
  // |find| that throws counts as INTERNAL and is not run again.
  template <typename Find>
  bp_status once(bp_error *err, Find &&find) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ran_) {
      ran_ = true;
      bp_error_set(&error_, BP_ERR_INTERNAL, "device discovery threw an exception");
      status_ = BP_ERR_INTERNAL;
      bp_error found{};
      status_ = find(&found);
      error_ = found;
    }
    if (status_ != BP_OK && err) *err = error_;
    return status_;
  }

 private:
  std::mutex mu_;
  bool ran_ = false;
  bp_status status_ = BP_OK;
  bp_error error_{};
};

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_PLUGIN_COMMON_HPP_
