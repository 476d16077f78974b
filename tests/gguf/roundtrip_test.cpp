// roundtrip_test.cpp: the writer's files, read back by the reader: every
// metadata kind, single and in arrays, every tensor type Backplane holds,
// tensor types it does not hold (shown, their loading refused), and the
// exact bytes of a small file stated by hand from the format description.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"
#include "gguf_test_util.hpp"
#include "support/find.hpp"

namespace {

std::vector<uint8_t> read_all(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct writer_owner {
  bp_gguf_writer *w = nullptr;
  writer_owner() { EXPECT_EQ(bp_gguf_writer_new(&w), BP_OK); }
  ~writer_owner() { bp_gguf_writer_free(w); }
};

struct file_owner {
  bp_gguf *f = nullptr;
  ~file_owner() { bp_gguf_close(f); }
};

size_t key(const bp_gguf *f, const char *k) {
  size_t i = SIZE_MAX;
  EXPECT_EQ(bp_gguf_find_key(f, k, &i), BP_OK) << k << ": " << bp_last_error();
  return i;
}

}  // namespace

TEST(GgufRoundTrip, EveryMetadataKind) {
  gguf_test::scratch file("kinds.gguf");
  writer_owner w;
  const uint8_t u8 = 250;
  const int8_t i8 = -120;
  const uint16_t u16 = 65000;
  const int16_t i16 = -32000;
  const uint32_t u32 = 4000000000u;
  const int32_t i32 = -2000000000;
  const float f32 = 1.5f;
  const uint8_t yes = 1;
  const uint64_t u64 = UINT64_MAX - 5;
  const int64_t i64 = INT64_MIN + 7;
  const double f64 = -2.25e300;
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.u8", BP_GGUF_U8, &u8), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.i8", BP_GGUF_I8, &i8), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.u16", BP_GGUF_U16, &u16), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.i16", BP_GGUF_I16, &i16), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.u32", BP_GGUF_U32, &u32), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.i32", BP_GGUF_I32, &i32), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.f32", BP_GGUF_F32, &f32), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.bool", BP_GGUF_BOOL, &yes), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.u64", BP_GGUF_U64, &u64), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.i64", BP_GGUF_I64, &i64), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "t.f64", BP_GGUF_F64, &f64), BP_OK);
  const std::string text("h\xc3\xa9llo\0x", 8);  // any bytes, a NUL included
  ASSERT_EQ(bp_gguf_writer_add_string(w.w, "t.string", text.data(), text.size()), BP_OK);
  const uint8_t a_u8[] = {1, 2, 255};
  const int8_t a_i8[] = {-1, 0, 1};
  const uint16_t a_u16[] = {7, 65535};
  const int16_t a_i16[] = {-7, 32767};
  const uint32_t a_u32[] = {1, 2, 3, 4};
  const int32_t a_i32[] = {-5, 5};
  const float a_f32[] = {0.5f, -0.25f};
  const uint8_t a_bool[] = {1, 0, 1};
  const uint64_t a_u64[] = {UINT64_MAX};
  const int64_t a_i64[] = {INT64_MIN, INT64_MAX};
  const double a_f64[] = {3.0, -1e-300};
  const char *a_str[] = {"alpha", "", "\xe2\x82\xac"};
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.u8", BP_GGUF_U8, a_u8, 3), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.i8", BP_GGUF_I8, a_i8, 3), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.u16", BP_GGUF_U16, a_u16, 2), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.i16", BP_GGUF_I16, a_i16, 2), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.u32", BP_GGUF_U32, a_u32, 4), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.i32", BP_GGUF_I32, a_i32, 2), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.f32", BP_GGUF_F32, a_f32, 2), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.bool", BP_GGUF_BOOL, a_bool, 3), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.u64", BP_GGUF_U64, a_u64, 1), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.i64", BP_GGUF_I64, a_i64, 2), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.f64", BP_GGUF_F64, a_f64, 2), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.string", BP_GGUF_STRING, a_str, 3), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_array(w.w, "a.empty", BP_GGUF_F32, nullptr, 0), BP_OK);
  // Refusals: a duplicate key, a nested array, a bool of 2.
  EXPECT_EQ(bp_gguf_writer_add_value(w.w, "t.u8", BP_GGUF_U8, &u8), BP_ERR_ALREADY_EXISTS);
  EXPECT_EQ(bp_gguf_writer_add_array(w.w, "a.nested", BP_GGUF_ARRAY, a_u8, 1), BP_ERR_INVALID_ARGUMENT);
  const uint8_t two = 2;
  EXPECT_EQ(bp_gguf_writer_add_value(w.w, "t.bad", BP_GGUF_BOOL, &two), BP_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(bp_gguf_writer_write(w.w, file.path.c_str()), BP_OK) << bp_last_error();

  file_owner g;
  ASSERT_EQ(bp_gguf_open(file.path.c_str(), &g.f), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_gguf_version(g.f), 3u);
  EXPECT_EQ(bp_gguf_alignment(g.f), 32u);
  EXPECT_EQ(bp_gguf_kv_count(g.f), 25u);
  int64_t s = 0;
  uint64_t u = 0;
  double d = 0;
  ASSERT_EQ(bp_gguf_kv_read_uint(g.f, key(g.f, "t.u8"), 0, &u), BP_OK);
  EXPECT_EQ(u, 250u);
  ASSERT_EQ(bp_gguf_kv_read_int(g.f, key(g.f, "t.i8"), 0, &s), BP_OK);
  EXPECT_EQ(s, -120);
  ASSERT_EQ(bp_gguf_kv_read_uint(g.f, key(g.f, "t.u16"), 0, &u), BP_OK);
  EXPECT_EQ(u, 65000u);
  ASSERT_EQ(bp_gguf_kv_read_int(g.f, key(g.f, "t.i16"), 0, &s), BP_OK);
  EXPECT_EQ(s, -32000);
  ASSERT_EQ(bp_gguf_kv_read_uint(g.f, key(g.f, "t.u32"), 0, &u), BP_OK);
  EXPECT_EQ(u, 4000000000u);
  ASSERT_EQ(bp_gguf_kv_read_int(g.f, key(g.f, "t.i32"), 0, &s), BP_OK);
  EXPECT_EQ(s, -2000000000);
  ASSERT_EQ(bp_gguf_kv_read_float(g.f, key(g.f, "t.f32"), 0, &d), BP_OK);
  EXPECT_EQ(d, 1.5);
  ASSERT_EQ(bp_gguf_kv_read_int(g.f, key(g.f, "t.bool"), 0, &s), BP_OK);
  EXPECT_EQ(s, 1);
  ASSERT_EQ(bp_gguf_kv_read_uint(g.f, key(g.f, "t.u64"), 0, &u), BP_OK);
  EXPECT_EQ(u, UINT64_MAX - 5);
  EXPECT_EQ(bp_gguf_kv_read_int(g.f, key(g.f, "t.u64"), 0, &s), BP_ERR_INVALID_ARGUMENT);  // above INT64_MAX
  ASSERT_EQ(bp_gguf_kv_read_int(g.f, key(g.f, "t.i64"), 0, &s), BP_OK);
  EXPECT_EQ(s, INT64_MIN + 7);
  EXPECT_EQ(bp_gguf_kv_read_uint(g.f, key(g.f, "t.i64"), 0, &u), BP_ERR_INVALID_ARGUMENT);  // negative
  ASSERT_EQ(bp_gguf_kv_read_float(g.f, key(g.f, "t.f64"), 0, &d), BP_OK);
  EXPECT_EQ(d, -2.25e300);
  const char *p = nullptr;
  uint64_t len = 0;
  ASSERT_EQ(bp_gguf_kv_read_string(g.f, key(g.f, "t.string"), 0, &p, &len), BP_OK);
  EXPECT_EQ(std::string(p, len), text);
  EXPECT_EQ(bp_gguf_kv_read_string(g.f, key(g.f, "t.u8"), 0, &p, &len), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("t.u8"), std::string::npos);

  bp_gguf_value_info vi{};
  vi.struct_size = sizeof vi;
  ASSERT_EQ(bp_gguf_kv_describe(g.f, key(g.f, "a.string"), &vi), BP_OK);
  EXPECT_EQ(vi.kind, BP_GGUF_ARRAY);
  EXPECT_EQ(vi.elem_kind, BP_GGUF_STRING);
  EXPECT_EQ(vi.count, 3u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(bp_gguf_kv_read_string(g.f, key(g.f, "a.string"), i, &p, &len), BP_OK);
    EXPECT_EQ(std::string(p, len), a_str[i]);
  }
  EXPECT_EQ(bp_gguf_kv_read_string(g.f, key(g.f, "a.string"), 3, &p, &len), BP_ERR_INVALID_ARGUMENT);
  auto ints = [&](const char *k, std::vector<int64_t> want) {
    for (size_t i = 0; i < want.size(); ++i) {
      int64_t v = 0;
      ASSERT_EQ(bp_gguf_kv_read_int(g.f, key(g.f, k), i, &v), BP_OK) << k << bp_last_error();
      EXPECT_EQ(v, want[i]) << k << "[" << i << "]";
    }
  };
  ints("a.u8", {1, 2, 255});
  ints("a.i8", {-1, 0, 1});
  ints("a.u16", {7, 65535});
  ints("a.i16", {-7, 32767});
  ints("a.u32", {1, 2, 3, 4});
  ints("a.i32", {-5, 5});
  ints("a.bool", {1, 0, 1});
  ints("a.i64", {INT64_MIN, INT64_MAX});
  ASSERT_EQ(bp_gguf_kv_read_uint(g.f, key(g.f, "a.u64"), 0, &u), BP_OK);
  EXPECT_EQ(u, UINT64_MAX);
  ASSERT_EQ(bp_gguf_kv_read_float(g.f, key(g.f, "a.f32"), 1, &d), BP_OK);
  EXPECT_EQ(d, -0.25);
  ASSERT_EQ(bp_gguf_kv_read_float(g.f, key(g.f, "a.f64"), 1, &d), BP_OK);
  EXPECT_EQ(d, -1e-300);
  ASSERT_EQ(bp_gguf_kv_describe(g.f, key(g.f, "a.empty"), &vi), BP_OK);
  EXPECT_EQ(vi.count, 0u);
  EXPECT_EQ(bp_gguf_kv_read_float(g.f, key(g.f, "a.empty"), 0, &d), BP_ERR_INVALID_ARGUMENT);
}

