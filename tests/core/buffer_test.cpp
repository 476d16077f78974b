// buffer_test.cpp: buffer types, buffers, tensor data access, the linear
// allocator and bp_context_alloc_tensors, against the real cpu plugin (and the
// non-host "partial" fixture where host memory would hide a bug).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "objects_test_util.hpp"
#include "sanitizers/sanitizers.hpp"

namespace bp_objects_test {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

using BufferTest = CpuObjectsTest;

TEST_F(BufferTest, DeviceBufferTypeDescribesHostMemory) {
  bp_buffer_type *buft = bp_device_buffer_type(dev);
  ASSERT_NE(buft, nullptr) << bp_last_error();
  EXPECT_STREQ(bp_buffer_type_name(buft), "CPU");
  const size_t align = bp_buffer_type_alignment(buft);
  EXPECT_GT(align, 0u);
  EXPECT_EQ(align & (align - 1), 0u) << "alignment must be a power of two";
  EXPECT_TRUE(bp_buffer_type_is_host(buft));
  EXPECT_EQ(bp_buffer_type_max_size(buft), SIZE_MAX);
  EXPECT_EQ(bp_buffer_type_device(buft), dev);
  // The backend's type is the device's wrapped one, not a second wrapper.
  EXPECT_EQ(bp_backend_buffer_type(backend), buft);
  EXPECT_EQ(bp_backend_alignment(backend), align);
  bp_tensor *t = bp_tensor_new_2d(ctx, BP_TYPE_F16, 7, 3);
  EXPECT_EQ(bp_buffer_type_alloc_size(buft, t), 7u * 3u * 2u);
}

TEST_F(BufferTest, AllocatedBufferReportsItsProperties) {
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_buffer_type_alloc(bp_device_buffer_type(dev), 1000, &buf), BP_OK) << bp_last_error();
  buffers.push_back(buf);
  EXPECT_EQ(bp_buffer_size(buf), 1000u);
  EXPECT_NE(bp_buffer_base(buf), nullptr);
  EXPECT_EQ(bp_buffer_buffer_type(buf), bp_device_buffer_type(dev));
  EXPECT_TRUE(bp_buffer_is_host(buf));
  EXPECT_EQ(bp_buffer_get_usage(buf), BP_BUFFER_USAGE_ANY);
  bp_buffer_set_usage(buf, BP_BUFFER_USAGE_WEIGHTS);
  EXPECT_EQ(bp_buffer_get_usage(buf), BP_BUFFER_USAGE_WEIGHTS);
  ASSERT_EQ(bp_buffer_clear(buf, 0xab), BP_OK) << bp_last_error();
  const auto *bytes = static_cast<const uint8_t *>(bp_buffer_base(buf));
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(bytes[i], 0xab) << i;
  // Zero-sized buffers are allowed.
  bp_buffer *empty = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(backend, 0, &empty), BP_OK) << bp_last_error();
  buffers.push_back(empty);
  EXPECT_EQ(bp_buffer_size(empty), 0u);
}

TEST_F(BufferTest, SetGetRoundTripOverOddSizes) {
  for (int64_t n : {1, 7, 33, 257}) {
    bp_tensor *t = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, n, 3), "x");
    ASSERT_NE(t, nullptr);
  }
  ASSERT_NE(alloc_all(), nullptr);
  for (size_t i = 0; i < bp_context_tensor_count(ctx); ++i) {
    bp_tensor *t = bp_context_tensor(ctx, i);
    const size_t n = (size_t)bp_tensor_nelements(t);
    const std::vector<float> in = random_floats(n, 17u + (uint32_t)i);
    ASSERT_EQ(bp_tensor_set(t, in.data(), 0, n * sizeof(float)), BP_OK) << bp_last_error();
    std::vector<float> out(n, -1.0f);
    ASSERT_EQ(bp_tensor_get(t, out.data(), 0, n * sizeof(float)), BP_OK) << bp_last_error();
    EXPECT_EQ(out, in) << "n = " << n;
    // A byte range in the middle: only those bytes change.
    if (n >= 4) {
      const float two[2] = {100.0f, 200.0f};
      ASSERT_EQ(bp_tensor_set(t, two, sizeof(float), sizeof two), BP_OK) << bp_last_error();
      ASSERT_EQ(bp_tensor_get(t, out.data(), 0, n * sizeof(float)), BP_OK);
      EXPECT_EQ(out[0], in[0]);
      EXPECT_EQ(out[1], 100.0f);
      EXPECT_EQ(out[2], 200.0f);
      EXPECT_EQ(out[3], in[3]);
      float back[2] = {};
      ASSERT_EQ(bp_tensor_get(t, back, sizeof(float), sizeof back), BP_OK);
      EXPECT_EQ(back[0], 100.0f);
      EXPECT_EQ(back[1], 200.0f);
    }
  }
}

