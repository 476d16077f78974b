// registry_test_util.hpp: helpers shared by the registry tests.
#pragma once

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace bp_test {

// libbp-<variant>.so in the fixture folder.
inline std::string fixture(const std::string &variant) {
  return std::string(BP_TEST_FIXTURE_DIR) + "/libbp-" + variant + ".so";
}

// The fixture plugin |variant|, loaded (or already loaded). Fails the test otherwise.
inline bp_plugin *load_fixture(const std::string &variant) {
  bp_plugin *p = nullptr;
  bp_status st = bp_registry_load(fixture(variant).c_str(), &p);
  EXPECT_EQ(st, BP_OK) << bp_last_error();
  return p;
}

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
