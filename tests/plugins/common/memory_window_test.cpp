// memory_window_test.cpp: the buffer-slot checks every device plugin shares
// (plugins/common/memory_window.hpp): the range check, and the target check
// of the asynchronous transfers with its one message.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "plugins/common/memory_window.hpp"

using bp::plugins::memory_window;
using bp::plugins::transfer_target_check;
using bp::plugins::window_check;

namespace {

// A tensor named |name| at byte |at| of |w| (only data and name matter here).
bp_tensor tensor_at(const memory_window &w, size_t at, const char *name) {
  bp_tensor t{};
  t.data = const_cast<char *>(w.base) + at;
  std::snprintf(t.name, sizeof t.name, "%s", name);
  return t;
}

TEST(PluginMemoryWindow, RangeCheckKeepsEveryByteInsideTheBuffer) {
  char bytes[64];
  const memory_window w{bytes, sizeof bytes};
  bp_tensor t = tensor_at(w, 16, "x");
  bp_error err{};
  EXPECT_EQ(window_check(w, &t, 0, 48, "set_tensor", &err), BP_OK);
  EXPECT_EQ(window_check(w, &t, 1, 48, "set_tensor", &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find("set_tensor of 48 bytes at offset 1 of tensor 'x' leaves its buffer"),
            std::string::npos)
      << err.message;
  EXPECT_EQ(window_check(w, &t, SIZE_MAX, 2, "set_tensor", &err), BP_ERR_INVALID_ARGUMENT);  // no wrap-around
  EXPECT_EQ(window_check(w, &t, 100, 0, "set_tensor", &err), BP_OK);                         // size 0
}

TEST(PluginMemoryWindow, TransferTargetOutsideTheBackendsMemoryIsNamed) {
  char bytes[64];
  const memory_window w{bytes, sizeof bytes};
  bp_tensor t = tensor_at(w, 0, "weights");
  bp_error err{};
  EXPECT_EQ(transfer_target_check(false, memory_window{}, &t, 0, 4, "this backend's OpenCL device", &err),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message,
               "async transfer of tensor 'weights', which is not in memory of this backend's OpenCL device");
  // Not even a size of 0 passes for memory the backend does not reach.
  EXPECT_EQ(transfer_target_check(false, memory_window{}, &t, 0, 0, "this backend's server session", &err),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(transfer_target_check(true, w, nullptr, 0, 4, "x", &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "async transfer needs a tensor");
}

TEST(PluginMemoryWindow, TransferTargetRangeIsTheSharedRangeCheck) {
  char bytes[64];
  const memory_window w{bytes, sizeof bytes};
  bp_tensor t = tensor_at(w, 32, "kv");
  bp_error err{};
  EXPECT_EQ(transfer_target_check(true, w, &t, 0, 32, "this backend's Vulkan device", &err), BP_OK);
  EXPECT_EQ(transfer_target_check(true, w, &t, 8, 32, "this backend's Vulkan device", &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "async transfer of 32 bytes at offset 8 of tensor 'kv' leaves its buffer");
  EXPECT_EQ(transfer_target_check(true, w, &t, 8, 0, "this backend's Vulkan device", &err), BP_OK);
}

}  // namespace
