// handles_test.cpp: the three gguf.h handles retire like the core's
// (docs/ownership.md, docs/failures.md #24). A second bp_gguf_close,
// bp_gguf_weights_free or bp_gguf_writer_free, and every call given a closed
// or freed handle, returns INVALID_ARGUMENT (or the call's failure value)
// with a message naming the call and the handle, and reads no freed memory
// (run under valgrind or the ASan build to see the last part).
//
// Each test opens a second handle of the same kind after the first is
// released, and keeps it open while the stale one is used: without the
// quarantine the allocator hands the released block straight to the second
// handle, so the stale handle would reach the live one (a second close would
// close the new file). The second handle must come through untouched.
#include <gtest/gtest.h>

#include <string>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"
#include "gguf_test_util.hpp"
#include "support/find.hpp"

namespace {

// The last call failed with INVALID_ARGUMENT, saying that |what| (the
// parameter) of |fn| was already released.
void expect_refused(const char *fn, const char *what) {
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT) << fn;
  const std::string msg = bp_last_error();
  EXPECT_NE(msg.find(std::string(fn) + ":"), std::string::npos) << fn << ": " << msg;
  EXPECT_NE(msg.find(std::string(" ") + what + " "), std::string::npos) << fn << ": " << msg;
  EXPECT_NE(msg.find("already freed"), std::string::npos) << fn << ": " << msg;
}

// A version 3 file with a u32 pair, a string pair and one f32 tensor "t" of 4.
gguf_test::bytes tiny_file() {
  gguf_test::bytes f = gguf_test::header(1, 2);
  gguf_test::kv_u32(f, "k", 5);
  f.str("s").put<uint32_t>(BP_GGUF_STRING).str("text");
  gguf_test::tensor_info(f, "t", {4}, 0, 0);
  f.pad_to(32);
  for (int i = 0; i < 4; ++i) f.put<float>(static_cast<float>(i));
  return f;
}