// The bytes of a small file, stated from the format description: the
// writer must produce exactly these.
TEST(GgufRoundTrip, WriterBytesFollowTheFormat) {
  gguf_test::scratch file("exact.gguf");
  writer_owner w;
  ASSERT_EQ(bp_gguf_writer_set_alignment(w.w, 64), BP_OK);
  const int32_t n = -3;
  ASSERT_EQ(bp_gguf_writer_add_value(w.w, "x.n", BP_GGUF_I32, &n), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_string(w.w, "x.s", "ab", 2), BP_OK);
  const float data[3] = {1.0f, 2.0f, 3.0f};
  const int64_t ne[1] = {3};
  ASSERT_EQ(bp_gguf_writer_add_tensor_data(w.w, "w", 0, 1, ne, data, sizeof data), BP_OK);
  const int32_t ids[2] = {7, 8};
  const int64_t ne2[2] = {1, 2};
  ASSERT_EQ(bp_gguf_writer_add_tensor_data(w.w, "ids", 26, 2, ne2, ids, sizeof ids), BP_OK);
  ASSERT_EQ(bp_gguf_writer_write(w.w, file.path.c_str()), BP_OK) << bp_last_error();

  gguf_test::bytes want = gguf_test::header(2, 3);
  want.str("general.alignment").put<uint32_t>(4).put<uint32_t>(64);
  want.str("x.n").put<uint32_t>(5).put<int32_t>(-3);
  want.str("x.s").put<uint32_t>(8).str("ab");
  gguf_test::tensor_info(want, "w", {3}, 0, 0);
  gguf_test::tensor_info(want, "ids", {1, 2}, 26, 64);  // w's 12 bytes padded to 64
  want.pad_to(64);
  want.raw(data, sizeof data).zeros(64 - sizeof data).raw(ids, sizeof ids);
  EXPECT_EQ(read_all(file.path), want.b);
}