TEST_F(BufferTest, RangeErrorsNameTheTensorAndTheSizes) {
  bp_tensor *t = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 7), "weights");
  ASSERT_NE(alloc_all(), nullptr);
  std::vector<float> data(16, 1.0f);
  EXPECT_STATUS(bp_tensor_set(t, data.data(), 0, 29), BP_ERR_INVALID_ARGUMENT, "bp_tensor_set", "'weights'", "28 bytes",
                "29");
  EXPECT_STATUS(bp_tensor_get(t, data.data(), 4, 25), BP_ERR_INVALID_ARGUMENT, "bp_tensor_get", "'weights'",
                "28 bytes");
  EXPECT_STATUS(bp_tensor_memset(t, 0, 28, 1), BP_ERR_INVALID_ARGUMENT, "bp_tensor_memset", "28 bytes");
  // offset + size wraps around: still refused.
  EXPECT_STATUS(bp_tensor_set(t, data.data(), SIZE_MAX, 2), BP_ERR_INVALID_ARGUMENT, "'weights'");
  EXPECT_STATUS(bp_tensor_set(t, nullptr, 0, 4), BP_ERR_INVALID_ARGUMENT, "data is NULL");
  EXPECT_STATUS(bp_tensor_set(nullptr, data.data(), 0, 4), BP_ERR_INVALID_ARGUMENT, "NULL");
  // The exact end is fine, and so is an empty range.
  EXPECT_STATUS(bp_tensor_set(t, data.data(), 0, 28), BP_OK);
  EXPECT_STATUS(bp_tensor_get(t, data.data(), 28, 0), BP_OK);
}

TEST_F(BufferTest, TensorWithoutMemorySaysHowToAllocate) {
  bp_tensor *t = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 4), "lonely");
  float x[4] = {};
  EXPECT_STATUS(bp_tensor_set(t, x, 0, sizeof x), BP_ERR_FAILED_PRECONDITION, "tensor 'lonely'", "has no memory",
                "bp_context_alloc_tensors");
  EXPECT_STATUS(bp_tensor_get(t, x, 0, sizeof x), BP_ERR_FAILED_PRECONDITION, "has no memory");
  EXPECT_STATUS(bp_tensor_memset(t, 0, 0, 4), BP_ERR_FAILED_PRECONDITION, "has no memory");
}

TEST_F(BufferTest, MemsetFillsOnlyTheRange) {
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_I32, 33);
  ASSERT_NE(alloc_all(), nullptr);
  std::vector<uint8_t> bytes(33 * 4, 0);
  ASSERT_EQ(bp_tensor_set(t, bytes.data(), 0, bytes.size()), BP_OK);
  ASSERT_EQ(bp_tensor_memset(t, 0x5a, 5, 70), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(t, bytes.data(), 0, bytes.size()), BP_OK);
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_EQ(bytes[i], (i >= 5 && i < 75) ? 0x5a : 0) << "byte " << i;
  }
}

