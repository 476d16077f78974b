// core_test_util.hpp: small helpers for the core model tests (no plugins).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backplane/backplane.h"

namespace bp_test {

// A context owned by the test fixture, with the thread's error cleared.
class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_clear_error();
    ctx = bp_context_new(0);
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override { bp_context_free(ctx); }

  bp_tensor *f32(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
    return bp_tensor_new_4d(ctx, BP_TYPE_F32, a, b, c, d);
  }
  bp_tensor *f16(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
    return bp_tensor_new_4d(ctx, BP_TYPE_F16, a, b, c, d);
  }
  bp_tensor *i32(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
    return bp_tensor_new_4d(ctx, BP_TYPE_I32, a, b, c, d);
  }

  bp_context *ctx = nullptr;
};

inline void expect_shape(const bp_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
  ASSERT_NE(t, nullptr) << bp_last_error();
  EXPECT_EQ(t->ne[0], a);
  EXPECT_EQ(t->ne[1], b);
  EXPECT_EQ(t->ne[2], c);
  EXPECT_EQ(t->ne[3], d);
}

// A builder returned NULL and the message contains every |parts| string.
#define EXPECT_FAILS_WITH(expr, ...)                                              \
  do {                                                                            \
    bp_clear_error();                                                             \
    const bp_tensor *failed_ = (expr);                                            \
    EXPECT_EQ(failed_, nullptr) << #expr;                                         \
    const std::string msg_ = bp_last_error();                                     \
    for (const char *part_ : {__VA_ARGS__}) {                                     \
      EXPECT_NE(msg_.find(part_), std::string::npos) << "missing '" << part_     \
                                                     << "' in: " << msg_;         \
    }                                                                             \
  } while (0)

}  // namespace bp_test
