// internal.hpp: the core's shared internal types (not installed).
//
// The structs behind the public opaque handles, and the helpers every core
// and registry file uses: error recording, logging, handle checks (slot
// checks come from abi/tables.hpp). Everything here is C++ and stays inside
// libbackplane.so. core/ depends on abi/ only; registry/ depends on core/ and
// abi/, never the other way (core/CMakeLists.txt enforces it).
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "abi/tables.hpp"  // BP_HAS_SLOT
#include "backplane/backplane.h"
#include "backplane/plugin.h"
#include "backplane/version.h"  // generated; BP_VERSION_STRING for messages

namespace bp::core {

// ---- errors (core/error.cpp) ----------------------------------------------
// Records |message| as this thread's last error and returns |code| (an
// out-of-range code, BP_OK included, is recorded as INTERNAL).
bp_status set_error(bp_status code, const std::string &message);
// printf-style variant.
bp_status set_errorf(bp_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Converts a plugin's bp_error to the thread's last error, prefixed with
// |context| ("vulkan: allocating 64 MiB: "). Returns the plugin's code (or
// INTERNAL if the plugin returned an out-of-range code).
bp_status set_plugin_error(bp_status code, const bp_error &err, const std::string &context);
// The thread's current status (what bp_last_status() returns).
bp_status last_status();
// Moves on with every bp_clear_error(): a context's recorded first
// graph-building failure counts only while its epoch is the current one.
uint64_t clear_epoch();
// For graph-building calls given a NULL tensor or context: when the call
// before the current public call failed, makes its status and message this
// call's again and returns true (the NULL is that failure's result);
// returns false, changing nothing, when it succeeded.
bool restore_previous_failure();

// The API edge. Every public entry point opens one scope first (BP_API_SCOPE
// or api_guard/api_guard_ptr, which open one): the outermost scope on a
// thread forgets the previous call's outcome, so a successful call leaves
// BP_OK and "" and a failing one only its own message. Nested public calls
// (a failure path that frees a buffer) change nothing on entry.
// NullArgs.EveryDefinitionOpensTheApiScope (tests/core/null_args_test.cpp)
// checks that every definition opens one.
class api_scope {
 public:
  api_scope() noexcept;
  ~api_scope();
  api_scope(const api_scope &) = delete;
  api_scope &operator=(const api_scope &) = delete;
  // Makes the thread state agree with the call's result |st| (outermost
  // scope only): OK clears what a recovered inner step recorded; a failure
  // that recorded nothing still gets a message. Returns |st|.
  bp_status finish(bp_status st) noexcept;
  // For calls that return a pointer: clears when |p| is non-NULL.
  template <typename T>
  T *finish(T *p) noexcept {
    if (p != nullptr) finish_ok();
    return p;
  }

 private:
  void finish_ok() noexcept;
  bool outermost_ = false;
};
#define BP_API_SCOPE() ::bp::core::api_scope bp_api_scope_

// Runs |body| in an api_scope and turns any C++ exception into a status
// (the API barrier).
template <typename Body>
bp_status api_guard(Body &&body) noexcept {
  api_scope scope;
  try {
    return scope.finish(body());
  } catch (const std::bad_alloc &) {
    return set_error(BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
  } catch (const std::exception &e) {
    return set_error(BP_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return set_error(BP_ERR_INTERNAL, "internal error: unknown exception");
  }
}
// Same for entry points returning a pointer: nullptr on exception.
template <typename T, typename Body>
T *api_guard_ptr(Body &&body) noexcept {
  api_scope scope;
  try {
    return scope.finish(static_cast<T *>(body()));
  } catch (const std::bad_alloc &) {
    set_error(BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
  } catch (const std::exception &e) {
    set_error(BP_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    set_error(BP_ERR_INTERNAL, "internal error: unknown exception");
  }
  return nullptr;
}

// ---- logging (core/log.cpp) ------------------------------------------------
void log(bp_log_level level, const char *source, const std::string &message);
void logf(bp_log_level level, const char *source, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool log_enabled(bp_log_level level);

// Handle tags catch NULL and wrong-type handles (docs/failures.md #24). The
// GGUF tags are listed here too (gguf/ retires its handles through the
// helpers below), so every tag of libbackplane is unique and named in
// messages; core/ never reads a GGUF struct.
enum handle_tag : uint32_t {
  TAG_PLUGIN = 0x504c5547u,
  TAG_DEVICE = 0x44455643u,
  TAG_BUFT = 0x42554654u,
  TAG_BUFFER = 0x42554646u,
  TAG_BACKEND = 0x42434b4eu,
  TAG_EVENT = 0x45564e54u,
  TAG_CONTEXT = 0x43545854u,
  TAG_GRAPH = 0x47525048u,
  TAG_SCHED = 0x53434844u,
  TAG_GALLOCR = 0x47414c43u,
  TAG_PLAN = 0x504c414eu,
  TAG_GGUF_FILE = 0x47475546u,     // "GGUF"
  TAG_GGUF_WEIGHTS = 0x47475754u,  // "GGWT"
  TAG_GGUF_WRITER = 0x47475752u,   // "GGWR"
  TAG_DEAD = 0xdeadbeefu,
};

// True when |h| is non-NULL and carries |tag| (every handle struct starts
// with its tag, so reading it from a wrong-type handle is defined enough).
template <typename T>
bool handle_ok(const T *h, handle_tag tag) {
  return h != nullptr && h->tag == tag;
}

// INVALID_ARGUMENT for a NULL, freed or wrong-type |what| handle passed to |fn|.
bp_status bad_handle(const char *fn, const char *what, const void *h, handle_tag expected);

// Membership of the set of live handles. Every handle struct the API gives
// out (and frees) holds one as a member: constructing the struct registers
// it, destroying it unregisters it. A free function asks the set before it
// reads anything from the handle, so a second free of the same handle is
// recognised without touching freed memory, in every build.
class live_mark {
 public:
  live_mark() noexcept { enter(); }
  live_mark(const live_mark &) noexcept { enter(); }  // a copy is a handle of its own
  live_mark &operator=(const live_mark &) noexcept { return *this; }
  ~live_mark() { leave(); }
  bool live() const noexcept;

 private:
  void enter() noexcept;
  void leave() noexcept;
};

// For the free functions: true when |h| is a live handle carrying |tag|.
// Otherwise records INVALID_ARGUMENT ("already freed, or not a handle the
// API returned"), logs it and returns false, without reading |h|'s memory.
bool free_check_live(bool live, const void *h, handle_tag tag, const char *fn, const char *what);
template <typename T>
bool free_check(const T *h, handle_tag tag, const char *fn, const char *what) {
  return free_check_live(h->live.live() && h->tag == tag, h, tag, fn, what);
}

// Destroys |h| and keeps its storage, marked TAG_DEAD, in a bounded
// quarantine (every build), so a later call with the freed handle still
// reads TAG_DEAD instead of reused memory (docs/failures.md #24).
void quarantine_storage(void *h);
template <typename T>
void retire_handle(T *h) {
  h->~T();
  *static_cast<uint32_t *>(static_cast<void *>(h)) = TAG_DEAD;
  quarantine_storage(h);
}

}  // namespace bp::core

// ---- handle structs --------------------------------------------------------

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

struct bp_device;

// A loaded plugin (registry/). Devices and buffer types live as long as it.
struct bp_plugin {
  uint32_t tag = bp::core::TAG_PLUGIN;
  std::string name, version, description, path;
  // The descriptor's abi_minor: what the plugin was built to know
  // (abi/minor.hpp: a ROPE with frequency factors is hidden below 2).
  uint32_t abi_minor = 0;
  void *dl_handle = nullptr;
  const bp_plugin_i *iface = nullptr;
  void *ctx = nullptr;
  bp_host_api host{};                 // must outlive the plugin
  std::vector<bp_param_info> params;  // copied schema (strings below)
  std::deque<std::string> strings;    // owns copied strings
  std::vector<std::unique_ptr<bp_device>> devices;
  std::atomic<long> live_objects{0};  // backends, buffers, events alive
  bool loaded = true;
  // Its place in the registry's list: the order an eager discovery would
  // have loaded it in, whenever it was loaded (registry/demand.cpp).
  uint64_t order = 0;
  // Device enumeration (registry/devices.cpp): at load, or deferred to first
  // use when the plugin has an enumerate slot. |enumerated| is set (release)
  // after |devices| and the outcome below were written under state_mutex.
  std::atomic<bool> enumerated{false};
  bp_status enumerate_status = BP_OK;
  std::string enumerate_message;
};

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
  bp_plugin *plugin = nullptr;
  uint32_t index = 0;
  bp_device_ref ref{};
  std::string name, description, id, spec;
  bp_device_type type = BP_DEVICE_TYPE_CPU;
  uint32_t caps = 0;
  uint64_t memory_total = 0, memory_free = 0;
  std::unique_ptr<bp_buffer_type> buft;       // default
  std::unique_ptr<bp_buffer_type> host_buft;  // may be null
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

namespace bp::core {
// Cross-module entry points. Owner of each file in brackets.

// Plugin object lifetime: every backend/buffer/event holds one reference
// (bp_plugin::live_objects); the registry never closes a plugin while the
// count is above 0. [core/plugin_lifetime.cpp]
void plugin_retain(bp_plugin *p);
void plugin_release(bp_plugin *p);

// Re-checks node |t| against the op table (shape, type, sources); the same
// rule the graph-building calls applied. Sets the error naming the node.
// [core/ops*.cpp]
bp_status validate_node(const bp_tensor *t);

// Index of the source whose memory node |t|'s output may overwrite (the
// allocator reuses it in place when that source dies at |t|), or -1. Only
// elementwise-shaped ops qualify, and only when the source has t's type and
// shape and both are contiguous. [core/ops*.cpp]
int op_inplace_src(const bp_tensor *t);

// Wraps a plugin buffer type for |dev| (reads name, alignment, max size,
// is_host once). Returns nullptr with the error set if the table is bad.
// [core/buffer*.cpp]
std::unique_ptr<bp_buffer_type> buffer_type_wrap(bp_device *dev, bp_buffer_type_ref ref);

// Creates a backend on |dev| with validated, default-filled |params|.
// |name| is what bp_backend_name returns ("cpu:0"). [core/backend.cpp]
bp_status backend_create(bp_device *dev, const bp_param_value *params, uint32_t n_params, const std::string &name,
                         bp_backend **out);
}  // namespace bp::core