TEST(GgufHandles, ClosedFileIsRefusedByEveryCall) {
  const gguf_test::bytes b = tiny_file();
  bp_gguf *f = nullptr;
  ASSERT_EQ(bp_gguf_open_memory(b.b.data(), b.size(), &f), BP_OK) << bp_last_error();
  bp_gguf_close(f);
  EXPECT_EQ(bp_last_status(), BP_OK) << bp_last_error();
  bp_gguf *live = nullptr;
  ASSERT_EQ(bp_gguf_open_memory(b.b.data(), b.size(), &live), BP_OK) << bp_last_error();
  EXPECT_NE(live, f) << "a closed file's storage was handed to the next open";

  bp_gguf_close(f);
  expect_refused("bp_gguf_close", "file");
  EXPECT_EQ(bp_gguf_version(f), 0u);
  expect_refused("bp_gguf_version", "file");
  EXPECT_EQ(bp_gguf_alignment(f), 0u);
  expect_refused("bp_gguf_alignment", "file");
  EXPECT_EQ(bp_gguf_data_offset(f), 0u);
  expect_refused("bp_gguf_data_offset", "file");
  EXPECT_EQ(bp_gguf_file_size(f), 0u);
  expect_refused("bp_gguf_file_size", "file");
  EXPECT_EQ(bp_gguf_kv_count(f), 0u);
  expect_refused("bp_gguf_kv_count", "file");
  EXPECT_EQ(bp_gguf_kv_key(f, 0), nullptr);
  expect_refused("bp_gguf_kv_key", "file");
  size_t idx = 99;
  EXPECT_EQ(bp_gguf_find_key(f, "k", &idx), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_find_key", "file");
  EXPECT_EQ(idx, 99u);
  bp_gguf_value_info vi{};
  vi.struct_size = sizeof vi;
  EXPECT_EQ(bp_gguf_kv_describe(f, 0, &vi), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_kv_describe", "file");
  int64_t i64 = 0;
  EXPECT_EQ(bp_gguf_kv_read_int(f, 0, 0, &i64), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_kv_read_int", "file");
  uint64_t u64 = 0;
  EXPECT_EQ(bp_gguf_kv_read_uint(f, 0, 0, &u64), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_kv_read_uint", "file");
  double d = 0;
  EXPECT_EQ(bp_gguf_kv_read_float(f, 0, 0, &d), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_kv_read_float", "file");
  const char *text = nullptr;
  uint64_t len = 0;
  EXPECT_EQ(bp_gguf_kv_read_string(f, 1, 0, &text, &len), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_kv_read_string", "file");
  EXPECT_EQ(bp_gguf_tensor_count(f), 0u);
  expect_refused("bp_gguf_tensor_count", "file");
  EXPECT_EQ(bp_gguf_find_tensor(f, "t", &idx), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_find_tensor", "file");
  bp_gguf_tensor_info ti{};
  ti.struct_size = sizeof ti;
  EXPECT_EQ(bp_gguf_tensor_describe(f, 0, &ti), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_tensor_describe", "file");
  const void *data = nullptr;
  EXPECT_EQ(bp_gguf_tensor_data(f, 0, &data, &u64), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_tensor_data", "file");
  bp_context *ctx = bp_context_new(0);
  bp_gguf_weights *w = nullptr;
  EXPECT_EQ(bp_gguf_load(f, ctx, nullptr, nullptr, &w), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_load", "file");
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(bp_test::find_tensor(ctx, "t"), nullptr) << "a closed file's tensors were made";
  bp_context_free(ctx);

  // The file opened after the close is untouched.
  EXPECT_EQ(bp_gguf_version(live), 3u) << bp_last_error();
  EXPECT_EQ(bp_gguf_kv_count(live), 2u);
  EXPECT_EQ(bp_gguf_tensor_count(live), 1u);
  bp_gguf_close(live);
  EXPECT_EQ(bp_last_status(), BP_OK) << "a stale close closed the live file: " << bp_last_error();
}

TEST(GgufHandles, FreedWeightsAreRefusedByEveryCall) {
  bp_backend *be = gguf_test::backend("cpu");
  if (be == nullptr) GTEST_SKIP() << "cpu: no device here (" << bp_last_error() << ")";
  bp_device *dev = bp_backend_device(be);
  const gguf_test::bytes b = tiny_file();
  bp_gguf *f = nullptr;
  ASSERT_EQ(bp_gguf_open_memory(b.b.data(), b.size(), &f), BP_OK) << bp_last_error();
  bp_context *ctx1 = bp_context_new(0), *ctx2 = bp_context_new(0);
  bp_gguf_weights *w = nullptr, *live = nullptr;
  ASSERT_EQ(bp_gguf_load(f, ctx1, dev, nullptr, &w), BP_OK) << bp_last_error();
  bp_gguf_weights_free(w);
  EXPECT_EQ(bp_last_status(), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_gguf_load(f, ctx2, dev, nullptr, &live), BP_OK) << bp_last_error();
  EXPECT_NE(live, w) << "freed weights' storage was handed to the next load";
  const size_t live_buffers = bp_gguf_weights_buffer_count(live);
  ASSERT_GE(live_buffers, 1u);

  bp_gguf_weights_free(w);
  expect_refused("bp_gguf_weights_free", "weights");
  EXPECT_FALSE(bp_gguf_weights_mapped(w));
  expect_refused("bp_gguf_weights_mapped", "weights");
  EXPECT_EQ(bp_gguf_weights_tensor_count(w), 0u);
  expect_refused("bp_gguf_weights_tensor_count", "weights");
  EXPECT_EQ(bp_gguf_weights_bytes(w), 0u);
  expect_refused("bp_gguf_weights_bytes", "weights");
  EXPECT_EQ(bp_gguf_weights_buffer_count(w), 0u);
  expect_refused("bp_gguf_weights_buffer_count", "weights");
  EXPECT_EQ(bp_gguf_weights_buffer(w, 0), nullptr);
  expect_refused("bp_gguf_weights_buffer", "weights");

  // The weights loaded after the free still hold their tensor and buffers.
  EXPECT_EQ(bp_gguf_weights_tensor_count(live), 1u);
  EXPECT_EQ(bp_gguf_weights_bytes(live), 16u);
  float got[4] = {};
  ASSERT_EQ(bp_tensor_get(bp_test::find_tensor(ctx2, "t"), got, 0, sizeof got), BP_OK) << bp_last_error();
  EXPECT_EQ(got[3], 3.0f);
  bp_gguf_weights_free(live);
  EXPECT_EQ(bp_last_status(), BP_OK) << "a stale free freed the live weights: " << bp_last_error();
  bp_context_free(ctx1);
  bp_context_free(ctx2);
  bp_gguf_close(f);
  bp_backend_free(be);
}

TEST(GgufHandles, FreedWriterIsRefusedByEveryCall) {
  bp_gguf_writer *w = nullptr, *live = nullptr;
  ASSERT_EQ(bp_gguf_writer_new(&w), BP_OK) << bp_last_error();
  bp_gguf_writer_free(w);
  EXPECT_EQ(bp_last_status(), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_gguf_writer_new(&live), BP_OK) << bp_last_error();
  EXPECT_NE(live, w) << "a freed writer's storage was handed to the next writer";

  bp_gguf_writer_free(w);
  expect_refused("bp_gguf_writer_free", "writer");
  EXPECT_EQ(bp_gguf_writer_set_alignment(w, 64), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_writer_set_alignment", "writer");
  const uint32_t v = 7;
  EXPECT_EQ(bp_gguf_writer_add_value(w, "k", BP_GGUF_U32, &v), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_writer_add_value", "writer");
  EXPECT_EQ(bp_gguf_writer_add_string(w, "s", "x", 1), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_writer_add_string", "writer");
  EXPECT_EQ(bp_gguf_writer_add_array(w, "a", BP_GGUF_U32, &v, 1), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_writer_add_array", "writer");
  bp_context *ctx = bp_context_new(0);
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 4);
  bp_tensor_set_name(t, "t");
  EXPECT_EQ(bp_gguf_writer_add_tensor(w, t), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_writer_add_tensor", "writer");
  bp_context_free(ctx);
  const float host[4] = {0, 1, 2, 3};
  const int64_t ne[1] = {4};
  EXPECT_EQ(bp_gguf_writer_add_tensor_data(w, "h", 0, 1, ne, host, sizeof host), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_writer_add_tensor_data", "writer");
  gguf_test::scratch out("stale_writer.gguf");
  EXPECT_EQ(bp_gguf_writer_write(w, out.path.c_str()), BP_ERR_INVALID_ARGUMENT);
  expect_refused("bp_gguf_writer_write", "writer");

  // The writer made after the free starts empty and writes its own file.
  ASSERT_EQ(bp_gguf_writer_add_value(live, "k", BP_GGUF_U32, &v), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_gguf_writer_write(live, out.path.c_str()), BP_OK) << bp_last_error();
  bp_gguf *g = nullptr;
  ASSERT_EQ(bp_gguf_open(out.path.c_str(), &g), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_gguf_kv_count(g), 1u);
  EXPECT_EQ(bp_gguf_alignment(g), 32u);
  bp_gguf_close(g);
  bp_gguf_writer_free(live);
  EXPECT_EQ(bp_last_status(), BP_OK) << "a stale free freed the live writer: " << bp_last_error();
}

// A handle of one gguf kind passed as another names the kind it is.
TEST(GgufHandles, HandleOfAnotherKindIsNamed) {
  bp_gguf_writer *w = nullptr;
  ASSERT_EQ(bp_gguf_writer_new(&w), BP_OK) << bp_last_error();
  const auto *as_file = reinterpret_cast<const bp_gguf *>(w);
  EXPECT_EQ(bp_gguf_version(as_file), 0u);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  const std::string msg = bp_last_error();
  EXPECT_NE(msg.find("bp_gguf_version: file is not a GGUF file (a GGUF writer)"), std::string::npos) << msg;
  bp_gguf_close(reinterpret_cast<bp_gguf *>(w));  // refused: not a file, and the writer stays
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_gguf_writer_set_alignment(w, 64), BP_OK) << bp_last_error();
  bp_gguf_writer_free(w);
  EXPECT_EQ(bp_last_status(), BP_OK) << bp_last_error();
}

}  // namespace
