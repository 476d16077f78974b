// api_args_test.cpp: every gguf.h entry point given NULL or a bad index
// returns a status with a message naming the function or the argument,
// never crashes; the free and close functions accept NULL.
#include <gtest/gtest.h>

#include <string>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"

namespace {

void expect_invalid(bp_status st, const char *what) {
  EXPECT_EQ(st, BP_ERR_INVALID_ARGUMENT) << what;
  EXPECT_STRNE(bp_last_error(), "") << what;
}

}  // namespace

TEST(GgufApi, NullHandlesAndArgumentsAreRefused) {
  bp_gguf *f = nullptr;
  expect_invalid(bp_gguf_open(nullptr, &f), "open path");
  expect_invalid(bp_gguf_open("/tmp/x", nullptr), "open out");
  EXPECT_EQ(bp_gguf_open("/nonexistent/file.gguf", &f), BP_ERR_NOT_FOUND);
  EXPECT_NE(std::string(bp_last_error()).find("/nonexistent/file.gguf"), std::string::npos);
  expect_invalid(bp_gguf_open("/tmp", &f), "open a folder");
  expect_invalid(bp_gguf_open_memory(nullptr, 10, &f), "open_memory NULL data");
  EXPECT_EQ(bp_gguf_version(nullptr), 0u);
  EXPECT_NE(std::string(bp_last_error()).find("bp_gguf_version"), std::string::npos);
  EXPECT_EQ(bp_gguf_kv_count(nullptr), 0u);
  EXPECT_EQ(bp_gguf_tensor_count(nullptr), 0u);
  EXPECT_EQ(bp_gguf_kv_key(nullptr, 0), nullptr);
  int64_t i = 0;
  expect_invalid(bp_gguf_kv_read_int(nullptr, 0, 0, &i), "get_int NULL file");
  bp_gguf_close(nullptr);
  bp_gguf_weights_free(nullptr);
  bp_gguf_writer_free(nullptr);
  EXPECT_EQ(bp_gguf_weights_mapped(nullptr), false);
  bp_gguf_weights *w = nullptr;
  expect_invalid(bp_gguf_load(nullptr, nullptr, nullptr, nullptr, &w), "load NULL file");
  expect_invalid(bp_gguf_writer_new(nullptr), "writer_new NULL");
  expect_invalid(bp_gguf_writer_add_tensor(nullptr, nullptr), "add_tensor NULL");
  expect_invalid(bp_gguf_writer_write(nullptr, "/tmp/x"), "write NULL");
  EXPECT_STREQ(bp_gguf_kind_name(BP_GGUF_F64), "f64");
  EXPECT_STREQ(bp_gguf_kind_name(static_cast<bp_gguf_kind>(99)), "?");
  EXPECT_EQ(bp_gguf_file_type_of(static_cast<bp_type>(99)), UINT32_MAX);

  // A valid file, then bad indices and struct sizes.
  gguf_test::bytes b = gguf_test::header(0, 1);
  gguf_test::kv_u32(b, "k", 5);
  ASSERT_EQ(bp_gguf_open_memory(b.b.data(), b.size(), &f), BP_OK) << bp_last_error();
  expect_invalid(bp_gguf_kv_read_int(f, 1, 0, &i), "pair past the end");
  expect_invalid(bp_gguf_kv_read_int(f, 0, 1, &i), "element past the end");
  expect_invalid(bp_gguf_kv_read_int(f, 0, 0, nullptr), "NULL out");
  const char *p = nullptr;
  uint64_t n = 0;
  expect_invalid(bp_gguf_kv_read_string(f, 0, 0, &p, &n), "a u32 read as a string");
  EXPECT_NE(std::string(bp_last_error()).find("'k'"), std::string::npos) << bp_last_error();
  bp_gguf_value_info vi{};
  expect_invalid(bp_gguf_kv_describe(f, 0, &vi), "struct_size 0");
  bp_gguf_tensor_info ti{};
  ti.struct_size = sizeof ti;
  expect_invalid(bp_gguf_tensor_describe(f, 0, &ti), "no tensors");
  size_t idx = 0;
  EXPECT_EQ(bp_gguf_find_key(f, "absent", &idx), BP_ERR_NOT_FOUND);
  EXPECT_EQ(bp_gguf_find_tensor(f, "absent", &idx), BP_ERR_NOT_FOUND);
  bp_context *ctx = bp_context_new(0);
  expect_invalid(bp_gguf_load(f, ctx, nullptr, nullptr, &w), "load NULL device");
  bp_context_free(ctx);
  bp_gguf_close(f);
}
