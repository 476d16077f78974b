// large_file_test.cpp: a 300 MiB file loaded onto cpu through the mapping
// keeps this process's anonymous memory low: the tensors are the file's
// pages (RssFile), which the kernel can drop and read again, not copies
// (RssAnon). The file lives in /tmp for the test only.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"
#include "gguf_test_util.hpp"
#include "support/find.hpp"

namespace {

constexpr int kTensors = 6;
constexpr uint64_t kRow = 65536, kRows = 200;  // 50 MiB of f32 per tensor
constexpr long kBudgetKib = 64 * 1024;         // anonymous memory the load may add

float value(int tensor, uint64_t i) { return static_cast<float>(tensor * 1000 + static_cast<int>(i % 997)); }

bool write_large(const std::string &path) {
  gguf_test::bytes head = gguf_test::header(kTensors, 0);
  const uint64_t bytes = kRow * kRows * 4;
  for (int k = 0; k < kTensors; ++k) {
    gguf_test::tensor_info(head, "big." + std::to_string(k), {kRow, kRows}, 0, static_cast<uint64_t>(k) * bytes);
  }
  head.pad_to(32);
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(head.b.data(), 1, head.size(), f) == head.size();
  std::vector<float> row(kRow);
  for (int k = 0; ok && k < kTensors; ++k) {
    for (uint64_t r = 0; ok && r < kRows; ++r) {
      for (uint64_t i = 0; i < kRow; ++i) row[i] = value(k, r * kRow + i);
      ok = std::fwrite(row.data(), 4, kRow, f) == kRow;
    }
  }
  return std::fclose(f) == 0 && ok;
}

}  // namespace

TEST(GgufLargeFile, MappedLoadKeepsAnonymousMemoryLow) {
  bp_backend *be = gguf_test::backend("cpu");
  ASSERT_NE(be, nullptr) << bp_last_error();
  gguf_test::scratch file("large.gguf");
  ASSERT_TRUE(write_large(file.path)) << "writing " << file.path;

  const long anon0 = gguf_test::status_kib("RssAnon"), file0 = gguf_test::status_kib("RssFile");
  ASSERT_GE(anon0, 0) << "no RssAnon in /proc/self/status";
  bp_gguf *g = nullptr;
  ASSERT_EQ(bp_gguf_open(file.path.c_str(), &g), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_gguf_weights *w = nullptr;
  ASSERT_EQ(bp_gguf_load(g, ctx, bp_backend_device(be), nullptr, &w), BP_OK) << bp_last_error();
  ASSERT_TRUE(bp_gguf_weights_mapped(w));
  EXPECT_EQ(bp_gguf_weights_bytes(w), kTensors * kRow * kRows * 4);
  const long anon_loaded = gguf_test::status_kib("RssAnon");
  EXPECT_LT(anon_loaded - anon0, kBudgetKib) << "loading copied the weights";

  // Read every element through the host pointers: the pages come in as
  // file pages, anonymous memory stays where it was.
  double sum = 0;
  for (int k = 0; k < kTensors; ++k) {
    const bp_tensor *t = bp_test::find_tensor(ctx, ("big." + std::to_string(k)).c_str());
    ASSERT_NE(t, nullptr);
    const float *p = static_cast<const float *>(t->data);
    for (uint64_t i = 0; i < kRow * kRows; i += 4096 / 4) sum += p[i];  // one element per page
    for (uint64_t i : {uint64_t{0}, uint64_t{12345}, kRow * kRows - 1}) {
      float x = 0;
      ASSERT_EQ(bp_tensor_get(t, &x, i * 4, 4), BP_OK);
      EXPECT_EQ(x, value(k, i)) << t->name << "[" << i << "]";
    }
  }
  EXPECT_GT(sum, 0);
  const long anon_read = gguf_test::status_kib("RssAnon"), file_read = gguf_test::status_kib("RssFile");
  EXPECT_LT(anon_read - anon0, kBudgetKib) << "reading the weights made anonymous copies";
  EXPECT_GT(file_read - file0, 100 * 1024) << "the weights were not read from the file's pages";
  std::printf("file 300 MiB: RssAnon +%ld KiB after load, +%ld KiB after reading every page; RssFile +%ld KiB\n",
              anon_loaded - anon0, anon_read - anon0, file_read - file0);
  bp_gguf_weights_free(w);
  bp_context_free(ctx);
  bp_gguf_close(g);
  bp_backend_free(be);
}

// The copied path on cpu streams through a bounded bounce buffer and gives
// the same bytes (a small file: its destination is anonymous memory anyway).
TEST(GgufLargeFile, CopiedLoadStreamsInChunks) {
  bp_backend *be = gguf_test::backend("cpu");
  ASSERT_NE(be, nullptr) << bp_last_error();
  gguf_test::scratch file("chunks.gguf");
  gguf_test::bytes f = gguf_test::header(1, 0);
  gguf_test::tensor_info(f, "x", {1000, 3}, 0, 0);
  f.pad_to(32);
  for (int i = 0; i < 3000; ++i) f.put<float>(static_cast<float>(i));
  ASSERT_TRUE(gguf_test::write_file(file.path, f.b));
  bp_gguf *g = nullptr;
  ASSERT_EQ(bp_gguf_open(file.path.c_str(), &g), BP_OK);
  bp_context *ctx = bp_context_new(0);
  bp_gguf_load_options opt{};
  opt.struct_size = sizeof opt;
  opt.mode = BP_GGUF_LOAD_COPY;
  opt.chunk_bytes = 1000;  // 12 chunks, the last one short
  bp_gguf_weights *w = nullptr;
  ASSERT_EQ(bp_gguf_load(g, ctx, bp_backend_device(be), &opt, &w), BP_OK) << bp_last_error();
  EXPECT_FALSE(bp_gguf_weights_mapped(w));
  std::vector<float> back(3000);
  ASSERT_EQ(bp_tensor_get(bp_test::find_tensor(ctx, "x"), back.data(), 0, 12000), BP_OK);
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(back[i], static_cast<float>(i));
  bp_gguf_weights_free(w);
  bp_context_free(ctx);
  bp_gguf_close(g);
  bp_backend_free(be);
}
