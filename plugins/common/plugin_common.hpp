// plugin_common.hpp: what every shipped plugin (cpu, blas, vulkan, opencl,
// remote) does alike at its ABI edge: the entry checks, init and shutdown
// (the host table kept in the plugin's own state), the device properties
// copied out, the parameters read, device discovery run once, a device
// counted within a group, and the device and event slots around each
// plugin's own parts (device_slots, event_slots). Linked statically into each plugin
// (bp_plugin_common): every .so has its own copy and still links nothing of
// Backplane.
//
// Messages never start with the plugin's name: the host adds it to every
// error and log line (PLG-13, docs/errors.md).
#ifndef BP_PLUGINS_COMMON_PLUGIN_COMMON_HPP_
#define BP_PLUGINS_COMMON_PLUGIN_COMMON_HPP_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <vector>

#include "backplane/plugin.h"
#include "backplane/plugin_guard.hpp"

namespace bp::plugins {

// The checks every bp_plugin_entry makes: the host speaks this plugin's ABI
// major and its table reaches the log slot. Returns |table|; else NULL with
// |err| filled. The host table itself comes again to init_with_host (ABI
// 1.2), which keeps it in the plugin's state: no plugin has a global for it.
const bp_plugin_i *plugin_entry(uint32_t host_abi, const bp_host_api *host, bp_error *err,
                                const bp_plugin_i *table) noexcept;

// ---- init and shutdown -------------------------------------------------------
// The plugin-table slots init, init_with_host and shutdown of a plugin whose
// plugin-wide state is a State: default-constructible, with a member
// |const bp_host_api *host|. init_with_host checks its arguments, clears
// *out_plugin first, creates the State, keeps |host| in it (valid until
// shutdown returns, PLG-13), runs |Setup| (bp_status(State &, bp_error *):
// the plugin's own cheap set-up, PLG-21) and only then hands the state out;
// a failure or an exception (plugin_guard) leaves nothing behind. init is
// what a host of ABI 1.1, which has no init_with_host, calls: the same
// without a host table (the plugin then logs nothing). shutdown deletes
// the state; NULL is a no-op and an exception from a destructor stops there.
template <typename State>
bp_status no_setup(State &, bp_error *) {
  return BP_OK;
}

template <typename State, bp_status (*Setup)(State &, bp_error *) = no_setup<State>>
struct plugin_lifecycle {
  static bp_status init_with_host(const bp_host_api *host, void **out_plugin, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!out_plugin) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "init needs an out pointer");
      *out_plugin = nullptr;
      auto state = std::make_unique<State>();
      state->host = host;
      if (bp_status s = Setup(*state, err); s != BP_OK) return s;
      *out_plugin = state.release();
      return BP_OK;
    });
  }
  static bp_status init(void **out_plugin, bp_error *err) noexcept { return init_with_host(nullptr, out_plugin, err); }
  static void shutdown(void *plugin) noexcept {
    plugin_guard(nullptr, [&] {
      delete static_cast<State *>(plugin);
      return BP_OK;
    });
  }
};

// Copies |props| into |out|, no further than the host's struct_size (an
// older host has a shorter struct); struct_size itself stays the host's.
void copy_props(const bp_device_props &props, bp_device_props *out) noexcept;

// What get_props reports (0 memory = unknown); fill_props copies it out.
struct device_facts {
  const char *name, *description, *id;
  bp_device_type type;
  uint32_t caps;
  uint64_t memory_total, memory_free;
};
void fill_props(const device_facts &facts, bp_device_props *out) noexcept;