// Tensors of every type Backplane holds, loaded on cpu mapped and copied.
TEST(GgufRoundTrip, TensorsOfEverySupportedTypeLoad) {
  bp_backend *be = gguf_test::backend("cpu");
  ASSERT_NE(be, nullptr) << bp_last_error();
  bp_context *src = bp_context_new(0);
  std::vector<bp_tensor *> made;
  for (int ti = 0; ti < BP_TYPE_COUNT; ++ti) {
    const bp_type type = static_cast<bp_type>(ti);
    bp_tensor *t = bp_tensor_new_3d(src, type, 256, 3, 2);  // 256: whole blocks of every type
    bp_tensor_set_name(t, (std::string("t.") + bp_type_name(type)).c_str());
    made.push_back(t);
  }
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(src, be, &buf), BP_OK);
  std::vector<std::vector<uint8_t>> contents;
  for (bp_tensor *t : made) {
    std::vector<uint8_t> bytes(bp_tensor_nbytes(t));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + t->type * 7 + 1);
    if (t->type == BP_TYPE_F16) {  // finite halves only
      for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0x3b;
    }
    ASSERT_EQ(bp_tensor_set(t, bytes.data(), 0, bytes.size()), BP_OK);
    contents.push_back(bytes);
  }
  gguf_test::scratch file("types.gguf");
  {
    writer_owner w;
    for (bp_tensor *t : made) ASSERT_EQ(bp_gguf_writer_add_tensor(w.w, t), BP_OK) << bp_last_error();
    // Types Backplane does not hold: i8 (and later q8_k) written as raw bytes.
    std::vector<int8_t> i8(16, -3);
    const int64_t ne[1] = {16};
    ASSERT_EQ(bp_gguf_writer_add_tensor_data(w.w, "other.i8", 24, 1, ne, i8.data(), i8.size()), BP_OK);
    std::vector<uint8_t> q8k(292, 1);
    const int64_t ne2[1] = {256};
    ASSERT_EQ(bp_gguf_writer_add_tensor_data(w.w, "other.q8_k", 15, 1, ne2, q8k.data(), q8k.size()), BP_OK);
    ASSERT_EQ(bp_gguf_writer_write(w.w, file.path.c_str()), BP_OK) << bp_last_error();
  }
  file_owner g;
  ASSERT_EQ(bp_gguf_open(file.path.c_str(), &g.f), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_gguf_tensor_count(g.f), made.size() + 2);
  bp_gguf_tensor_info ti{};
  ti.struct_size = sizeof ti;
  // Each Backplane type under the format's id for it.
  const uint32_t ids[] = {0, 1, 26, 8, 2, 6, 12, 14, 13, 30, 3, 7, 10, 11, 20, 23, 39};
  static_assert(sizeof ids / sizeof ids[0] == BP_TYPE_COUNT, "a type without its GGUF id here");
  for (size_t i = 0; i < made.size(); ++i) {
    ASSERT_EQ(bp_gguf_tensor_describe(g.f, i, &ti), BP_OK);
    EXPECT_EQ(ti.file_type, ids[made[i]->type]) << made[i]->name;
    EXPECT_EQ(bp_gguf_file_type_of(made[i]->type), ids[made[i]->type]);
    EXPECT_TRUE(ti.supported);
    EXPECT_EQ(ti.type, made[i]->type);
    EXPECT_EQ(ti.nbytes, bp_tensor_nbytes(made[i]));
  }
  ASSERT_EQ(bp_gguf_tensor_describe(g.f, made.size(), &ti), BP_OK);
  EXPECT_STREQ(ti.name, "other.i8");
  EXPECT_STREQ(ti.type_name, "i8");
  EXPECT_FALSE(ti.supported);
  ASSERT_EQ(bp_gguf_tensor_describe(g.f, made.size() + 1, &ti), BP_OK);
  EXPECT_STREQ(ti.type_name, "q8_k");
  EXPECT_EQ(ti.nbytes, 292u);

  // Loading everything is refused, naming the tensor; leaving them out works.
  bp_device *dev = bp_backend_device(be);
  {
    bp_context *ctx = bp_context_new(0);
    bp_gguf_weights *w = nullptr;
    EXPECT_EQ(bp_gguf_load(g.f, ctx, dev, nullptr, &w), BP_ERR_UNIMPLEMENTED);
    EXPECT_NE(std::string(bp_last_error()).find("other.i8"), std::string::npos) << bp_last_error();
    EXPECT_EQ(w, nullptr);
    EXPECT_EQ(bp_context_tensor_count(ctx), 0u);  // nothing made
    bp_context_free(ctx);
  }
  for (bp_gguf_load_mode mode : {BP_GGUF_LOAD_MAP, BP_GGUF_LOAD_COPY, BP_GGUF_LOAD_AUTO}) {
    SCOPED_TRACE(mode);
    bp_context *ctx = bp_context_new(0);
    bp_gguf_load_options opt{};
    opt.struct_size = sizeof opt;
    opt.mode = mode;
    opt.name_filter = "t.*";
    opt.chunk_bytes = 100;  // many chunks per tensor
    bp_gguf_weights *w = nullptr;
    ASSERT_EQ(bp_gguf_load(g.f, ctx, dev, &opt, &w), BP_OK) << bp_last_error();
    EXPECT_EQ(bp_gguf_weights_mapped(w), mode != BP_GGUF_LOAD_COPY);
    EXPECT_EQ(bp_gguf_weights_tensor_count(w), made.size());
    ASSERT_EQ(bp_context_tensor_count(ctx), made.size());
    for (size_t i = 0; i < made.size(); ++i) {
      bp_tensor *t = bp_test::find_tensor(ctx, made[i]->name);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->type, made[i]->type);
      EXPECT_TRUE(bp_tensor_same_shape(t, made[i]));
      EXPECT_TRUE(t->flags & BP_TENSOR_FLAG_PARAM);
      std::vector<uint8_t> back(bp_tensor_nbytes(t));
      ASSERT_EQ(bp_tensor_get(t, back.data(), 0, back.size()), BP_OK);
      EXPECT_EQ(back, contents[i]) << t->name;
    }
    // Loading again into the same context is refused: the names exist.
    bp_gguf_weights *again = nullptr;
    EXPECT_EQ(bp_gguf_load(g.f, ctx, dev, &opt, &again), BP_ERR_ALREADY_EXISTS);
    bp_gguf_weights_free(w);
    bp_context_free(ctx);
  }
  // Closing the file first: mapped weights keep the pages.
  {
    bp_gguf *f2 = nullptr;
    ASSERT_EQ(bp_gguf_open(file.path.c_str(), &f2), BP_OK);
    bp_context *ctx = bp_context_new(0);
    bp_gguf_load_options opt{};
    opt.struct_size = sizeof opt;
    opt.name_filter = "t.f32";
    bp_gguf_weights *w = nullptr;
    ASSERT_EQ(bp_gguf_load(f2, ctx, dev, &opt, &w), BP_OK) << bp_last_error();
    bp_gguf_close(f2);
    std::vector<uint8_t> back(contents[0].size());
    ASSERT_EQ(bp_tensor_get(bp_test::find_tensor(ctx, "t.f32"), back.data(), 0, back.size()), BP_OK);
    EXPECT_EQ(back, contents[0]);
    bp_gguf_weights_free(w);
    bp_context_free(ctx);
  }
  bp_buffer_free(buf);
  bp_context_free(src);
  bp_backend_free(be);
}

