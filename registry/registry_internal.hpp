// registry_internal.hpp: state and helpers shared by the registry's files.
//
// Locking (docs/failures.md #19): two mutexes.
//  - load_mutex serialises everything that runs plugin code at load or
//    unload time: dlopen (static initialisers), bp_plugin_entry, init,
//    device enumeration, shutdown, dlclose. Only one load/unload/discovery
//    runs at a time.
//  - state_mutex guards the lists below and is held only for short
//    bookkeeping: never while plugin code runs. Readers (bp_plugin_count,
//    bp_device_get, bp_backend_new's lookup) take only this one, so they are
//    not blocked by a slow plugin init on another thread.
// Lock order: load_mutex before state_mutex. A thread already inside a load
// (e.g. an application log callback fired by a plugin's init) that calls a
// loading function gets FAILED_PRECONDITION instead of a deadlock.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "abi/call.hpp"
#include "abi/tables.hpp"
#include "core/errors.hpp"
#include "core/handles.hpp"
#include "core/liveness.hpp"
#include "core/log.hpp"
#include "registry/spec_parser.hpp"

// A loaded plugin: the core's part (name, file, live objects) and what only
// the registry keeps. Devices and buffer types live as long as it.
struct bp_plugin : bp::core::plugin_core {
  std::string version, description;
  void *dl_handle = nullptr;
  const bp_plugin_i *iface = nullptr;
  void *ctx = nullptr;
  bp_host_api host{};                 // must outlive the plugin
  std::vector<bp_param_info> params;  // copied schema (strings below)
  std::deque<std::string> strings;    // owns copied strings
  std::vector<std::unique_ptr<bp_device>> devices;
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

namespace bp::registry {

// The plugin that owns |dev| (every device the registry lists has one).
inline bp_plugin *owner(const bp_device *dev) { return static_cast<bp_plugin *>(dev->plugin); }

inline constexpr uint32_t k_max_devices_per_plugin = 256;
inline constexpr uint32_t k_max_params_per_plugin = 64;

struct rejected_entry {
  std::string path;
  bp_status status = BP_OK;
  std::string message;
  uint64_t order = 0;  // as bp_plugin::order: the list is kept in this order
};

// A libbp-*.so file found by the folder scan, not necessarily opened yet
// (registry/demand.cpp). Guarded by load_mutex.
struct candidate {
  std::string path;                // <folder>/libbp-<name>.so as found
  std::vector<std::string> names;  // the plugin names its file name allows
  uint64_t order = 0;              // scan order (search order)
  bool pending = true;             // not tried since the last scan
};

struct registry_state {
  std::mutex load_mutex;
  std::mutex state_mutex;
  std::vector<std::unique_ptr<bp_plugin>> plugins;  // by bp_plugin::order
  std::deque<rejected_entry> rejected;              // one entry per path, by order
  std::vector<std::string> api_paths;               // bp_registry_add_path
  // Guarded by load_mutex: the last scan's files, whether a scan ran, and
  // the next order number (candidates and explicit loads share it).
  std::vector<candidate> candidates;
  bool scanned = false;
  uint64_t next_order = 1;
  // Set (under load_mutex) when every candidate of the last scan was tried;
  // read without it as the fast path of ensure_loaded.
  std::atomic<bool> all_loaded{false};
  std::atomic<bool> paths_changed{false};
  std::atomic<bool> shut_down{false};
};

// The process-wide registry. Leaked on purpose: no work in global
// destructors (docs/failures.md #18).
registry_state &state();

// FAILED_PRECONDITION with a message when bp_runtime_shutdown already ran.
bp_status check_not_shut_down();

// True while this thread runs inside a load/unload (re-entrancy guard).
bool in_load_on_this_thread();
struct load_scope {  // marks this thread as inside a load
  load_scope();
  ~load_scope();
};

// Plugin slot calls go through bp::abi::call_slot (abi/call.hpp).
using bp::abi::call_slot;

// ---- loader.cpp --------------------------------------------------------
// Loads |path| (load_mutex held by the caller). On success *out is the new
// or already-loaded plugin; on failure the rejection is recorded, the
// handle closed, and the thread's last error set. |from_search| marks a file
// found by discovery, where a name already loaded from a folder earlier in
// the search order is an intended override (the file is "shadowed").
// |order| places the plugin (or its rejection) in the lists.
bp_status load_plugin_file(const std::string &path, bp_plugin **out, bool from_search, uint64_t order);
// The plugin names a file called |path| may declare (PLG-3): <name> of its
// base name libbp-<name>.so, and of its resolved path's (a symlink).
std::vector<std::string> names_from_file(const std::string &path);

// ---- probe.cpp ---------------------------------------------------------
// True when BP_PLUGIN_PROBE=1 (read with secure_getenv).
bool probe_enabled();
// Loads |real| in a child process (dlopen, entry, init, enumerate,
// device_count, shutdown) with a time limit; INCOMPATIBLE with the cause
// (signal, exit status, hang) in |message| when the child did not survive.
bp_status probe_plugin_file(const std::string &real, std::string &message);

// ---- image.cpp ---------------------------------------------------------
// The readable address ranges of one loaded object (its PT_LOAD segments),
// used to check that a pointer read from the descriptor lies in the plugin's
// own file before anything reads through it (PLG-2), and that the entry
// symbol names code before it is called (PLG-4).
struct image_ranges {
  struct range {
    uintptr_t begin, end;  // [begin, end)
    bool executable;       // PF_X
  };
  std::vector<range> ranges;
  // Bytes readable from |p| up to the end of its segment; 0 outside.
  size_t room(const void *p) const;
  bool contains(const void *p, size_t n) const { return n <= room(p); }
  // True when |p| lies in an executable segment.
  bool executable(const void *p) const;
};
// The ranges of the object behind dlopen handle |h| (empty when unknown).
image_ranges image_of(void *h);

// ---- file_checks.cpp ---------------------------------------------------
// Checks the regular file |real| (stat'ed as |st|) before dlopen: refuses a
// world-writable file (PLG-20) and an ELF file for another class, byte order
// or machine (PLG-1), naming both sides. Non-ELF files pass: dlopen words
// those. Fills |message| on failure.
bp_status check_plugin_file(const std::string &real, const struct stat &st, std::string &message);

// ---- plugin_checks.cpp -------------------------------------------------
// Checks the descriptor of the plugin file |path| without running its code:
// the struct must lie in |image| (the plugin's own mapped file), aligned for
// its type, and is copied out before any field is read; every string it
// points to must lie in |image| too, read with a bound. Fills |out| with the
// copied strings and versions, or |message| on failure (PLG-2, PLG-3, PLG-6).
struct descriptor_strings {
  std::string name, version, description;
  uint32_t abi_major = 0, abi_minor = 0;
};
bp_status check_descriptor(const void *d, const std::string &path, const image_ranges &image, descriptor_strings &out,
                           std::string &message);
// Checks the table bp_plugin_entry returned and copies its param schema
// into |p| (p->name set). Fills |message| on failure.
bp_status check_plugin_table(bp_plugin *p, const bp_plugin_i *iface, std::string &message);

// ---- devices.cpp -------------------------------------------------------
// Enumerates the devices of an initialised plugin into p->devices, at load
// (load_mutex held by the caller, |p| not yet listed). A plugin with an
// enumerate slot is left for ensure_devices instead (returns OK at once).
bp_status enumerate_devices(bp_plugin *p, std::string &message);
// Enumerates a listed plugin's devices if that was deferred (takes
// load_mutex; runs plugin code at most once per plugin). Returns the
// enumeration's outcome, recorded in the plugin (bp_plugin_status). |p| must
// be a loaded plugin the caller got from the lists or the API.
bp_status ensure_devices(bp_plugin *p);
// The same by name (no plugin of that name: OK, nothing done).
void ensure_devices_named(const std::string &name);
// The same for every loaded plugin ("auto", global device lists).
void ensure_all_devices();

// ---- demand.cpp --------------------------------------------------------
// Discovery in two steps: a scan lists the candidate files of every folder
// (no dlopen); a file is loaded when something needs a plugin its name
// allows. What a caller needs:
struct load_need {
  bool all = false;                // every candidate (auto, any listing)
  std::vector<std::string> names;  // else the plugins of these names
};
// Scans the folders if no scan ran yet, bp_registry_add_path changed them
// or |rescan| is set, then loads the untried candidates |need| asks for, in
// search order (takes load_mutex unless all it needs is loaded). OK, or
// FAILED_PRECONDITION after bp_runtime_shutdown. Inside a load (a log
// callback) it loads nothing and returns OK: what is loaded is used.
bp_status ensure_loaded(const load_need &need, bool rescan = false);
bp_status ensure_all_loaded();
bp_status ensure_named_loaded(const std::string &name);
// For bp_registry_load (load_mutex held): tries the scanned, untried
// candidates that may provide one of |names|, as an eager discovery would
// have done before the explicit load.
void load_named_candidates_locked(const std::vector<std::string> &names);
// The next order number (load_mutex held).
uint64_t next_order_locked();

// ---- registry.cpp ------------------------------------------------------
void record_rejection(const std::string &path, bp_status status, const std::string &message, uint64_t order);
void forget_rejection(const std::string &path);
// Loaded plugin whose file is |real_path|, or nullptr (state_mutex held).
bp_plugin *find_by_path_locked(const std::string &real_path);
bp_plugin *find_by_name_locked(const std::string &name);
bool is_loaded_locked(const bp_plugin *p);
// Shuts the plugin down (once) and closes its handle. Not in the lists.
void close_plugin(bp_plugin *p, bool call_shutdown);

// ---- discovery.cpp -----------------------------------------------------
// Folders searched, in order (env, API, next to the library), deduplicated.
std::vector<std::string> search_folders();
// libbp-*.so regular files of |folder|, sorted by name (absolute paths).
std::vector<std::string> candidates_in(const std::string &folder);
// Lists every folder's candidates afresh, in search order (load_mutex
// held). Opens no file; every candidate is untried afterwards.
void scan_folders_locked();

// ---- params.cpp --------------------------------------------------------
struct resolved_spec {
  bp_device *device = nullptr;
  std::vector<std::string> texts;      // storage behind values[i].string_value
  std::vector<bp_param_value> values;  // one per schema param, defaults filled
};
// |context| names the input in messages, e.g. `device spec "cpu:x=1"`.
// Finds the device |spec| selects and validates its params against the
// plugin's schema (takes state_mutex briefly; runs no plugin code). On
// success the device's plugin is retained once, so it cannot be unloaded
// before the backend exists; the caller releases it afterwards.
bp_status resolve_spec(const parsed_spec &spec, const std::string &context, resolved_spec &out);
// Validates |spec|'s params for the already chosen |dev| into |out|
// (device/id keys must have been handled by the caller).
bp_status fill_params(bp_device *dev, const parsed_spec &spec, const std::string &context, resolved_spec &out);
// Rank for "auto": GPU > IGPU > ACCEL > CPU, then more memory.
bool better_for_auto(const bp_device *a, const bp_device *b);

}  // namespace bp::registry