// The device-table slots get_props, backend_init and event_new of a
// plugin whose device object is a Device, around the plugin's own parts
// (all static):
//   using device = ...;
//   static device_facts facts(device &);  // what get_props reports
//   static bp_status backend_init(device *, const bp_param_value *, uint32_t, bp_backend_ref *, bp_error *);
//       // the plugin's parameters read, its backend created
//   static bp_status event_new(device *, bp_event_ref *, bp_error *);
//   static bp_buffer_type_ref buffer_type(device &);  // the default type
// Each slot checks its arguments first and clears *out before the plugin's
// part runs; exceptions become a status (plugin_guard). table() is the
// device table, with the optional host_buffer_type and buffer_from_host_ptr.
template <typename Parts>
struct device_slots {
  using device = typename Parts::device;
  static bp_status get_props(void *ctx, bp_device_props *out, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!ctx || !out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "get_props needs a device and an out struct");
      fill_props(Parts::facts(*static_cast<device *>(ctx)), out);
      return BP_OK;
    });
  }
  static bp_status backend_init(void *ctx, const bp_param_value *params, uint32_t n_params, bp_backend_ref *out,
                                bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!ctx || !out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "backend_init needs a device and an out ref");
      *out = bp_backend_ref{nullptr, nullptr};
      return Parts::backend_init(static_cast<device *>(ctx), params, n_params, out, err);
    });
  }
  static bp_status event_new(void *ctx, bp_event_ref *out, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!ctx || !out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "event_new needs a device and an out ref");
      *out = bp_event_ref{nullptr, nullptr};
      return Parts::event_new(static_cast<device *>(ctx), out, err);
    });
  }
  static bp_buffer_type_ref buffer_type(void *ctx) noexcept {
    return ctx ? Parts::buffer_type(*static_cast<device *>(ctx)) : bp_buffer_type_ref{nullptr, nullptr};
  }
  static constexpr bp_device_i table(bp_buffer_type_ref (*host_buffer_type)(void *) = nullptr,
                                     bp_status (*buffer_from_host_ptr)(void *, void *, size_t, bp_buffer_ref *,
                                                                       bp_error *) = nullptr,
                                     bp_buffer_type_ref (*weight_buffer_type)(void *) = nullptr) {
    return bp_device_i{
        sizeof(bp_device_i),  get_props, backend_init,       buffer_type, host_buffer_type,
        buffer_from_host_ptr, event_new, weight_buffer_type,
    };
  }
};

// The backend-table slots event_record and event_wait and the event table
// (synchronize, free) of a plugin whose backends are Parts::backend and
// events Parts::event (deleted by free), around the plugin's parts (all
// static):
//   static bp_status alive(backend *, bp_error *);  // device/session liveness
//   static bp_status record(backend *, event *, bp_error *);
//   static bp_status wait(backend *, event *, bp_error *);
//   static bp_status synchronize(event *, bp_error *);
// record and wait check both pointers, then the backend's liveness first.
template <typename Parts>
struct event_slots {
  using backend = typename Parts::backend;
  using event = typename Parts::event;
  static bp_status record(void *be, void *ev, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!be || !ev) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "event_record needs a backend and an event");
      if (bp_status s = Parts::alive(static_cast<backend *>(be), err); s != BP_OK) return s;
      return Parts::record(static_cast<backend *>(be), static_cast<event *>(ev), err);
    });
  }
  static bp_status wait(void *be, void *ev, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!be || !ev) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "event_wait needs a backend and an event");
      if (bp_status s = Parts::alive(static_cast<backend *>(be), err); s != BP_OK) return s;
      return Parts::wait(static_cast<backend *>(be), static_cast<event *>(ev), err);
    });
  }
  static bp_status synchronize(void *ev, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!ev) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "event_synchronize needs an event");
      return Parts::synchronize(static_cast<event *>(ev), err);
    });
  }
  static void free(void *ev) noexcept {
    plugin_guard(nullptr, [&] {
      delete static_cast<event *>(ev);
      return BP_OK;
    });
  }
  static const bp_event_i table;
};

template <typename Parts>
const bp_event_i event_slots<Parts>::table = {sizeof(bp_event_i), synchronize, free};

// The checks every graph_compute makes before its loop: a backend and a
// graph, a node array when there are nodes, no NULL node.
bp_status check_graph(const void *backend, const bp_graph_desc *graph, bp_error *err);

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
// STRING that must be one of the |count| |names|: *out = its index, when
// given; INVALID_ARGUMENT naming the valid values otherwise ("mul_mat=tiled;
// use auto, cpu or gpu").
bp_status read_named(const bp_param_value *params, uint32_t n, const char *name, const char *const *names, size_t count,
                     int *out, bp_error *err);
