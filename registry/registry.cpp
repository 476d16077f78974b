// registry.cpp: the registry's state, plugin lifetime, unload and shutdown.
//
// Lifetime rules (docs/failures.md #17, #18): every backend, buffer and event
// holds one reference on its plugin (bp_plugin::live_objects, counted by
// core/plugin_lifetime.cpp; the registry only reads it); bp_plugin_unload
// refuses while any is alive; shutdown() runs exactly once, before dlclose;
// BP_DISABLE_UNLOAD=1 keeps the code mapped (for sanitizer stack traces).
// Nothing happens in global destructors.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {
thread_local int t_load_depth = 0;

bool unload_disabled() {
  const char *v = std::getenv("BP_DISABLE_UNLOAD");
  return v && std::strcmp(v, "0") != 0 && *v != '\0';
}
}  // namespace

registry_state &state() {
  static registry_state *s = new registry_state;  // leaked on purpose
  return *s;
}

bp_status check_not_shut_down() {
  if (!state().shut_down.load()) return BP_OK;
  return bp::core::set_error(BP_ERR_FAILED_PRECONDITION,
                             "Backplane was shut down (bp_runtime_shutdown); no plugin or device calls after it");
}

bool in_load_on_this_thread() { return t_load_depth > 0; }
load_scope::load_scope() { ++t_load_depth; }
load_scope::~load_scope() { --t_load_depth; }

void record_rejection(const std::string &path, bp_status status, const std::string &message, uint64_t order) {
  std::lock_guard<std::mutex> lock(state().state_mutex);
  auto &list = state().rejected;
  for (rejected_entry &r : list)
    if (r.path == path) {
      r.status = status;
      r.message = message;
      return;
    }
  // In the order an eager discovery would have refused them, whatever
  // loaded first.
  auto at = std::upper_bound(list.begin(), list.end(), order,
                             [](uint64_t o, const rejected_entry &r) { return o < r.order; });
  list.insert(at, {path, status, message, order});
}

void forget_rejection(const std::string &path) {
  std::lock_guard<std::mutex> lock(state().state_mutex);
  auto &list = state().rejected;
  list.erase(std::remove_if(list.begin(), list.end(), [&](const rejected_entry &r) { return r.path == path; }),
             list.end());
}

bp_plugin *find_by_path_locked(const std::string &real_path) {
  for (auto &p : state().plugins)
    if (p->path == real_path) return p.get();
  return nullptr;
}

bp_plugin *find_by_name_locked(const std::string &name) {
  for (auto &p : state().plugins)
    if (p->name == name) return p.get();
  return nullptr;
}

bool is_loaded_locked(const bp_plugin *p) {
  for (auto &q : state().plugins)
    if (q.get() == p) return true;
  return false;
}

void close_plugin(bp_plugin *p, bool call_shutdown) {
  if (call_shutdown && p->loaded && p->iface && p->iface->shutdown) {
    // Guarded like every slot (PLG-10): the exception is gone before dlclose.
    std::string message;
    if (!call_slot("plugin '" + p->name + "'", "bp_plugin_i.shutdown", message, [&] { p->iface->shutdown(p->ctx); }))
      bp::core::log(BP_LOG_WARN, "registry", message);
  }
  p->loaded = false;
  for (auto &d : p->devices) {
    d->tag = bp::core::TAG_DEAD;
    if (d->buft) d->buft->tag = bp::core::TAG_DEAD;
    if (d->host_buft) d->host_buft->tag = bp::core::TAG_DEAD;
    if (d->weight_buft) d->weight_buft->tag = bp::core::TAG_DEAD;
  }
  p->devices.clear();
  p->tag = bp::core::TAG_DEAD;
  if (p->dl_handle && !unload_disabled()) dlclose(p->dl_handle);
  p->dl_handle = nullptr;
}

// Removes |p| from the list and closes it when nothing of it is alive.
// Both mutexes are taken here; |p| must be a loaded plugin.
static bp_status unload_one(bp_plugin *p) {
  std::unique_ptr<bp_plugin> owned;
  long live = 0;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    auto &list = state().plugins;
    auto it = std::find_if(list.begin(), list.end(), [&](const auto &q) { return q.get() == p; });
    if (it != list.end()) {
      found = true;
      live = p->live_objects.load();
      if (live == 0) {
        owned = std::move(*it);
        list.erase(it);
      }
    }
  }
  // Errors are recorded after the state lock is gone (logging may call back).
  if (!found)
    return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_plugin_unload: not a loaded plugin (already unloaded?)");
  if (!owned)
    return bp::core::set_errorf(BP_ERR_FAILED_PRECONDITION,
                                "plugin '%s' still has %ld live object(s) (backends, buffers or events); free "
                                "them before unloading (PLG-12)",
                                p->name.c_str(), live);
  load_scope scope;
  const std::string name = owned->name;
  close_plugin(owned.get(), true);
  bp::core::logf(BP_LOG_INFO, "registry", "unloaded plugin '%s'", name.c_str());
  return BP_OK;
}

}  // namespace bp::registry

extern "C" {

BP_API bp_status bp_plugin_unload(bp_plugin *p) {
  using namespace bp::registry;
  return bp::core::api_guard([&]() -> bp_status {
    if (!p) return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_plugin_unload: plugin is NULL");
    if (in_load_on_this_thread())
      return bp::core::set_error(BP_ERR_FAILED_PRECONDITION,
                                 "bp_plugin_unload called from inside a plugin load (a log callback?)");
    std::lock_guard<std::mutex> load_lock(state().load_mutex);
    return unload_one(p);
  });
}

BP_API bp_status bp_runtime_shutdown(void) {
  using namespace bp::registry;
  return bp::core::api_guard([&]() -> bp_status {
    if (in_load_on_this_thread())
      return bp::core::set_error(BP_ERR_FAILED_PRECONDITION,
                                 "bp_runtime_shutdown called from inside a plugin load (a log callback?)");
    std::lock_guard<std::mutex> load_lock(state().load_mutex);
    if (state().shut_down.load())
      return bp::core::set_error(BP_ERR_FAILED_PRECONDITION, "bp_runtime_shutdown was already called");
    std::vector<bp_plugin *> all;
    {
      std::lock_guard<std::mutex> lock(state().state_mutex);
      for (auto &p : state().plugins) all.push_back(p.get());
    }
    // All or nothing (docs/errors.md): with live objects nothing is unloaded
    // and the runtime stays usable, so the advice below can be followed.
    std::string alive;
    for (bp_plugin *p : all) {
      const long n = p->live_objects.load();
      if (n > 0) alive += (alive.empty() ? "" : ", ") + p->name + " (" + std::to_string(n) + " live)";
    }
    if (!alive.empty())
      return bp::core::set_error(BP_ERR_FAILED_PRECONDITION,
                                 "bp_runtime_shutdown: nothing was shut down: backends, buffers or events of these "
                                 "plugins are alive: " +
                                     alive + "; free them, then call bp_runtime_shutdown again");
    state().shut_down.store(true);
    for (auto it = all.rbegin(); it != all.rend(); ++it) unload_one(*it);  // reverse load order
    return BP_OK;
  });
}

}  // extern "C"
