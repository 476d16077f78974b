// registry_test_util.hpp: helpers shared by the registry tests.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backplane/backplane.h"

extern char **environ;

namespace bp_test {

// libbp-<variant>.so in the fixture folder; dup_name_<x> is the file
// libbp-dup_name.so in dup/<x>/ (a file's name matches its plugin's, PLG-3).
inline std::string fixture(const std::string &variant) {
  if (variant.rfind("dup_name_", 0) == 0)
    return std::string(BP_TEST_FIXTURE_DIR) + "/dup/" + variant.substr(9) + "/libbp-dup_name.so";
  return std::string(BP_TEST_FIXTURE_DIR) + "/libbp-" + variant + ".so";
}

// The fixture plugin |variant|, loaded (or already loaded). Fails the test otherwise.
inline bp_plugin *load_fixture(const std::string &variant) {
  bp_plugin *p = nullptr;
  bp_status st = bp_registry_load(fixture(variant).c_str(), &p);
  EXPECT_EQ(st, BP_OK) << bp_last_error();
  return p;
}

// c = a + b over |n| f32 values, built and allocated on |be|: what the
// fixture backends compute in the tests that drive them. |status| is the
// first failure (bp_last_error() has its message); release() frees the
// graph's memory (before its plugin is unloaded), as the destructor does.
struct add_graph {
  bp_context *ctx = nullptr;
  bp_tensor *a = nullptr, *b = nullptr, *c = nullptr;
  bp_graph *g = nullptr;
  bp_buffer *buf = nullptr;
  bp_status status = BP_OK;

  add_graph(bp_backend *be, int64_t n) {
    ctx = bp_context_new(0);
    a = bp_tensor_new_1d(ctx, BP_TYPE_F32, n);
    b = bp_tensor_new_1d(ctx, BP_TYPE_F32, n);
    c = bp_add(ctx, a, b);
    g = bp_graph_new(ctx, 0);
    if (!c || !g) status = bp_last_status();
    if (status == BP_OK) status = bp_graph_build(g, c);
    if (status == BP_OK) status = bp_context_alloc_tensors(ctx, be, &buf);
  }
  add_graph(const add_graph &) = delete;
  add_graph &operator=(const add_graph &) = delete;
  ~add_graph() { release(); }
  void release() {
    bp_buffer_free(buf);
    bp_graph_free(g);
    bp_context_free(ctx);
    buf = nullptr, g = nullptr, ctx = nullptr;
  }
};

// The rejected entry for |path| (status and message), if any.
inline bool find_rejected(const std::string &path, bp_status *status, std::string *message) {
  for (size_t i = 0, n = bp_rejected_count(); i < n; ++i) {
    const char *p = nullptr, *m = nullptr;
    bp_status s = BP_OK;
    if (bp_rejected_get(i, &p, &s, &m) != BP_OK) continue;
    if (p && path == p) {
      if (status) *status = s;
      if (message) *message = m ? m : "";
      return true;
    }
  }
  return false;
}

// True while the shared object |path| is mapped in this process (dlopen with
// RTLD_NOLOAD maps nothing; it only finds an object already there). Proves
// that a refused or unloaded plugin left no dlopen reference behind.
inline bool is_mapped(const std::string &path) {
  char real[PATH_MAX];
  const char *p = realpath(path.c_str(), real) ? real : path.c_str();
  void *h = dlopen(p, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  dlclose(h);
  return true;
}

// A fresh temporary folder, removed with its content at the end.
class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "bp-registry-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = std::filesystem::canonical(tmpl.c_str());
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir &) = delete;
  temp_dir &operator=(const temp_dir &) = delete;
  const std::filesystem::path &path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A child process run to completion: its exit status (or 128 + signal) and
// its stdout (stderr passes through).
struct child_result {
  int status = -1;
  std::string out;
};

// Runs |argv| in a child with this process's environment changed by |set|
// (name -> value) and |unset|, in folder |cwd| (empty: this one).
inline child_result run_child(const std::vector<std::string> &argv, const std::map<std::string, std::string> &set,
                              const std::vector<std::string> &unset = {}, const std::string &cwd = {}) {
  std::vector<std::string> env_strings;
  for (char **e = environ; *e; ++e) {
    std::string entry = *e, name = entry.substr(0, entry.find('='));
    bool drop = set.count(name) > 0;
    for (const std::string &u : unset) drop = drop || u == name;
    if (!drop) env_strings.push_back(entry);
  }
  for (const auto &[name, value] : set) env_strings.push_back(name + "=" + value);
  std::vector<char *> args, env;
  for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string &e : env_strings) env.push_back(const_cast<char *>(e.c_str()));
  env.push_back(nullptr);

  child_result r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execve(args[0], args.data(), env.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) r.out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
  return r;
}

// Collects log lines while alive (one at a time).
class log_capture {
 public:
  struct line {
    bp_log_level level;
    std::string source, message;
  };
  log_capture() {
    old_level_ = bp_log_get_level();
    bp_log_set_level(BP_LOG_DEBUG);
    bp_log_set_callback(&log_capture::on_log, this);
  }
  ~log_capture() {
    bp_log_set_callback(nullptr, nullptr);
    bp_log_set_level(old_level_);
  }
  log_capture(const log_capture &) = delete;
  log_capture &operator=(const log_capture &) = delete;
  // Lines from |source| whose message contains |text|.
  size_t count(const std::string &source, const std::string &text) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (const line &l : lines_)
      if (l.source == source && l.message.find(text) != std::string::npos) ++n;
    return n;
  }
  // Lines from |source| whose message starts with |prefix|.
  size_t count_starting(const std::string &source, const std::string &prefix) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (const line &l : lines_)
      if (l.source == source && l.message.rfind(prefix, 0) == 0) ++n;
    return n;
  }
  // Lines from |source|.
  size_t count_from(const std::string &source) { return count(source, ""); }
  // The same, only lines logged at |level|.
  size_t count_at(bp_log_level level, const std::string &source, const std::string &text) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (const line &l : lines_)
      if (l.level == level && l.source == source && l.message.find(text) != std::string::npos) ++n;
    return n;
  }

 private:
  static void on_log(bp_log_level level, const char *source, const char *message, void *user) {
    auto *self = static_cast<log_capture *>(user);
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->lines_.push_back({level, source ? source : "", message ? message : ""});
  }
  std::mutex mutex_;
  std::vector<line> lines_;
  bp_log_level old_level_;
};

}  // namespace bp_test