TEST_F(BufferTest, CopyAcrossBuffersAndIntoWrappedHostMemory) {
  bp_context *other = bp_context_new(0);
  bp_tensor *src = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, 33, 7), "src");
  bp_tensor *dst = named(bp_tensor_new_2d(other, BP_TYPE_F32, 33, 7), "dst");
  ASSERT_NE(alloc_all(), nullptr);
  ASSERT_NE(alloc_all(other), nullptr);
  ASSERT_NE(src->buffer, dst->buffer);
  const std::vector<float> in = random_floats(33 * 7, 5);
  ASSERT_EQ(bp_tensor_set(src, in.data(), 0, in.size() * 4), BP_OK);
  ASSERT_EQ(bp_tensor_copy(src, dst), BP_OK) << bp_last_error();
  std::vector<float> out(in.size());
  ASSERT_EQ(bp_tensor_get(dst, out.data(), 0, out.size() * 4), BP_OK);
  EXPECT_EQ(out, in);

  // A buffer over caller memory: the copy lands in the caller's vector.
  std::vector<float> host(33 * 7 + 16, 0.0f);
  bp_buffer *wrapped = nullptr;
  ASSERT_EQ(bp_device_buffer_from_host_ptr(dev, host.data(), host.size() * 4, &wrapped), BP_OK) << bp_last_error();
  buffers.push_back(wrapped);
  EXPECT_TRUE(bp_buffer_is_host(wrapped));
  bp_tensor *view_dst = bp_tensor_new_2d(other, BP_TYPE_F32, 33, 7);
  ASSERT_EQ(bp_buffer_place_tensor(wrapped, view_dst, 0), BP_OK) << bp_last_error();
  EXPECT_EQ(view_dst->data, host.data());
  ASSERT_EQ(bp_tensor_copy(src, view_dst), BP_OK) << bp_last_error();
  EXPECT_TRUE(std::equal(in.begin(), in.end(), host.begin()));

  // Contiguous tensors of one type and byte size copy even with other shapes.
  bp_tensor *flat = bp_tensor_new_1d(other, BP_TYPE_F32, 33 * 7);
  ASSERT_NE(alloc_all(other), nullptr);
  ASSERT_EQ(bp_tensor_copy(src, flat), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(flat, out.data(), 0, out.size() * 4), BP_OK);
  EXPECT_EQ(out, in);

  // Type or size mismatches, and layouts that a byte copy would scramble.
  bp_tensor *half = named(bp_tensor_new_2d(other, BP_TYPE_F16, 66, 7), "half");
  bp_tensor *small = named(bp_tensor_new_2d(other, BP_TYPE_F32, 32, 7), "small");
  bp_tensor *square = bp_tensor_new_2d(other, BP_TYPE_F32, 7, 7);
  ASSERT_NE(alloc_all(other), nullptr);
  EXPECT_STATUS(bp_tensor_copy(src, half), BP_ERR_INVALID_ARGUMENT, "'src'", "'half'", "type or size");
  EXPECT_STATUS(bp_tensor_copy(src, small), BP_ERR_INVALID_ARGUMENT, "'small'", "924 bytes", "896 bytes");
  bp_tensor *sq2 = bp_tensor_new_2d(other, BP_TYPE_F32, 7, 7);
  ASSERT_NE(alloc_all(other), nullptr);
  EXPECT_STATUS(bp_tensor_copy(bp_transpose(other, square), sq2), BP_ERR_INVALID_ARGUMENT, "different layouts");
  bp_context_free(other);
}

TEST_F(BufferTest, PlaceTensorChecksAlignmentAndFit) {
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(backend, 256, &buf), BP_OK);
  buffers.push_back(buf);
  const size_t align = bp_backend_alignment(backend);
  ASSERT_GE(align, 2u);
  bp_tensor *t = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 8), "t");
  EXPECT_STATUS(bp_buffer_place_tensor(buf, t, 3), BP_ERR_INVALID_ARGUMENT, "offset 3", "'t'", "alignment",
                std::to_string(align).c_str());
  EXPECT_EQ(t->buffer, nullptr);
  bp_tensor *big = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 65), "big");
  EXPECT_STATUS(bp_buffer_place_tensor(buf, big, 0), BP_ERR_INVALID_ARGUMENT, "'big'", "260 bytes", "256-byte");
  EXPECT_STATUS(bp_buffer_place_tensor(buf, t, 256), BP_ERR_INVALID_ARGUMENT, "32 bytes at offset 256");
  ASSERT_EQ(bp_buffer_place_tensor(buf, t, align), BP_OK) << bp_last_error();
  EXPECT_EQ(t->buffer, buf);
  EXPECT_EQ(t->data, static_cast<char *>(bp_buffer_base(buf)) + align);
  EXPECT_NE(t->buffer_ctx, nullptr);
  // A view placed anywhere takes its memory from its source.
  bp_tensor *v = bp_view_1d(ctx, t, 4, 16);
  v->buffer = nullptr;
  v->data = nullptr;
  ASSERT_EQ(bp_buffer_place_tensor(buf, v, 0), BP_OK) << bp_last_error();
  EXPECT_EQ(v->data, static_cast<char *>(t->data) + 16);
  EXPECT_EQ(v->buffer, buf);
  // A view of a tensor without memory cannot be placed.
  bp_tensor *u = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 8), "unplaced");
  EXPECT_STATUS(bp_buffer_place_tensor(buf, bp_view_1d(ctx, u, 2, 0), 0), BP_ERR_FAILED_PRECONDITION, "'unplaced'",
                "allocate the source first");
}

