// loader.cpp: dlopen one plugin file and check it before trusting it.
//
// Order matters (docs/failures.md #2-#9): resolve the path (the same file again,
// by any path or hard link, is the loaded plugin), refuse a world-writable
// file or one for another machine before dlopen runs anything of it, dlopen
// with RTLD_NOW | RTLD_LOCAL (missing dependencies fail here, and plugins
// cannot see each other's symbols), read the const descriptor (from a copy,
// after checking it lies in the file, aligned) and refuse an incompatible
// plugin before any of its functions run, refuse a duplicate name, refuse an
// entry symbol outside the file's executable segments, then call
// bp_plugin_entry, check the table, init, enumerate devices
// (deferred to first use when the plugin has an enumerate slot).
// Every failure closes the handle and is recorded with its reason.
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "abi/minor.hpp"
#include "core/trace/recorder.hpp"
#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

// Closes a dlopen handle unless the load succeeded (no leaked references).
class handle_guard {
 public:
  explicit handle_guard(void *h) : h_(h) {}
  ~handle_guard() {
    if (h_) dlclose(h_);
  }
  handle_guard(const handle_guard &) = delete;
  handle_guard &operator=(const handle_guard &) = delete;
  void *release() {
    void *h = h_;
    h_ = nullptr;
    return h;
  }

 private:
  void *h_;
};

std::string dl_error_text() {
  const char *e = dlerror();
  return e ? e : "unknown dlopen error";
}

bp_status reject_at(uint64_t order, const std::string &path, bp_status status, const std::string &message,
                    bp_log_level level) {
  record_rejection(path, status, message, order);
  if (status == BP_ERR_UNAVAILABLE) level = BP_LOG_INFO;
  bp::core::log(level, "registry", "refused " + path + ": " + message);
  return bp::core::set_error(status, message);
}

std::string base_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "ref" for libbp-ref.so; empty for any other base name.
std::string name_in(const std::string &base) {
  if (base.size() > 9 && base.compare(0, 6, "libbp-") == 0 && base.compare(base.size() - 3, 3, ".so") == 0)
    return base.substr(6, base.size() - 9);
  return {};
}

// Publishes |p| in the plugin list at its order (state_mutex taken here).
void insert_plugin(std::unique_ptr<bp_plugin> p) {
  std::lock_guard<std::mutex> lock(state().state_mutex);
  auto &list = state().plugins;
  const uint64_t order = p->order;
  auto at = std::upper_bound(list.begin(), list.end(), order,
                             [](uint64_t o, const std::unique_ptr<bp_plugin> &q) { return o < q->order; });
  list.insert(at, std::move(p));
}

// "ref" for .../libbp-ref.so; the whole base name (quoted safely) otherwise.
std::string file_plugin_name(const std::string &path) {
  std::string base = base_name(path);
  if (std::string n = name_in(base); !n.empty()) base = n;
  return quote_for_message(base).substr(0, 200);
}

// The loaded plugin whose file is |real| or the same inode as |st| (a hard
// link: dlopen would hand back the loaded object itself), or nullptr. The
// caller holds load_mutex, so the result cannot be unloaded meanwhile.
bp_plugin *find_loaded_file(const std::string &real, const struct stat &st) {
  std::vector<std::pair<bp_plugin *, std::string>> loaded;
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    if (bp_plugin *p = find_by_path_locked(real)) return p;
    for (auto &p : state().plugins) loaded.emplace_back(p.get(), p->path);
  }
  for (auto &[p, path] : loaded) {
    struct stat other {};
    if (stat(path.c_str(), &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino) return p;
  }
  return nullptr;
}

// A file for another machine is expected next to the right one in
// multi-arch setups: info level when a plugin from a file of the same name
// is already loaded, a warning otherwise (docs/failures.md #3).
bp_log_level arch_mismatch_level(const std::string &real) {
  const std::string name = base_name(real);
  std::lock_guard<std::mutex> lock(state().state_mutex);
  for (auto &p : state().plugins)
    if (base_name(p->path) == name) return BP_LOG_INFO;
  return BP_LOG_WARN;
}

void host_log(void *host, bp_log_level level, const char *message) {
  const auto *p = static_cast<const bp_plugin *>(host);
  // The level comes from plugin code: look at it as an integer before it is
  // used as a bp_log_level (99 is not one; loading it as one is undefined).
  int32_t raw = 0;
  static_assert(sizeof raw == sizeof level, "bp_log_level is 32 bits");
  std::memcpy(&raw, &level, sizeof raw);
  const bp_log_level checked =
      raw >= BP_LOG_DEBUG && raw <= BP_LOG_ERROR ? static_cast<bp_log_level>(raw) : BP_LOG_ERROR;
  bp::core::log(checked, p ? p->name.c_str() : "plugin", message ? std::string(message, strnlen(message, 4096)) : "");
}

int host_log_enabled(void *, bp_log_level level) {
  int32_t raw = 0;
  std::memcpy(&raw, &level, sizeof raw);
  if (raw < BP_LOG_DEBUG || raw > BP_LOG_ERROR) return 1;  // logged as ERROR
  return bp::core::log_enabled(static_cast<bp_log_level>(raw)) ? 1 : 0;
}

