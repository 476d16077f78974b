// objects_test_util.hpp: helpers for the buffer and backend tests, which run
// against real plugins: the cpu plugin and the fixtures in tests/fixtures.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <sys/stat.h>

#include <vector>

#include "backplane/backplane.h"

namespace bp_objects_test {

inline bool file_exists(const std::string &path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// Loads the plugin file at |path| and returns its first device, or nullptr
// (with a gtest failure) when it cannot.
inline bp_device *load_first_device(const std::string &path) {
  bp_plugin *p = nullptr;
  bp_status st = bp_registry_load(path.c_str(), &p);
  EXPECT_EQ(st, BP_OK) << path << ": " << bp_last_error();
  if (st != BP_OK || p == nullptr) return nullptr;
  EXPECT_GE(bp_plugin_device_count(p), 1u) << path;
  return bp_plugin_device_count(p) ? bp_plugin_device(p, 0) : nullptr;
}

inline const std::string cpu_plugin_path() { return std::string(BP_TEST_PLUGIN_DIR) + "/libbp-cpu.so"; }
inline const std::string partial_plugin_path() {
  return std::string(BP_TEST_FIXTURE_DIR) + "/partial/libbp-partial.so";
}

// Expects |status| == |code| and every |parts| string in bp_last_error().
#define EXPECT_STATUS(expr, code, ...)                                                             \
  do {                                                                                              \
    bp_clear_error();                                                                               \
    const bp_status status_ = (expr);                                                               \
    EXPECT_EQ(status_, (code)) << #expr << ": " << bp_status_name(status_) << ": " << bp_last_error(); \
    const std::string msg_ = bp_last_error();                                                       \
    /* copied at once: a part may be a temporary's c_str() */                                     \
    const std::vector<std::string> parts_{"", ##__VA_ARGS__};                                       \
    for (const std::string &part_ : parts_) {                                                       \
      EXPECT_NE(msg_.find(part_), std::string::npos) << "missing '" << part_ << "' in: " << msg_;   \
    }                                                                                               \
  } while (0)

// A cpu device, a backend on it and a context; every test starts clean.
class CpuObjectsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_clear_error();
    dev = load_first_device(cpu_plugin_path());
    ASSERT_NE(dev, nullptr);
    ASSERT_EQ(bp_backend_new_on_device(dev, nullptr, &backend), BP_OK) << bp_last_error();
    ctx = bp_context_new(0);
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override {
    for (bp_buffer *b : buffers) bp_buffer_free(b);
    bp_backend_free(backend);
    bp_context_free(ctx);
  }

  // Allocates every tensor of |c| (default: ctx) on the cpu backend; the
  // buffer is freed at teardown.
  bp_buffer *alloc_all(bp_context *c = nullptr) {
    bp_buffer *buf = nullptr;
    EXPECT_EQ(bp_context_alloc_tensors(c ? c : ctx, backend, &buf), BP_OK) << bp_last_error();
    if (buf) buffers.push_back(buf);
    return buf;
  }
  bp_tensor *named(bp_tensor *t, const char *name) { return bp_tensor_set_name(t, name); }

  bp_device *dev = nullptr;
  bp_backend *backend = nullptr;
  bp_context *ctx = nullptr;
  std::vector<bp_buffer *> buffers;
};

}  // namespace bp_objects_test