TEST_F(BufferTest, LinearAllocatorPadsAndReportsOverflow) {
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(backend, 192, &buf), BP_OK);
  buffers.push_back(buf);
  bp_tallocr talloc = bp_tallocr_new(buf);
  EXPECT_EQ(talloc.buffer, buf);
  EXPECT_EQ(talloc.offset, 0u);
  const size_t align = bp_backend_alignment(backend);
  EXPECT_EQ(talloc.alignment, align);
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 7);  // 28 bytes, padded
  bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 16);
  ASSERT_EQ(bp_tallocr_alloc(&talloc, a), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tallocr_alloc(&talloc, b), BP_OK) << bp_last_error();
  EXPECT_EQ(a->data, bp_buffer_base(buf));
  EXPECT_EQ(static_cast<char *>(b->data) - static_cast<char *>(a->data), (ptrdiff_t)align);
  bp_tensor *c = named(bp_tensor_new_1d(ctx, BP_TYPE_F32, 40), "too_big");  // 160 bytes
  const size_t left = 192 - talloc.offset;
  EXPECT_STATUS(bp_tallocr_alloc(&talloc, c), BP_ERR_OUT_OF_DEVICE_MEMORY, "'too_big'", "160 bytes", "192-byte",
                (std::to_string(left) + " left").c_str());
  EXPECT_EQ(c->buffer, nullptr);
  bp_tallocr broken = bp_tallocr_new(nullptr);
  EXPECT_STATUS(bp_tallocr_alloc(&broken, c), BP_ERR_INVALID_ARGUMENT, "NULL");
}

TEST_F(BufferTest, AllocCtxTensorsPlacesEveryTensorAndItsViews) {
  bp_tensor *w = named(bp_tensor_new_2d(ctx, BP_TYPE_F32, 8, 4), "w");
  bp_tensor *h = bp_tensor_new_1d(ctx, BP_TYPE_F16, 33);
  bp_tensor *row = bp_view_1d(ctx, w, 8, 2 * 8 * sizeof(float));  // row 2
  bp_tensor *wt = bp_transpose(ctx, w);
  bp_tensor *flat = bp_reshape_2d(ctx, w, 32, 1);
  ASSERT_TRUE(row && wt && flat) << bp_last_error();
  bp_buffer *buf = alloc_all();
  ASSERT_NE(buf, nullptr);
  const size_t align = bp_backend_alignment(backend);
  EXPECT_EQ(bp_buffer_size(buf), ((128 + align - 1) / align + (66 + align - 1) / align) * align);
  EXPECT_EQ(w->buffer, buf);
  EXPECT_EQ(h->buffer, buf);
  EXPECT_EQ(row->data, static_cast<char *>(w->data) + 64);
  EXPECT_EQ(wt->data, w->data);
  EXPECT_EQ(flat->buffer, buf);

  // Writes through the source are visible through the views.
  const std::vector<float> in = random_floats(32, 9);
  ASSERT_EQ(bp_tensor_set(w, in.data(), 0, 128), BP_OK);
  float r[8];
  ASSERT_EQ(bp_tensor_get(row, r, 0, sizeof r), BP_OK) << bp_last_error();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(r[i], in[16 + i]);
  // A non-contiguous view reads the raw bytes of its span.
  std::vector<float> span(bp_tensor_nbytes(wt) / 4);
  ASSERT_EQ(bp_tensor_get(wt, span.data(), 0, bp_tensor_nbytes(wt)), BP_OK) << bp_last_error();
  EXPECT_TRUE(std::equal(span.begin(), span.end(), in.begin()));

  // Nothing left to allocate: OK and no buffer. A new view of an allocated
  // tensor gets its memory on the next call.
  bp_tensor *late = bp_view_1d(ctx, w, 4, 0);
  late->buffer = nullptr;
  late->data = nullptr;
  bp_buffer *none = reinterpret_cast<bp_buffer *>(&none);
  ASSERT_EQ(bp_context_alloc_tensors(ctx, backend, &none), BP_OK) << bp_last_error();
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(late->data, w->data);
}

