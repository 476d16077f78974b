// probe.cpp: loads an untrusted plugin file in a child process first
// (BP_PLUGIN_PROBE=1, bp-devices --probe; PLG-11).
//
// A file's ELF constructors run inside dlopen, before the host can read its
// descriptor, and a hanging init blocks the load mutex: neither can be
// contained in-process. The child dlopens the file and runs the discovery
// slots (entry, init, enumerate, device_count, shutdown); if it crashes,
// exits on its own or does not finish within the time limit
// (BP_PLUGIN_PROBE_TIMEOUT seconds, default 10), the file is refused with
// that cause and never opened in this process. A child that survives proves
// little more than that; the in-process checks still follow.
//
// fork without exec: the child only calls dlopen and plugin code, and ends
// with _exit. Its stdout and stderr go to /dev/null, so a constructor that
// calls exit() cannot flush a copy of this process's stdio buffers.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "abi/minor.hpp"
#include "registry/registry_internal.hpp"

namespace bp::registry {
namespace {

void child_log(void *, bp_log_level, const char *) {}
int child_log_enabled(void *, bp_log_level) { return 0; }

[[noreturn]] void run_child(const std::string &path, int ok_fd) {
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    dup2(null_fd, 1);
    dup2(null_fd, 2);
  }
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h) {
    // Only what the parent would run anyway, after the same basic checks.
    // The descriptor is read from a copy (it may sit at any address), and
    // an entry outside the executable segments is never called.
    const void *dsym = dlsym(h, BP_PLUGIN_DESCRIPTOR_SYMBOL);
    void *entry_sym = dlsym(h, BP_PLUGIN_ENTRY_SYMBOL);
    const image_ranges image = image_of(h);
    bp_plugin_descriptor_t d{};
    const bool d_ok = dsym && image.contains(dsym, sizeof d);
    if (d_ok) std::memcpy(&d, dsym, sizeof d);
    auto entry = reinterpret_cast<bp_plugin_entry_fn>(entry_sym);
    if (d_ok && entry_sym && image.executable(entry_sym) && d.magic == BP_PLUGIN_MAGIC &&
        d.abi_major == BP_PLUGIN_ABI_VERSION) {
      bp_host_api host{};
      host.struct_size = sizeof host;
      host.abi_major = BP_PLUGIN_ABI_VERSION;
      host.abi_minor = BP_PLUGIN_ABI_MINOR;
      host.log = child_log;
      host.log_enabled = child_log_enabled;
      bp_error err{};
      try {
        const bp_plugin_i *iface = entry(BP_PLUGIN_ABI_VERSION, &host, &err);
        void *ctx = nullptr;
        if (iface && iface->struct_size >= offsetof(bp_plugin_i, n_params) && iface->init &&
            bp::abi::call_init(iface, &host, &ctx, &err) == BP_OK) {
          if (BP_HAS_SLOT(iface, bp_plugin_i, enumerate)) iface->enumerate(ctx, &err);
          if (iface->device_count) iface->device_count(ctx);
          if (iface->shutdown) iface->shutdown(ctx);
        }
      } catch (...) {
        // The parent catches and reports exceptions itself (PLG-10).
      }
    }
  }
  const char ok = 'k';
  ssize_t n = write(ok_fd, &ok, 1);
  _exit(n == 1 ? 0 : 1);
}

}  // namespace

bool probe_enabled() {
  const char *e = secure_getenv("BP_PLUGIN_PROBE");
  return e && e[0] == '1' && e[1] == '\0';
}

bp_status probe_plugin_file(const std::string &real, std::string &message) {
  int timeout_s = 10;
  if (const char *t = secure_getenv("BP_PLUGIN_PROBE_TIMEOUT")) {
    int v = std::atoi(t);
    if (v > 0 && v <= 3600) timeout_s = v;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    message = "cannot probe " + real + ": pipe: " + std::strerror(errno);
    return BP_ERR_INTERNAL;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    message = "cannot probe " + real + ": fork: " + std::strerror(errno);
    return BP_ERR_INTERNAL;
  }
  if (pid == 0) {
    close(fds[0]);
    run_child(real, fds[1]);
  }
  close(fds[1]);
  // Wait for the child's "survived" byte or end of file, within the limit.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char got = 0;
  bool hung = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      hung = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      hung = true;
      break;
    }
    if (r > 0) {
      ssize_t n = read(fds[0], &got, 1);
      if (n < 0 && errno == EINTR) continue;
    }
    break;
  }
  close(fds[0]);
  if (hung) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  const std::string prefix = real + ": the child process that loaded it first ";
  const std::string tail = " (PLG-11; BP_PLUGIN_PROBE=1)";
  if (hung) {
    message = prefix + "did not finish within " + std::to_string(timeout_s) +
              " s and was killed (a constructor or init that hangs?)" + tail;
    return BP_ERR_INCOMPATIBLE;
  }
  if (WIFSIGNALED(st)) {
    message = prefix + "was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) +
              ")" + tail;
    return BP_ERR_INCOMPATIBLE;
  }
  if (got != 'k' || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    message = prefix + "exited with status " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
              " (a constructor or slot that calls exit?)" + tail;
    return BP_ERR_INCOMPATIBLE;
  }
  return BP_OK;
}

}  // namespace bp::registry
