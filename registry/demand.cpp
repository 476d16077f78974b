// demand.cpp: which plugin files are opened, and when.
//
// Discovery has two steps. The scan (discovery.cpp) lists the libbp-*.so
// files of every folder in search order and opens none of them. A file is
// loaded (the checks and dlopen of loader.cpp, then init) the first time
// something needs a plugin it may provide, and only then:
//  - a spec naming plugins ("cpu", "cpu:threads=2", "vulkan;cpu",
//    "remote:0"), bp_registry_find_plugin, or bp_registry_load of a file of that
//    name: the candidates whose file name allows that name (PLG-3: the file
//    is libbp-<name>.so, or a symlink of that name to one), in search order,
//    until one loads;
//  - "auto", a spec naming a plugin no candidate provides (its message lists
//    every plugin), bp_plugin_count/get, bp_device_count/get,
//    bp_rejected_count/get and bp_registry_discover: every candidate.
// So a process that asks only for "cpu" maps libbp-cpu.so and its
// dependencies, never the Vulkan loader, the OpenCL ICD loader or gRPC, and
// runs no other plugin's constructors or init (PLG-21).
//
// The file name is what selects a file here, not its descriptor: the
// descriptor is data inside the mapped object (its pointers need the
// dynamic loader's relocations), and PLG-3 already makes the file name
// match the declared name, so the loader refuses any file that would
// disagree.
//
// Whatever was asked for first, a plugin and a refusal take the place in
// the lists that loading everything at once would have given them
// (bp_plugin::order: scan order for found files, call order for
// bp_registry_load), so "auto" and every listing give the same answer in
// every process. A file is checked only when it is loaded: a broken file
// that no spec names is refused, and listed, once everything is loaded
// (bp_rejected_count, bp-devices).
#include <algorithm>

#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

bool allows(const candidate &c, const std::string &name) {
  return std::find(c.names.begin(), c.names.end(), name) != c.names.end();
}

bool all_names_loaded(const std::vector<std::string> &names) {
  std::lock_guard<std::mutex> lock(state().state_mutex);
  for (const std::string &n : names)
    if (!find_by_name_locked(n)) return false;
  return true;
}

// True when |c| may provide one of |names| that no plugin has yet.
bool wanted(const candidate &c, const std::vector<std::string> &names) {
  for (const std::string &n : names)
    if (allows(c, n) && !all_names_loaded({n})) return true;
  return false;
}

// Tries the untried candidates |need| asks for, in search order (load_mutex
// held). Loading never changes the candidate list (only a scan does, under
// the same mutex).
void load_candidates_locked(const load_need &need) {
  registry_state &s = state();
  bool untried = false;
  for (candidate &c : s.candidates) {
    if (!c.pending) continue;
    if (!need.all && !wanted(c, need.names)) {
      untried = true;
      continue;
    }
    c.pending = false;
    bp::core::logf(BP_LOG_DEBUG, "registry", "loading %s", c.path.c_str());
    load_plugin_file(c.path, nullptr, true, c.order);  // failures are recorded in the rejected list
  }
  s.all_loaded.store(!untried);
}

}  // namespace

uint64_t next_order_locked() { return state().next_order++; }

bp_status ensure_loaded(const load_need &need, bool rescan) {
  if (bp_status st = check_not_shut_down()) return st;
  // Inside a load (e.g. a log callback fired by a plugin's init): use what
  // is loaded now rather than deadlock on the load mutex.
  if (in_load_on_this_thread()) return BP_OK;
  registry_state &s = state();
  if (!rescan && !s.paths_changed.load()) {
    if (s.all_loaded.load()) return BP_OK;
    if (!need.all && all_names_loaded(need.names)) return BP_OK;
  }
  std::lock_guard<std::mutex> load_lock(s.load_mutex);
  load_scope scope;
  if (s.shut_down.load()) return check_not_shut_down();
  const bool changed = s.paths_changed.exchange(false);
  if (!s.scanned || changed || rescan) scan_folders_locked();
  load_candidates_locked(need);
  return BP_OK;
}

bp_status ensure_all_loaded() { return ensure_loaded(load_need{true, {}}); }

bp_status ensure_named_loaded(const std::string &name) { return ensure_loaded(load_need{false, {name}}); }

void load_named_candidates_locked(const std::vector<std::string> &names) {
  if (!state().scanned || names.empty()) return;  // no discovery ran yet: nothing it would have loaded
  load_candidates_locked(load_need{false, names});
}

}  // namespace bp::registry