TEST_F(BufferTest, AllocCtxTensorsRefusesWhatCannotFitOneBuffer) {
  // Eight tensors of 2^61 bytes: the total does not even fit in size_t.
  for (int i = 0; i < 8; ++i) ASSERT_NE(bp_tensor_new_2d(ctx, BP_TYPE_F32, 1ll << 30, 1ll << 29), nullptr);
  bp_buffer *buf = nullptr;
  EXPECT_STATUS(bp_context_alloc_tensors(ctx, backend, &buf), BP_ERR_RESOURCE_EXHAUSTED, "8 tensors", "overflows",
                "several contexts");
  EXPECT_EQ(buf, nullptr);
#if !BP_TEST_ASAN  // ASan aborts on such a request by default
  // One such tensor: the plugin itself says it is out of memory, annotated.
  bp_context *one = bp_context_new(0);
  bp_tensor *huge = named(bp_tensor_new_2d(one, BP_TYPE_F32, 1ll << 30, 1ll << 29), "huge");
  EXPECT_STATUS(bp_context_alloc_tensors(one, backend, &buf), BP_ERR_OUT_OF_HOST_MEMORY, "cpu: allocating");
  EXPECT_EQ(buf, nullptr);
  EXPECT_EQ(huge->buffer, nullptr);
  EXPECT_EQ(huge->data, nullptr);
  bp_context_free(one);
#endif
}

TEST_F(BufferTest, BadHandlesAreRefusedWithAMessage) {
  EXPECT_EQ(bp_buffer_size(nullptr), 0u);
  EXPECT_NE(std::string(bp_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(bp_buffer_type_name(nullptr), nullptr);
  EXPECT_STATUS(bp_buffer_clear(nullptr, 0), BP_ERR_INVALID_ARGUMENT, "bp_buffer_clear", "buffer is NULL");
  bp_buffer *out = reinterpret_cast<bp_buffer *>(&out);
  EXPECT_STATUS(bp_buffer_type_alloc(nullptr, 16, &out), BP_ERR_INVALID_ARGUMENT, "buffer type is NULL");
  EXPECT_EQ(out, nullptr);
  EXPECT_STATUS(bp_buffer_type_alloc(bp_device_buffer_type(dev), 16, nullptr), BP_ERR_INVALID_ARGUMENT, "out_buffer");
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 4);
  EXPECT_STATUS(bp_buffer_place_tensor(nullptr, t, 0), BP_ERR_INVALID_ARGUMENT, "NULL");
  // A handle of another type.
  auto *not_a_buffer = reinterpret_cast<bp_buffer *>(backend);
  EXPECT_STATUS(bp_buffer_clear(not_a_buffer, 0), BP_ERR_INVALID_ARGUMENT, "is not a buffer", "a backend");
  EXPECT_STATUS(bp_context_alloc_tensors(ctx, reinterpret_cast<bp_backend *>(bp_device_buffer_type(dev)), &out),
                BP_ERR_INVALID_ARGUMENT, "is not a backend", "a buffer type");
  bp_buffer_free(nullptr);  // fine
}

TEST_F(BufferTest, FreedBufferIsDetectedInEveryBuild) {
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 4);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, backend, &buf), BP_OK);
  bp_buffer_free(buf);
  EXPECT_STATUS(bp_buffer_clear(buf, 0), BP_ERR_INVALID_ARGUMENT, "already freed");
  float x[4] = {};
  EXPECT_STATUS(bp_tensor_set(t, x, 0, sizeof x), BP_ERR_FAILED_PRECONDITION, "buffer that was freed");
  bp_buffer_free(buf);  // a double free is reported, not fatal
}

TEST_F(BufferTest, LiveBufferKeepsItsPluginLoaded) {
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(backend, 64, &buf), BP_OK);
  buffers.push_back(buf);
  bp_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(bp_device_describe(dev, &info), BP_OK) << bp_last_error();
  EXPECT_STATUS(bp_plugin_unload(info.plugin), BP_ERR_FAILED_PRECONDITION);
}