std::string absolute(const std::string &path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

// True when |sym| was defined by the object behind |handle| itself, not by
// one of its dependencies (dlsym searches those too).
bool defined_by(void *handle, const void *sym) {
  struct link_map *own = nullptr, *found = nullptr;
  Dl_info info{};
  if (dlinfo(handle, RTLD_DI_LINKMAP, &own) != 0) return true;  // cannot tell: trust dlsym
  if (!dladdr1(sym, &info, reinterpret_cast<void **>(&found), RTLD_DL_LINKMAP)) return true;
  return own == found;
}

}  // namespace

std::vector<std::string> names_from_file(const std::string &path) {
  std::vector<std::string> names;
  if (std::string n = name_in(base_name(path)); !n.empty()) names.push_back(n);
  char real_buf[PATH_MAX];
  if (realpath(absolute(path).c_str(), real_buf)) {
    std::string n = name_in(base_name(real_buf));
    if (!n.empty() && (names.empty() || names.front() != n)) names.push_back(n);
  }
  return names;
}

bp_status load_plugin_file(const std::string &path_in, bp_plugin **out, bool from_search, uint64_t order) {
  // Every refusal is listed at this load's place in the order.
  auto reject = [order](const std::string &path, bp_status status, const std::string &message,
                        bp_log_level level = BP_LOG_WARN) { return reject_at(order, path, status, message, level); };
  const std::string abs = absolute(path_in);
  char real_buf[PATH_MAX];
  if (!realpath(abs.c_str(), real_buf)) {
    int e = errno;
    // dlopen gives the text users search for; an absolute path never makes
    // it look in system folders.
    dlerror();
    void *h = dlopen(abs.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string why = h ? std::strerror(e) : dl_error_text();
    if (h) dlclose(h);
    return reject(abs, BP_ERR_NOT_FOUND, "plugin file " + abs + " not found: " + why);
  }
  const std::string real = real_buf;
  struct stat st {};
  if (stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return reject(real, BP_ERR_INVALID_ARGUMENT, real + " is not a regular file; give the path of a libbp-*.so");
  if (bp_plugin *existing = find_loaded_file(real, st)) {
    if (out) *out = existing;
    return BP_OK;  // same file again: the plugin already loaded
  }
  std::string message;
  bp_status status = check_plugin_file(real, st, message);
  if (status != BP_OK)
    return reject(real, status, message, status == BP_ERR_INCOMPATIBLE ? arch_mismatch_level(real) : BP_LOG_WARN);

  // dlopen runs the file's constructors before any check (PLG-11): an
  // untrusted file can be tried in a child process first.
  if (probe_enabled()) {
    status = probe_plugin_file(real, message);
    if (status != BP_OK) return reject(real, status, message);
  }
  dlerror();
  void *h = dlopen(real.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return reject(real, BP_ERR_INCOMPATIBLE, "cannot load " + real + ": " + dl_error_text());
  handle_guard close_on_error(h);

  // Kept as an address: check_descriptor reads the struct from a copy.
  const void *desc = dlsym(h, BP_PLUGIN_DESCRIPTOR_SYMBOL);
  if (!desc || !defined_by(h, desc))
    return reject(real, BP_ERR_INCOMPATIBLE,
                  real + ": not a Backplane plugin (missing " BP_PLUGIN_DESCRIPTOR_SYMBOL ") (PLG-2)");
  const image_ranges image = image_of(h);
  descriptor_strings strings;
  status = check_descriptor(desc, real, image, strings, message);
  if (status != BP_OK) return reject(real, status, message);
  const std::string name = strings.name;
  // The file name is how users, specs and tools name a plugin before it is
  // loaded: libbp-ref.so declaring "cpu" would leave "ref" unfindable. The
  // name as given or as resolved may agree (a symlink to a versioned file).
  const std::string expected = "libbp-" + name + ".so";
  if (base_name(abs) != expected && base_name(real) != expected)
    return reject(real, BP_ERR_INCOMPATIBLE,
                  real + " declares the plugin name '" + name + "', but its file name says " +
                      file_plugin_name(real) + ": rename the file to libbp-" + name +
                      ".so or rebuild it with that name (PLG-3)");
  std::string taken_by;
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    if (bp_plugin *other = find_by_name_locked(name)) taken_by = other->path;
  }
  if (!taken_by.empty()) {
    if (from_search)  // an intended override: earlier folders win (PLG-3)
      return reject(real, BP_ERR_ALREADY_EXISTS,
                    "plugin '" + name + "' in " + real + " is shadowed by " + taken_by +
                        ", found earlier on the search path (BP_PLUGIN_PATH, then bp_registry_add_path folders, "
                        "then the installed plugins) (PLG-3)",
                    BP_LOG_INFO);
    return reject(real, BP_ERR_ALREADY_EXISTS,
                  "plugin name '" + name + "' from " + real + " is already taken by " + taken_by +
                      "; remove or rename one of the two files (PLG-3)");
  }
  void *entry_sym = dlsym(h, BP_PLUGIN_ENTRY_SYMBOL);
  if (!entry_sym || !defined_by(h, entry_sym))
    return reject(real, BP_ERR_INCOMPATIBLE,
                  real + ": not a Backplane plugin (missing " BP_PLUGIN_ENTRY_SYMBOL ") (PLG-4)");
  // Calling a symbol that names data would crash the process: the entry
  // must lie in one of the file's executable segments.
  if (!image.executable(entry_sym)) {
    char where[32];
    std::snprintf(where, sizeof where, "%p", entry_sym);
    return reject(real, BP_ERR_INCOMPATIBLE,
                  real + ": the " BP_PLUGIN_ENTRY_SYMBOL " symbol at " + where +
                      " does not lie in an executable segment of the file (it names data, not a function); not "
                      "called (PLG-4)");
  }
  auto entry = reinterpret_cast<bp_plugin_entry_fn>(entry_sym);

  auto p = std::make_unique<bp_plugin>();
  p->name = name;
  p->version = strings.version;
  p->description = strings.description;
  p->abi_minor = strings.abi_minor;
  p->path = real;
  p->order = order;
  p->host.struct_size = sizeof(bp_host_api);
  p->host.abi_major = BP_PLUGIN_ABI_VERSION;
  p->host.abi_minor = BP_PLUGIN_ABI_MINOR;
  p->host.host = p.get();
  p->host.log = host_log;
  p->host.log_enabled = host_log_enabled;
  p->host.trace_enabled = bp::core::trace::host_trace_enabled;
  p->host.trace_now = bp::core::trace::host_trace_now;
  p->host.trace_node = bp::core::trace::host_trace_node;
  if (strings.abi_minor > BP_PLUGIN_ABI_MINOR)
    bp::core::logf(BP_LOG_DEBUG, "registry", "plugin '%s' was built for ABI %u.%u (host %u.%u): newer slots unused",
                   name.c_str(), strings.abi_major, strings.abi_minor, BP_PLUGIN_ABI_VERSION, BP_PLUGIN_ABI_MINOR);

  // Every call into the plugin below goes through call_slot: an exception
  // is caught and destroyed there, before handle_guard may close the file.
  const std::string who = "plugin '" + name + "'";
  bp_error err{};
  const bp_plugin_i *iface = nullptr;
  if (!call_slot(who, BP_PLUGIN_ENTRY_SYMBOL, message,
                 [&] { iface = entry(BP_PLUGIN_ABI_VERSION, &p->host, &err); }))
    return reject(real, BP_ERR_INTERNAL, message);
  if (!iface) {
    bp_status code = err.code > BP_OK && err.code < BP_STATUS_COUNT_ ? err.code : BP_ERR_INCOMPATIBLE;
    std::string detail = bp::abi::error_text(err);
    return reject(real, code, "plugin '" + name + "': " + BP_PLUGIN_ENTRY_SYMBOL + " returned no table" +
                                  (detail.empty() ? std::string(" and no message (PLG-4)") : ": " + detail));
  }
  status = check_plugin_table(p.get(), iface, message);
  if (status != BP_OK) return reject(real, status, message);
  p->iface = iface;

  err = bp_error{};
  // init_with_host (ABI 1.2) when the table has it, else init: the plugin
  // keeps &p->host, which lives as long as the bp_plugin (PLG-13).
  const char *init_slot =
      BP_HAS_SLOT(iface, bp_plugin_i, init_with_host) ? "bp_plugin_i.init_with_host" : "bp_plugin_i.init";
  if (!call_slot(who, init_slot, message, [&] { status = bp::abi::call_init(iface, &p->host, &p->ctx, &err); }))
    return reject(real, BP_ERR_INTERNAL, message);
  if (status != BP_OK) {
    if (status <= BP_OK || status >= BP_STATUS_COUNT_) status = BP_ERR_INTERNAL;
    std::string detail = bp::abi::error_text(err);
    if (detail.empty()) detail = std::string("init returned ") + bp_status_name(status) + " without a message";
    return reject(real, status,
                  status == BP_ERR_UNAVAILABLE ? "plugin '" + name + "' is unavailable on this machine: " + detail
                                               : "plugin '" + name + "' failed to initialise: " + detail + " (PLG-8)");
  }
  p->dl_handle = close_on_error.release();
  status = enumerate_devices(p.get(), message);
  if (status != BP_OK) {
    close_plugin(p.get(), true);
    return reject(real, status, message);
  }

  bp_plugin *loaded = p.get();
  insert_plugin(std::move(p));
  forget_rejection(real);
  if (loaded->enumerated.load())
    bp::core::logf(BP_LOG_INFO, "registry", "loaded plugin '%s' %s from %s (%zu devices)", loaded->name.c_str(),
                   loaded->version.c_str(), real.c_str(), loaded->devices.size());
  else
    bp::core::logf(BP_LOG_INFO, "registry", "loaded plugin '%s' %s from %s (devices found on first use)",
                   loaded->name.c_str(), loaded->version.c_str(), real.c_str());
  if (out) *out = loaded;
  return BP_OK;
}

}  // namespace bp::registry
