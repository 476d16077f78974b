// The gguf names renamed before 0.3 (gguf.h's deprecated section,
// docs/api-guide.md) still link and reach the same functions as the new ones.
#include <gtest/gtest.h>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

TEST(GgufDeprecatedNames, ForwardToTheNewFunctions) {
  gguf_test::bytes b = gguf_test::header(0, 1);
  gguf_test::kv_u32(b, "k", 5);
  bp_gguf *f = nullptr;
  ASSERT_EQ(bp_gguf_open_memory(b.b.data(), b.size(), &f), BP_OK) << bp_last_error();
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  ASSERT_EQ(bp_gguf_kv_get_int(f, 0, 0, &i), BP_OK);
  ASSERT_EQ(bp_gguf_kv_get_uint(f, 0, 0, &u), BP_OK);
  ASSERT_EQ(bp_gguf_kv_get_float(f, 0, 0, &d), BP_OK);
  EXPECT_EQ(i, 5);
  EXPECT_EQ(u, 5u);
  EXPECT_EQ(d, 5.0);
  const char *p = nullptr;
  uint64_t n = 0;
  // Failures carry the new function's status and message.
  EXPECT_EQ(bp_gguf_kv_get_string(f, 0, 0, &p, &n), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("bp_gguf_kv_read_string"), std::string::npos) << bp_last_error();
  bp_gguf_value_info vi{};
  vi.struct_size = sizeof vi;
  ASSERT_EQ(bp_gguf_kv_info(f, 0, &vi), BP_OK);
  EXPECT_EQ(vi.kind, BP_GGUF_U32);
  bp_gguf_tensor_info ti{};
  ti.struct_size = sizeof ti;
  EXPECT_EQ(bp_gguf_tensor_get_info(f, 0, &ti), BP_ERR_INVALID_ARGUMENT);
  bp_gguf_close(f);
}
