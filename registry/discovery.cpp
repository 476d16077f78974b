// discovery.cpp: which folders are searched and which files are candidates.
//
// Order (docs/architecture.md): BP_PLUGIN_PATH (':'-separated, read with
// secure_getenv so it is ignored under setuid/setgid; relative entries are
// ignored too, since they would depend on the CWD), folders added with
// bp_registry_add_path, then <dir of libbackplane.so>/backplane/plugins.
// Never the current directory (docs/failures.md #20). Only regular files named
// libbp-*.so; folders and files are deduplicated by realpath. The scan opens
// no file: registry/demand.cpp loads each when it is needed.
//
// No build-tree folder is compiled in: the build tree already keeps its
// plugins next to its library (build/lib/backplane/plugins), so the rule
// "next to the library" serves a build and an install alike, and an installed
// library never reads a folder of the tree it was built in (that folder may
// hold other code, or be writable by someone else).
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

std::string real_dir(const std::string &path) {
  char buf[PATH_MAX];
  struct stat st {};
  if (!realpath(path.c_str(), buf) || stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) return {};
  return buf;
}

// <dir of libbackplane.so>/backplane/plugins, found from a symbol of ours.
std::string install_folder() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void *>(&bp_registry_discover), &info) || !info.dli_fname) return {};
  char buf[PATH_MAX];
  if (!realpath(info.dli_fname, buf)) return {};
  std::string lib = buf;
  size_t slash = lib.rfind('/');
  if (slash == std::string::npos) return {};
  return lib.substr(0, slash) + "/backplane/plugins";
}

bool is_candidate_name(const char *name) {
  size_t n = std::strlen(name);
  return n > 9 && std::strncmp(name, "libbp-", 6) == 0 && std::strcmp(name + n - 3, ".so") == 0;
}

}  // namespace

std::vector<std::string> search_folders() {
  // Folders the user named (BP_PLUGIN_PATH) are configuration: one that does
  // not exist is a warning, not a silent skip (docs/failures.md #14). The folder
  // next to the library is allowed to be absent.
  struct wanted_folder {
    std::string path;
    bool user_given;
  };
  std::vector<wanted_folder> wanted;
  if (const char *env = secure_getenv("BP_PLUGIN_PATH")) {
    std::string list = env;
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t colon = list.find(':', pos);
      std::string item = list.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (!item.empty() && item[0] != '/')
        bp::core::logf(BP_LOG_WARN, "registry",
                       "BP_PLUGIN_PATH entry '%s' is not absolute; ignored (the current directory is never searched)",
                       item.c_str());
      else if (!item.empty())
        wanted.push_back({item, true});
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }
  {
    std::lock_guard<std::mutex> lock(state().state_mutex);
    for (const std::string &p : state().api_paths) wanted.push_back({p, false});
  }
  wanted.push_back({install_folder(), false});

  std::vector<std::string> folders;
  for (const wanted_folder &w : wanted) {
    if (w.path.empty()) continue;
    std::string real = real_dir(w.path);
    if (real.empty()) {
      bp::core::logf(w.user_given ? BP_LOG_WARN : BP_LOG_DEBUG, "registry", "%s %s is not an existing folder; skipped",
                     w.user_given ? "BP_PLUGIN_PATH entry" : "plugin folder", w.path.c_str());
      continue;
    }
    if (std::find(folders.begin(), folders.end(), real) == folders.end()) folders.push_back(real);
  }
  return folders;
}

std::vector<std::string> candidates_in(const std::string &folder) {
  std::vector<std::string> files;
  DIR *dir = opendir(folder.c_str());
  if (!dir) {
    bp::core::logf(BP_LOG_WARN, "registry", "cannot read plugin folder %s: %s", folder.c_str(), std::strerror(errno));
    return files;
  }
  while (const dirent *e = readdir(dir)) {
    if (!is_candidate_name(e->d_name)) continue;
    std::string path = folder + "/" + e->d_name;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      bp::core::logf(BP_LOG_DEBUG, "registry", "%s is not a regular file; skipped", path.c_str());
      continue;
    }
    files.push_back(path);
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  return files;
}

void scan_folders_locked() {
  registry_state &s = state();
  std::vector<candidate> found;
  for (const std::string &folder : search_folders()) {
    bp::core::logf(BP_LOG_DEBUG, "registry", "searching %s", folder.c_str());
    for (const std::string &file : candidates_in(folder)) {
      bp::core::logf(BP_LOG_DEBUG, "registry", "candidate %s", file.c_str());
      found.push_back({file, names_from_file(file), next_order_locked(), true});
    }
  }
  s.candidates = std::move(found);
  s.scanned = true;
  s.all_loaded.store(false);
}

}  // namespace bp::registry

extern "C" {

BP_API bp_status bp_registry_add_path(const char *folder) {
  using namespace bp::registry;
  return bp::core::api_guard([&]() -> bp_status {
    if (!folder || !*folder)
      return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_registry_add_path: folder is NULL or empty");
    if (bp_status st = check_not_shut_down()) return st;
    struct stat st {};
    if (stat(folder, &st) != 0)
      return bp::core::set_errorf(BP_ERR_NOT_FOUND, "bp_registry_add_path: folder %s does not exist (%s)", folder,
                                  std::strerror(errno));
    if (!S_ISDIR(st.st_mode))
      return bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT,
                                  "bp_registry_add_path: %s is not a folder; use bp_registry_load for one file",
                                  folder);
    std::string real = real_dir(folder);
    std::lock_guard<std::mutex> lock(state().state_mutex);
    auto &paths = state().api_paths;
    if (std::find(paths.begin(), paths.end(), real) == paths.end()) {
      paths.push_back(real);
      state().paths_changed.store(true);
    }
    return BP_OK;
  });
}

BP_API bp_status bp_registry_discover(void) {
  using namespace bp::registry;
  return bp::core::api_guard([&]() -> bp_status {
    if (bp_status st = check_not_shut_down()) return st;
    if (in_load_on_this_thread())
      return bp::core::set_error(BP_ERR_FAILED_PRECONDITION,
                                 "bp_registry_discover called from inside a plugin load (a log callback?)");
    return ensure_loaded(load_need{true, {}}, true);  // the folders again, every file
  });
}

BP_API bp_status bp_registry_load(const char *path, bp_plugin **out_plugin) {
  using namespace bp::registry;
  if (out_plugin) *out_plugin = nullptr;
  return bp::core::api_guard([&]() -> bp_status {
    if (!path || !*path) return bp::core::set_error(BP_ERR_INVALID_ARGUMENT, "bp_registry_load: path is NULL or empty");
    if (bp_status st = check_not_shut_down()) return st;
    if (in_load_on_this_thread())
      return bp::core::set_error(BP_ERR_FAILED_PRECONDITION,
                                 "bp_registry_load called from inside a plugin load (a log callback?)");
    std::lock_guard<std::mutex> load_lock(state().load_mutex);
    load_scope scope;
    // Found files of the same name load first, as if discovery had loaded
    // them all: the name stays theirs (ALREADY_EXISTS here), as it would.
    load_named_candidates_locked(names_from_file(path));
    return load_plugin_file(path, out_plugin, false, next_order_locked());
  });
}

}  // extern "C"
