// opencl_harness.hpp: what the opencl plugin tests share: the plugin folder
// on the search path, the OpenCL devices' specs (tests skip when there are
// none), a program cache folder kept in the build tree so repeated test runs
// do not compile again, a child-process runner, random inputs and the
// process's debug log lines (which kernels and fusions ran).
#pragma once

#include <backplane/backplane.h>

#include <array>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <vector>
#include "support/find.hpp"

namespace bp_opencl_test {

inline void add_plugin_path() {
  static const bool added = [] {
    bp_registry_add_path(BP_TEST_PLUGIN_DIR);
    return true;
  }();
  (void)added;
}

// "opencl:0", "opencl:1", ... for every device the plugin found.
inline std::vector<std::string> device_specs() {
  add_plugin_path();
  std::vector<std::string> specs;
  bp_plugin *p = bp_test::find_plugin("opencl");
  if (!p) return specs;
  for (size_t i = 0; i < bp_plugin_device_count(p); ++i) specs.push_back("opencl:" + std::to_string(i));
  return specs;
}

// The build tree's program cache for the tests (reused between runs).
inline std::string test_cache_dir() { return std::string(BP_TEST_BIN_DIR) + "/../opencl-test-cache"; }

struct child_result {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// Runs |command| through the shell and collects its output.
inline child_result run_child(const std::string &command) {
  child_result r;
  FILE *f = popen((command + " 2>&1").c_str(), "r");
  if (!f) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.output.append(buf.data(), n);
  r.status = pclose(f);
  return r;
}

inline size_t count_of(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// |n| values uniform in [-2, 2), the same ones for a seed.
inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto &x : v) x = d(rng);
  return v;
}

// Debug lines of the process while it lives.
struct log_lines {
  std::mutex mu;
  std::vector<std::string> lines;
  bp_log_level previous = bp_log_get_level();
  log_lines() {
    bp_log_set_level(BP_LOG_DEBUG);
    bp_log_set_callback(
        [](bp_log_level, const char *, const char *message, void *self) {
          auto *me = static_cast<log_lines *>(self);
          std::lock_guard<std::mutex> lock(me->mu);
          me->lines.push_back(message);
        },
        this);
  }
  ~log_lines() {
    bp_log_set_callback(nullptr, nullptr);
    bp_log_set_level(previous);
  }
  bool has(const std::string &what) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto &l : lines)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
};

}  // namespace bp_opencl_test
