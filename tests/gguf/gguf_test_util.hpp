// gguf_test_util.hpp: what the GGUF tests share: a scratch path that
// removes itself, a cpu backend, and reading /proc/self/status.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "backplane/backplane.h"

namespace gguf_test {

// A file name under /tmp, removed when the object goes.
struct scratch {
  std::string path;
  explicit scratch(const std::string &name) { path = "/tmp/bp_gguf_test_" + std::to_string(getpid()) + "_" + name; }
  ~scratch() { std::remove(path.c_str()); }
};

// A backend on |spec| or nullptr when that plugin has no device here.
inline bp_backend *backend(const char *spec) {
  bp_registry_add_path(BP_TEST_PLUGIN_DIR);
  bp_backend *be = nullptr;
  if (bp_backend_new(spec, &be) != BP_OK) return nullptr;
  return be;
}

// A field of /proc/self/status in KiB ("VmRSS", "RssFile", "RssAnon").
inline long status_kib(const std::string &field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

}  // namespace gguf_test
