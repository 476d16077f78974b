// alike_test.cpp: what every shipped plugin does alike.
// - Errors name the plugin once: the host prefixes the plugin's name, so a
//   plugin's own message does not start with it ("opencl: creating backend
//   'opencl:0': opencl: ..." named it twice).
// - Devices are found once, by the first of enumerate, device_count and
//   device_get (plugins/common/plugin_common.hpp): a host of ABI 1.0, which
//   never calls enumerate, sees the same devices as one of ABI 1.1, and a
//   later enumerate repeats the first outcome. Checked on each plugin file
//   with a driver to find (blas, vulkan, opencl) through its C table.
// - init and shutdown are the shared guarded ones (plugin_lifecycle in
//   plugins/common): init_with_host (ABI 1.2) refuses a NULL out pointer,
//   clears *out_plugin before anything can fail, and shutdown(NULL) is a
//   no-op; init, for a host of ABI 1.1, still works.
#include <backplane/backplane.h>
#include <backplane/plugin.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sanitizers/pin_loaded_objects.hpp"
#include "support/find.hpp"

namespace {

size_t count_of(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bp_plugin *plugin_with_devices(const char *name) {
  bp_registry_add_path(BP_TEST_PLUGIN_DIR);
  bp_plugin *p = bp_test::find_plugin(name);
  return p && bp_plugin_device_count(p) > 0 ? p : nullptr;
}

// A parameter value the plugin itself refuses (the schema lets it through).
struct refused_case {
  const char *plugin, *spec, *message;
};

TEST(ShippedPlugins, ErrorsNameThePluginOnce) {
  const refused_case cases[] = {
      {"opencl", "opencl:matmul_cols=3", "matmul_cols=3; use 0 (auto), 1, 2 or 4"},
      {"vulkan", "vulkan:tile_cols=12", "tile_cols=12; use 0 (auto), 8, 16 or 32"},
      {"vulkan", "vulkan:mul_mat=tiled", "mul_mat=tiled; use auto, cpu or gpu"},
  };
  size_t checked = 0;
  for (const refused_case &c : cases) {
    SCOPED_TRACE(c.spec);
    if (!plugin_with_devices(c.plugin)) continue;
    bp_backend *be = nullptr;
    EXPECT_EQ(bp_backend_new(c.spec, &be), BP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(be, nullptr);
    const std::string message = bp_last_error();
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
    EXPECT_EQ(count_of(message, std::string(c.plugin) + ": "), 1u) << message;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "neither an OpenCL nor a Vulkan device here";
}

void ignore_log(void *, bp_log_level, const char *) {}

// One plugin file opened by hand, its table driven as a host would.
class raw_plugin {
 public:
  explicit raw_plugin(const std::string &name) {
    handle_ = dlopen((std::string(BP_TEST_PLUGIN_DIR) + "/libbp-" + name + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) return;
    auto entry = reinterpret_cast<bp_plugin_entry_fn>(dlsym(handle_, BP_PLUGIN_ENTRY_SYMBOL));
    host_.struct_size = sizeof host_;
    host_.abi_major = BP_PLUGIN_ABI_VERSION;
    host_.abi_minor = BP_PLUGIN_ABI_MINOR;
    host_.log = ignore_log;
    bp_error err{};
    table_ = entry ? entry(BP_PLUGIN_ABI_VERSION, &host_, &err) : nullptr;
  }
  ~raw_plugin() {
    if (handle_) dlclose(handle_);
  }
  const bp_plugin_i *table() const { return table_; }
  const bp_host_api *host() const { return &host_; }

 private:
  void *handle_ = nullptr;
  bp_host_api host_{};
  const bp_plugin_i *table_ = nullptr;
};

// The checks of one child process: each failure printed, the count its
// exit status.
struct failure_count {
  const char *name;
  int n = 0;
  void check(bool ok, const std::string &what) {
    if (ok) return;
    std::fprintf(stderr, "%s: %s\n", name, what.c_str());
    ++n;
  }
};

// Drives |name|'s table as three hosts would, in a process of its own (the
// registry must not share the plugin file's globals); the exit status is
// the number of failed checks, each printed.
int check_discovery(const char *name) {
  failure_count failed{name};
  auto check = [&](bool ok, const std::string &what) { failed.check(ok, what); };
  raw_plugin p(name);
  const bp_plugin_i *t = p.table();
  if (!t) return 0;  // not built here
  if (!t->enumerate) return 100;
  bp_error err{};
  // A host of ABI 1.1: enumerate, then the count.
  void *a = nullptr;
  if (t->init(&a, &err) != BP_OK) return 101;
  const bp_status found = t->enumerate(a, &err);
  bp_test::pin_loaded_objects();  // the driver stays mapped for LSan
  const std::string why = err.message;
  const uint32_t n = t->device_count(a);
  bp_error again{};
  check(t->enumerate(a, &again) == found, "a second enumerate changed the outcome");
  check(found == BP_OK || std::string(again.message) == why, "a second enumerate changed the message");
  check(t->device_count(a) == n, "the count changed");
  t->shutdown(a);
  // A host of ABI 1.0 never calls enumerate: the count finds the devices.
  void *b = nullptr;
  if (t->init(&b, &err) != BP_OK) return 102;
  check(t->device_count(b) == n,
        "device_count before enumerate: " + std::to_string(t->device_count(b)) + " devices, not " + std::to_string(n));
  bp_device_ref dev{};
  if (n > 0) check(t->device_get(b, 0, &dev, &err) == BP_OK, std::string("device_get: ") + err.message);
  bp_error late{};
  check(t->enumerate(b, &late) == found, "enumerate after device_count changed the outcome");
  t->shutdown(b);
  // device_get first finds them too.
  void *c = nullptr;
  if (t->init(&c, &err) != BP_OK) return 103;
  if (n > 0) check(t->device_get(c, n - 1, &dev, &err) == BP_OK, "device_get before enumerate");
  check(t->device_get(c, n, &dev, &err) == BP_ERR_NOT_FOUND, "device_get past the last device");
  t->shutdown(c);
  std::fprintf(stderr, "%s: %u devices, %s\n", name, n, found == BP_OK ? "found" : why.c_str());
  return failed.n;
}

TEST(ShippedPlugins, DevicesAreFoundOnceByTheFirstCallThatNeedsThem) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char *name : {"blas", "vulkan", "opencl"}) {
    SCOPED_TRACE(name);
    EXPECT_EXIT(std::exit(check_discovery(name)), ::testing::ExitedWithCode(0), "");
  }
}

// Drives |name|'s init and shutdown slots, in a process of its own (blas
// allows one instance per process); the exit status counts the failures.
int check_lifecycle(const char *name) {
  failure_count failed{name};
  auto check = [&](bool ok, const std::string &what) { failed.check(ok, what); };
  raw_plugin p(name);
  const bp_plugin_i *t = p.table();
  if (!t) return 0;  // not built here
  if (t->struct_size < offsetof(bp_plugin_i, init_with_host) + sizeof t->init_with_host || !t->init_with_host)
    return 100;
  bp_error err{};
  check(t->init_with_host(p.host(), nullptr, &err) == BP_ERR_INVALID_ARGUMENT, "a NULL out pointer was accepted");
  void *state = &err;  // not NULL: init must clear it
  check(t->init_with_host(p.host(), &state, &err) == BP_OK, std::string("init_with_host: ") + err.message);
  check(state != &err && state != nullptr, "init_with_host left *out_plugin as it was");
  if (std::string(name) == "blas") {
    void *second = &err;  // one instance per process: refused, and cleared
    check(t->init_with_host(p.host(), &second, &err) == BP_ERR_FAILED_PRECONDITION, "a second blas init passed");
    check(second == nullptr, "a failed init left *out_plugin set");
  }
  t->shutdown(state);
  t->shutdown(nullptr);
  void *old_host = nullptr;  // a host of ABI 1.1 calls init
  check(t->init(&old_host, &err) == BP_OK && old_host, std::string("init: ") + err.message);
  t->shutdown(old_host);
  return failed.n;
}

TEST(ShippedPlugins, InitAndShutdownAreTheSharedGuardedOnes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char *name : {"cpu", "blas", "vulkan", "opencl", "remote"}) {
    SCOPED_TRACE(name);
    EXPECT_EXIT(std::exit(check_lifecycle(name)), ::testing::ExitedWithCode(0), "");
  }
}

}  // namespace