TEST(GgufRoundTrip, WriterRefusesWhatTheFormatCannotHold) {
  writer_owner w;
  EXPECT_EQ(bp_gguf_writer_set_alignment(w.w, 12), BP_ERR_INVALID_ARGUMENT);
  const float x[30] = {};
  const int64_t ne[1] = {30};
  EXPECT_EQ(bp_gguf_writer_add_tensor_data(w.w, "q", 8, 1, ne, x, 34), BP_ERR_INVALID_ARGUMENT);  // q8_0: 32s
  EXPECT_NE(std::string(bp_last_error()).find("ne[0]"), std::string::npos);
  EXPECT_EQ(bp_gguf_writer_add_tensor_data(w.w, "f", 0, 1, ne, x, 100), BP_ERR_INVALID_ARGUMENT);  // wrong size
  EXPECT_EQ(bp_gguf_writer_add_tensor_data(w.w, std::string(64, 'n').c_str(), 0, 1, ne, x, 120),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_gguf_writer_add_string(w.w, "bad\xff", "x", 1), BP_ERR_INVALID_ARGUMENT);
  const uint32_t a = 64;
  EXPECT_EQ(bp_gguf_writer_add_value(w.w, "general.alignment", BP_GGUF_U32, &a), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_gguf_writer_add_string(w.w, "general.alignment", "64", 2), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_gguf_writer_write(w.w, "/nonexistent-dir/x.gguf"), BP_ERR_INVALID_ARGUMENT);
}