// Non-host memory (the "partial" fixture): data goes through the plugin,
// copies to and from host memory take one transfer, limits are enforced.
class PartialBufferTest : public CpuObjectsTest {
 protected:
  void SetUp() override {
    CpuObjectsTest::SetUp();
    if (!file_exists(partial_plugin_path())) GTEST_SKIP() << "fixture not built: " << partial_plugin_path();
    pdev = load_first_device(partial_plugin_path());
    ASSERT_NE(pdev, nullptr);
    pbuft = bp_device_buffer_type(pdev);
    ASSERT_NE(pbuft, nullptr) << bp_last_error();
  }
  bp_device *pdev = nullptr;
  bp_buffer_type *pbuft = nullptr;
};

TEST_F(PartialBufferTest, DeviceMemoryRoundTripsAndCopiesBothWays) {
  EXPECT_FALSE(bp_buffer_type_is_host(pbuft));
  bp_context *dctx = bp_context_new(0);
  bp_tensor *d = bp_tensor_new_2d(dctx, BP_TYPE_F32, 33, 7);
  bp_tensor *d2 = bp_tensor_new_2d(dctx, BP_TYPE_F32, 33, 7);
  bp_buffer *dbuf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors_from_buft(dctx, pbuft, &dbuf), BP_OK) << bp_last_error();
  buffers.push_back(dbuf);
  EXPECT_FALSE(bp_buffer_is_host(dbuf));
  bp_tensor *h = bp_tensor_new_2d(ctx, BP_TYPE_F32, 33, 7);
  ASSERT_NE(alloc_all(), nullptr);

  const std::vector<float> in = random_floats(33 * 7, 11);
  ASSERT_EQ(bp_tensor_set(d, in.data(), 0, in.size() * 4), BP_OK) << bp_last_error();
  std::vector<float> out(in.size());
  ASSERT_EQ(bp_tensor_get(d, out.data(), 0, out.size() * 4), BP_OK) << bp_last_error();
  EXPECT_EQ(out, in);
  ASSERT_EQ(bp_tensor_copy(d, h), BP_OK) << bp_last_error();  // device -> host
  ASSERT_EQ(bp_tensor_get(h, out.data(), 0, out.size() * 4), BP_OK);
  EXPECT_EQ(out, in);
  ASSERT_EQ(bp_tensor_memset(d2, 0, 0, bp_tensor_nbytes(d2)), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_copy(h, d2), BP_OK) << bp_last_error();  // host -> device
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_EQ(bp_tensor_get(d2, out.data(), 0, out.size() * 4), BP_OK);
  EXPECT_EQ(out, in);
  ASSERT_EQ(bp_tensor_memset(d2, 0, 0, bp_tensor_nbytes(d2)), BP_OK);
  ASSERT_EQ(bp_tensor_copy(d, d2), BP_OK) << bp_last_error();  // device -> device
  ASSERT_EQ(bp_tensor_get(d2, out.data(), 0, out.size() * 4), BP_OK);
  EXPECT_EQ(out, in);
  bp_context_free(dctx);
}

TEST_F(PartialBufferTest, MaxSizeIsEnforcedWithTheNumbers) {
  const size_t max = bp_buffer_type_max_size(pbuft);
  ASSERT_LT(max, SIZE_MAX);
  bp_buffer *buf = nullptr;
  EXPECT_STATUS(bp_buffer_type_alloc(pbuft, max + 1, &buf), BP_ERR_RESOURCE_EXHAUSTED, std::to_string(max + 1).c_str(),
                std::to_string(max).c_str());
  bp_context *dctx = bp_context_new(0);
  bp_tensor_set_name(bp_tensor_new_1d(dctx, BP_TYPE_F32, (int64_t)(max / 8)), "half_a");
  bp_tensor_set_name(bp_tensor_new_1d(dctx, BP_TYPE_F32, (int64_t)(max / 8)), "half_b");
  bp_tensor_set_name(bp_tensor_new_1d(dctx, BP_TYPE_F32, 64), "one_more");
  EXPECT_STATUS(bp_context_alloc_tensors_from_buft(dctx, pbuft, &buf), BP_ERR_RESOURCE_EXHAUSTED, "3 tensors",
                std::to_string(max).c_str(), "'half_a'");
  EXPECT_EQ(buf, nullptr);
  bp_context_free(dctx);
}

}  // namespace
}  // namespace bp_objects_test
