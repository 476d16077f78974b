// remote_harness.hpp: what the remote plugin's end-to-end tests share: the
// plugin reloaded with a given environment (BP_REMOTE is read when the
// plugin enumerates, once per load), and a log capture.
#ifndef BP_TESTS_PLUGINS_REMOTE_REMOTE_HARNESS_HPP_
#define BP_TESTS_PLUGINS_REMOTE_REMOTE_HARNESS_HPP_

#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "serve_process.hpp"
#include "support/find.hpp"

namespace bp_test {

// Skips the test when bp-serve was not built next to the tests.
#define BP_REQUIRE_SERVE()                                                            \
  do {                                                                                \
    if (access(bp_test::serve_binary().c_str(), X_OK) != 0)                           \
      GTEST_SKIP() << bp_test::serve_binary() << " is not built: no end-to-end test"; \
  } while (0)

// What bp-serve is started with to serve the cpu device.
inline std::vector<std::string> serve_cpu(std::vector<std::string> more = {}) {
  std::vector<std::string> args{"--devices", "cpu"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Unloads the remote plugin (if loaded) and loads it again, so its next
// enumeration reads the environment as it is now.
inline bp_plugin *reload_remote() {
  if (bp_plugin *p = bp_test::find_plugin("remote")) {
    const bp_status st = bp_plugin_unload(p);
    EXPECT_EQ(st, BP_OK) << bp_last_error();
  }
  bp_plugin *p = nullptr;
  const std::string path = std::string(BP_TEST_PLUGIN_DIR) + "/libbp-remote.so";
  EXPECT_EQ(bp_registry_load(path.c_str(), &p), BP_OK) << bp_last_error();
  return p;
}

// Every log line of the plugin while it lives.
class log_capture {
 public:
  explicit log_capture(bp_log_level level = BP_LOG_DEBUG) {
    previous_ = bp_log_get_level();
    bp_log_set_level(level);
    bp_log_set_callback(
        [](bp_log_level lvl, const char *source, const char *message, void *self) {
          auto *me = static_cast<log_capture *>(self);
          std::lock_guard<std::mutex> lock(me->mu_);
          me->lines_.push_back(std::string(lvl >= BP_LOG_WARN ? "W " : "D ") + source + ": " + message);
        },
        this);
  }
  ~log_capture() {
    bp_log_set_callback(nullptr, nullptr);
    bp_log_set_level(previous_);
  }
  int count(const std::string &needle) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto &l : lines_) n += l.find(needle) != std::string::npos;
    return n;
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto &l : lines_) s += l + "\n";
    return s;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
  bp_log_level previous_;
};

}  // namespace bp_test

#endif  // BP_TESTS_PLUGINS_REMOTE_REMOTE_HARNESS_HPP_
