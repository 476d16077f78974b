// handles.hpp: the structs behind the public opaque handles the core hands
// out (not installed): context, graph, device, buffer type, buffer,
// backend, event, and the core's part of a plugin. Each starts with its tag
// and, where the API frees it, holds a live_mark (liveness.hpp). The
// registry's plugin struct is its own (registry/registry_internal.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/plugin.h"  // the plugin object refs
#include "core/liveness.hpp"

struct bp_context {
  uint32_t tag = bp::core::TAG_CONTEXT;
  std::deque<bp_tensor> tensors;  // deque: pointers stay valid as it grows
  size_t max_tensors = 0;         // 0 = no cap
  // The first graph-building call that failed on this context, for the
  // NULL-propagation rule (build_scope). Kept until bp_clear_error (which
  // moves clear_epoch on) or while the context lives.
  bp_status build_status = BP_OK;
  std::string build_message;
  uint64_t build_epoch = 0;
  bp::core::live_mark live;  // last: see live_mark
};

struct bp_graph {
  uint32_t tag = bp::core::TAG_GRAPH;
  std::vector<bp_tensor *> nodes;  // ops, topological order
  std::vector<bp_tensor *> leafs;  // inputs and weights (op == NONE)
  // Every tensor in nodes or leafs, so that bp_graph_build walks only what is
  // new to the graph (n calls cost O(n) in all). bp_graph_build and
  // bp_graph_clear keep it; a graph whose lists were filled directly (the
  // scheduler's per-backend copies) gets it rebuilt at its first build.
  std::unordered_set<const bp_tensor *> members;
  size_t max_nodes = 4096;
  bp::core::live_mark live;         // last: see live_mark
  const bp_context *ctx = nullptr;  // not retained: for NULL propagation only (checked live)
};

namespace bp::core {
// The core's part of a loaded plugin: what the core itself reads (its name
// and file for messages, the count of its live objects). The registry's
// struct bp_plugin derives from it with the registry's own fields (dlopen
// handle, table, parameters, devices, enumeration state:
// registry/registry_internal.hpp); the core never sees those.
struct plugin_core {
  uint32_t tag = TAG_PLUGIN;
  std::string name, path;
  // The descriptor's abi_minor: what the plugin was built to know
  // (abi/minor.hpp: a ROPE with frequency factors is hidden below 2).
  uint32_t abi_minor = 0;
  std::atomic<long> live_objects{0};  // backends, buffers, events alive
};

// Plugin object lifetime: every backend/buffer/event holds one reference
// (plugin_core::live_objects); the registry never closes a plugin while the
// count is above 0. [core/plugin_lifetime.cpp]
void plugin_retain(plugin_core *p);
void plugin_release(plugin_core *p);
}  // namespace bp::core

struct bp_buffer_type {
  uint32_t tag = bp::core::TAG_BUFT;
  bp_device *device = nullptr;
  bp_buffer_type_ref ref{};
  std::string name;
  size_t alignment = 1;
  size_t max_size = SIZE_MAX;
  bool is_host = false;
};

struct bp_device {
  uint32_t tag = bp::core::TAG_DEVICE;
  bp::core::plugin_core *plugin = nullptr;  // the registry's bp_plugin
  uint32_t index = 0;
  bp_device_ref ref{};
  std::string name, description, id, spec;
  bp_device_type type = BP_DEVICE_TYPE_CPU;
  uint32_t caps = 0;
  uint64_t memory_total = 0, memory_free = 0;
  std::unique_ptr<bp_buffer_type> buft;       // default
  std::unique_ptr<bp_buffer_type> host_buft;  // may be null
  std::unique_ptr<bp_buffer_type> weight_buft;  // may be null; made at first ask
  std::atomic<bool> lost{false};              // sticky DEVICE_LOST
  // Other buffer types met through backends (bp_backend_buffer_type when
  // the backend's type is neither buft nor host_buft); live with the device
  // so buffers made from them never outlive their type. [core/buffer_type.cpp]
  std::mutex extra_bufts_mutex;
  std::vector<std::unique_ptr<bp_buffer_type>> extra_bufts;
};

struct bp_buffer {
  uint32_t tag = bp::core::TAG_BUFFER;
  bp_buffer_type *buft = nullptr;
  bp_buffer_ref ref{};
  size_t size = 0;
  void *base = nullptr;
  bp_buffer_usage usage = BP_BUFFER_USAGE_ANY;
  bp::core::live_mark live;  // last: see live_mark
};

struct bp_backend {
  uint32_t tag = bp::core::TAG_BACKEND;
  bp_device *device = nullptr;
  bp_backend_ref ref{};
  std::string name;                // "cpu:0"
  bp_buffer_type *buft = nullptr;  // borrowed from the device
  bp::core::live_mark live;        // last: see live_mark
};

struct bp_event {
  uint32_t tag = bp::core::TAG_EVENT;
  bp_device *device = nullptr;
  bp_event_ref ref{};
  bp::core::live_mark live;  // last: see live_mark
};
