// types_test.cpp: GGUF's tensor type ids against Backplane's types, on files
// written byte by byte (gguf_bytes.hpp): Q5_K (id 13) and BF16 (id 30)
// load as BP_TYPE_Q5_K and BP_TYPE_BF16 with their bytes unchanged and
// decode on cpu to llama.cpp's golden values; every type Backplane cannot
// hold (Q8_K, Q8_1, the IQ1/IQ2/IQ3 types, I8, F64, ...) is listed as unsupported
// and refused by bp_gguf_load with UNIMPLEMENTED naming the tensor and type.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/gguf.h"
#include "gguf/gguf_bytes.hpp"
#include "gguf/gguf_test_util.hpp"
#include "support/find.hpp"

namespace {

std::vector<uint8_t> golden(const std::string &name) {
  std::ifstream f(std::string(BP_TEST_SOURCE_DIR) + "/data/quant/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// A file of one tensor per entry, data at offsets aligned to 32 (the
// format's default alignment).
struct file_tensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  std::vector<uint8_t> data;
};

std::vector<uint8_t> gguf_of(const std::vector<file_tensor> &ts) {
  gguf_test::bytes f = gguf_test::header(ts.size(), 0);
  uint64_t at = 0;
  std::vector<uint64_t> offsets;
  for (const file_tensor &t : ts) {
    offsets.push_back(at);
    gguf_test::tensor_info(f, t.name, t.ne, t.type, at);
    at += (t.data.size() + 31) / 32 * 32;
  }
  f.pad_to(32);
  for (const file_tensor &t : ts) f.raw(t.data.data(), t.data.size()).pad_to(32);
  return f.b;
}

struct gguf_owner {
  bp_gguf *f = nullptr;
  ~gguf_owner() { bp_gguf_close(f); }
};

// Rows of |table| through GET_ROWS on |be|, as floats.
std::vector<float> rows_on(bp_backend *be, bp_tensor *table) {
  bp_context *ctx = bp_context_new(0);
  bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, table->ne[1]);
  bp_tensor *src = bp_tensor_new_2d(ctx, table->type, table->ne[0], table->ne[1]);
  bp_tensor *rows = bp_get_rows(ctx, src, ids);
  EXPECT_NE(rows, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  EXPECT_EQ(bp_graph_build(g, rows), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  EXPECT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<uint8_t> bytes(bp_tensor_nbytes(table));
  EXPECT_EQ(bp_tensor_get(table, bytes.data(), 0, bytes.size()), BP_OK);
  EXPECT_EQ(bp_tensor_set(src, bytes.data(), 0, bytes.size()), BP_OK);
  std::vector<int32_t> iv(static_cast<size_t>(table->ne[1]));
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>(i);
  EXPECT_EQ(bp_tensor_set(ids, iv.data(), 0, iv.size() * 4), BP_OK);
  EXPECT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> out(static_cast<size_t>(bp_tensor_nelements(rows)));
  EXPECT_EQ(bp_tensor_get(rows, out.data(), 0, out.size() * 4), BP_OK);
  bp_buffer_free(buf);
  bp_graph_free(g);
  bp_context_free(ctx);
  return out;
}

// The "Q5_K_M" mix and unquantized (BF16) downloads: both types load as
// Backplane's own, bytes as they are, and decode to llama.cpp's values.
TEST(GgufTypes, Q5KAndBf16LoadAsBackplaneTypes) {
  const std::vector<uint8_t> q5 = golden("q5_K.quant"), bf = golden("bf16.quant");
  const std::vector<uint8_t> q5_deq = golden("q5_K.dequant.f32"), bf_deq = golden("bf16.dequant.f32");
  ASSERT_EQ(q5.size(), 16u * 176) << "tests/data/quant/q5_K.quant is missing";
  ASSERT_EQ(bf.size(), 4096u * 2) << "tests/data/quant/bf16.quant is missing";
  // 4 rows of 1024 values each (4 super-blocks), 64 rows of 64 values.
  const std::vector<uint8_t> file =
      gguf_of({{"blk.0.ffn_down.weight", {1024, 4}, 13, q5}, {"token_embd.weight", {64, 64}, 30, bf}});
  gguf_owner g;
  ASSERT_EQ(bp_gguf_open_memory(file.data(), file.size(), &g.f), BP_OK) << bp_last_error();
  bp_gguf_tensor_info ti{};
  ti.struct_size = sizeof ti;
  const bp_type want[2] = {BP_TYPE_Q5_K, BP_TYPE_BF16};
  const char *want_names[2] = {"q5_k", "bf16"};
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(bp_gguf_tensor_describe(g.f, i, &ti), BP_OK) << bp_last_error();
    EXPECT_TRUE(ti.supported) << ti.name;
    EXPECT_EQ(ti.type, want[i]);
    EXPECT_STREQ(ti.type_name, want_names[i]);
  }
  EXPECT_EQ(bp_gguf_file_type_of(BP_TYPE_Q5_K), 13u);
  EXPECT_EQ(bp_gguf_file_type_of(BP_TYPE_BF16), 30u);

  bp_backend *be = gguf_test::backend("cpu");
  ASSERT_NE(be, nullptr) << bp_last_error();
  for (bp_gguf_load_mode mode : {BP_GGUF_LOAD_COPY, BP_GGUF_LOAD_AUTO}) {
    SCOPED_TRACE(mode == BP_GGUF_LOAD_COPY ? "copied" : "auto");
    bp_context *ctx = bp_context_new(0);
    bp_gguf_load_options opt{};
    opt.struct_size = sizeof opt;
    opt.mode = mode;
    bp_gguf_weights *w = nullptr;
    ASSERT_EQ(bp_gguf_load(g.f, ctx, bp_backend_device(be), &opt, &w), BP_OK) << bp_last_error();
    bp_tensor *tq = bp_test::find_tensor(ctx, "blk.0.ffn_down.weight"),
              *tb = bp_test::find_tensor(ctx, "token_embd.weight");
    ASSERT_TRUE(tq && tb);
    EXPECT_EQ(tq->type, BP_TYPE_Q5_K);
    EXPECT_EQ(tq->nb[1], 4u * 176);
    EXPECT_EQ(tb->type, BP_TYPE_BF16);
    EXPECT_EQ(tb->nb[1], 128u);
    std::vector<uint8_t> back(q5.size());
    ASSERT_EQ(bp_tensor_get(tq, back.data(), 0, back.size()), BP_OK);
    EXPECT_EQ(back, q5);
    back.resize(bf.size());
    ASSERT_EQ(bp_tensor_get(tb, back.data(), 0, back.size()), BP_OK);
    EXPECT_EQ(back, bf);
    // The cpu backend decodes them to the golden floats, bit for bit.
    const std::vector<float> rq = rows_on(be, tq), rb = rows_on(be, tb);
    ASSERT_EQ(rq.size() * 4, q5_deq.size());
    EXPECT_EQ(std::memcmp(rq.data(), q5_deq.data(), q5_deq.size()), 0);
    ASSERT_EQ(rb.size() * 4, bf_deq.size());
    EXPECT_EQ(std::memcmp(rb.data(), bf_deq.data(), bf_deq.size()), 0);
    bp_gguf_weights_free(w);
    bp_context_free(ctx);
  }
  bp_backend_free(be);
}

// Types of the format Backplane has no bp_type for: listed, never loaded.
TEST(GgufTypes, TypesBackplaneCannotHoldAreUnimplemented) {
  struct other {
    uint32_t id;
    const char *name;
    size_t bytes_per_256;
  };
  const other others[] = {
      {9, "q8_1", 8 * 36}, {15, "q8_k", 292}, {16, "iq2_xxs", 66},  {17, "iq2_xs", 74},
      {18, "iq3_xxs", 98}, {19, "iq1_s", 50}, {21, "iq3_s", 110},   {22, "iq2_s", 82},
      {29, "iq1_m", 56},   {24, "i8", 256},   {28, "f64", 256 * 8},
  };
  bp_backend *be = gguf_test::backend("cpu");
  ASSERT_NE(be, nullptr) << bp_last_error();
  for (const other &o : others) {
    SCOPED_TRACE(o.name);
    const std::vector<uint8_t> file =
        gguf_of({{"output_norm.weight", {256}, 0, std::vector<uint8_t>(1024)},
                 {"blk.7.attn_q.weight", {256, 2}, o.id, std::vector<uint8_t>(2 * o.bytes_per_256)}});
    gguf_owner g;
    ASSERT_EQ(bp_gguf_open_memory(file.data(), file.size(), &g.f), BP_OK) << bp_last_error();
    bp_gguf_tensor_info ti{};
    ti.struct_size = sizeof ti;
    ASSERT_EQ(bp_gguf_tensor_describe(g.f, 1, &ti), BP_OK) << bp_last_error();
    EXPECT_FALSE(ti.supported);
    EXPECT_STREQ(ti.type_name, o.name);
    EXPECT_EQ(ti.nbytes, 2 * o.bytes_per_256);
    bp_context *ctx = bp_context_new(0);
    bp_gguf_weights *w = nullptr;
    EXPECT_EQ(bp_gguf_load(g.f, ctx, bp_backend_device(be), nullptr, &w), BP_ERR_UNIMPLEMENTED);
    const std::string err = bp_last_error();
    EXPECT_NE(err.find("'blk.7.attn_q.weight'"), std::string::npos) << err;
    EXPECT_NE(err.find(std::string("type ") + o.name + " (id " + std::to_string(o.id) + ")"), std::string::npos) << err;
    EXPECT_EQ(w, nullptr);
    EXPECT_EQ(bp_context_tensor_count(ctx), 0u);  // nothing made, not even the f32 tensor before it
    bp_context_free(ctx);
  }
  bp_backend_free(be);
}

}  // namespace