// The same into an enum whose values are the indices of |names|, in order.
template <typename E, size_t N>
bp_status read_named(const bp_param_value *params, uint32_t n, const char *name, const char *const (&names)[N], E *out,
                     bp_error *err) {
  int index = static_cast<int>(*out);
  const bp_status st = read_named(params, n, name, names, N, &index, err);
  *out = static_cast<E>(index);
  return st;
}
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

// The plugin-table slots enumerate, device_count and device_get of a plugin
// whose State has |found| (a discovery) and |devices| (unique_ptrs to its
// device objects, whose table is |Iface|), found by |Find|.
template <typename State, bp_status (*Find)(State *, bp_error *), const bp_device_i *Iface>
struct device_list {
  static bp_status find(State *s, bp_error *err) {
    return s->found.once(err, [&](bp_error *e) { return Find(s, e); });
  }
  static bp_status enumerate(void *plugin, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      if (!plugin) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "enumerate needs the plugin");
      return find(static_cast<State *>(plugin), err);
    });
  }
  static uint32_t device_count(void *plugin) noexcept {
    return plugin_guard_value(0u, [&] {
      auto *s = static_cast<State *>(plugin);
      if (!s) return 0u;
      find(s, nullptr);  // a host of ABI 1.0 has no enumerate: the count comes first
      return static_cast<uint32_t>(s->devices.size());
    });
  }
  static bp_status device_get(void *plugin, uint32_t index, bp_device_ref *out, bp_error *err) noexcept {
    return plugin_guard(err, [&]() -> bp_status {
      auto *s = static_cast<State *>(plugin);
      if (!s || !out) return bp_error_set(err, BP_ERR_INVALID_ARGUMENT, "device_get needs a plugin and an out ref");
      *out = bp_device_ref{nullptr, nullptr};
      find(s, nullptr);
      if (index >= s->devices.size())
        return bp_error_setf(err, BP_ERR_NOT_FOUND, "no device %u (%zu devices)", index, s->devices.size());
      *out = bp_device_ref{Iface, s->devices[index].get()};
      return BP_OK;
    });
  }
};

// The plugin table of a plugin whose init, init_with_host and shutdown
// come from Lifecycle (plugin_lifecycle) and whose enumerate, device_count
// and device_get from Devices (device_list), with its parameter schema.
template <typename Lifecycle, typename Devices, size_t N>
constexpr bp_plugin_i plugin_table_of(const bp_param_info (&params)[N]) {
  return bp_plugin_i{
      sizeof(bp_plugin_i),      Lifecycle::init,     Lifecycle::shutdown,
      Devices::device_count,    Devices::device_get, params,
      static_cast<uint32_t>(N), Devices::enumerate,  Lifecycle::init_with_host,
  };
}

// ---- a device counted within a group ----------------------------------------
// The device a backend runs on when a parameter makes the host's device
// index count within a group (opencl:platform=P,device=I; remote:server=
// ADDR,device=I): the |index|-th device of |devices| that |in_group|
// accepts, in |*out|. NOT_FOUND otherwise, naming |group| ("platform=1"):
// "<group> has no devices (<known>)", where |known| lists the groups that
// have some, or "<group> has devices 0..N, not I".
template <typename Device, typename InGroup>
bp_status pick_in_group(const std::vector<std::unique_ptr<Device>> &devices, uint32_t index, InGroup &&in_group,
                        const char *group, const char *known, Device **out, bp_error *err) {
  std::vector<Device *> members;
  for (const auto &d : devices)
    if (in_group(*d)) members.push_back(d.get());
  if (members.empty()) return bp_error_setf(err, BP_ERR_NOT_FOUND, "%s has no devices (%s)", group, known);
  if (index >= members.size())
    return bp_error_setf(err, BP_ERR_NOT_FOUND, "%s has devices 0..%zu, not %u", group, members.size() - 1, index);
  *out = members[index];
  return BP_OK;
}

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_PLUGIN_COMMON_HPP_
