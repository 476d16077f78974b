// devices_test.cpp: loading onto the Vulkan and OpenCL devices (copied into
// their buffers in chunks), and the tensors used there: a MUL_MAT on the
// device with the loaded weight gives the product a double-precision loop
// computes from the file's values. Skipped where the plugin has no device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"
#include "gguf_test_util.hpp"
#include "support/find.hpp"

namespace {

constexpr int64_t K = 64, M = 48, N = 5;

float wval(int64_t m, int64_t k) { return static_cast<float>((m * 7 + k * 3) % 17 - 8) * 0.125f; }

void load_on(const char *spec, bool host_device) {
  bp_backend *be = gguf_test::backend(spec);
  if (be == nullptr) GTEST_SKIP() << spec << ": no device here (" << bp_last_error() << ")";
  gguf_test::scratch file(std::string("dev_") + spec + ".gguf");
  gguf_test::bytes f = gguf_test::header(2, 0);
  gguf_test::tensor_info(f, "w", {K, M}, 0, 0);
  gguf_test::tensor_info(f, "w16", {K, M}, 1, static_cast<uint64_t>(K * M * 4));
  f.pad_to(32);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) f.put<float>(wval(m, k));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) f.put<uint16_t>(bp_fp32_to_fp16(wval(m, k)));  // exact in f16
  ASSERT_TRUE(gguf_test::write_file(file.path, f.b));

  bp_gguf *g = nullptr;
  ASSERT_EQ(bp_gguf_open(file.path.c_str(), &g), BP_OK) << bp_last_error();
  bp_context *wctx = bp_context_new(0);
  bp_gguf_load_options opt{};
  opt.struct_size = sizeof opt;
  opt.chunk_bytes = 4096;
  bp_gguf_weights *w = nullptr;
  ASSERT_EQ(bp_gguf_load(g, wctx, bp_backend_device(be), &opt, &w), BP_OK) << bp_last_error();
  // A device with its own memory gets copies; cpu computes on the file's pages.
  EXPECT_EQ(bp_gguf_weights_mapped(w), host_device) << spec;
  EXPECT_EQ(bp_buffer_is_host(bp_gguf_weights_buffer(w, 0)), host_device) << spec;

  for (const char *name : {"w", "w16"}) {
    bp_context *ctx = bp_context_new(0);
    bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N);
    bp_tensor *y = bp_mul_mat(ctx, bp_test::find_tensor(wctx, name), x);
    bp_graph *graph = bp_graph_new(ctx, 0);
    ASSERT_EQ(bp_graph_build(graph, y), BP_OK) << bp_last_error();
    bp_buffer *buf = nullptr;
    ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
    std::vector<float> xv(K * N);
    for (int64_t i = 0; i < K * N; ++i) xv[i] = static_cast<float>(i % 11 - 5) * 0.25f;
    ASSERT_EQ(bp_tensor_set(x, xv.data(), 0, xv.size() * 4), BP_OK);
    ASSERT_EQ(bp_backend_graph_compute(be, graph), BP_OK) << bp_last_error();
    std::vector<float> yv(M * N);
    ASSERT_EQ(bp_tensor_get(y, yv.data(), 0, yv.size() * 4), BP_OK);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) want += static_cast<double>(wval(m, k)) * xv[n * K + k];
        ASSERT_NEAR(yv[n * M + m], want, 1e-3 + 1e-4 * std::fabs(want)) << spec << " " << name << " " << m << "," << n;
      }
    bp_buffer_free(buf);
    bp_graph_free(graph);
    bp_context_free(ctx);
  }
  bp_gguf_weights_free(w);
  bp_context_free(wctx);
  bp_gguf_close(g);
  bp_backend_free(be);
}

}  // namespace

TEST(GgufDevices, LoadsOntoVulkan) { load_on("vulkan", false); }
TEST(GgufDevices, LoadsOntoOpenCL) { load_on("opencl", false); }
TEST(GgufDevices, LoadsOntoCpuMappedAndComputes) { load_on("cpu", true); }

// Into the cpu device's weight buffer type (bp_device_weight_buffer_type):
// copied in odd chunks, stored repacked, bp_tensor_get gives the file's
// bytes, and MUL_MAT on the loaded Q4_0 weight (2 groups and 2 rows past
// them) gives the product of the file's values. MAP with a buffer type is
// refused; a caller built before the field (smaller struct_size) maps.
TEST(GgufDevices, LoadsIntoTheCpuWeightBufferType) {
  bp_backend *be = gguf_test::backend("cpu");
  ASSERT_NE(be, nullptr) << bp_last_error();
  bp_buffer_type *wbt = bp_device_weight_buffer_type(bp_backend_device(be));
  ASSERT_NE(wbt, nullptr) << bp_last_error();
  EXPECT_FALSE(bp_buffer_type_is_host(wbt));

  constexpr int64_t QM = 10;
  std::vector<float> wf(K * QM);
  for (int64_t m = 0; m < QM; ++m)
    for (int64_t k = 0; k < K; ++k) wf[m * K + k] = wval(m, k);
  std::vector<uint8_t> q(bp_type_row_size(BP_TYPE_Q4_0, K) * QM);
  ASSERT_EQ(bp_quantize_rows(BP_TYPE_Q4_0, wf.data(), q.data(), QM, K, nullptr), BP_OK);
  gguf_test::scratch file("dev_cpu_weights.gguf");
  gguf_test::bytes f = gguf_test::header(1, 0);
  gguf_test::tensor_info(f, "wq", {K, QM}, 2, 0);  // GGML type 2: Q4_0
  f.pad_to(32);
  for (uint8_t v : q) f.put<uint8_t>(v);
  ASSERT_TRUE(gguf_test::write_file(file.path, f.b));
  bp_gguf *g = nullptr;
  ASSERT_EQ(bp_gguf_open(file.path.c_str(), &g), BP_OK) << bp_last_error();

  bp_context *wctx = bp_context_new(0);
  bp_gguf_load_options opt{};
  opt.struct_size = sizeof opt;
  opt.mode = BP_GGUF_LOAD_MAP;
  opt.buffer_type = wbt;
  bp_gguf_weights *w = nullptr;
  EXPECT_EQ(bp_gguf_load(g, wctx, bp_backend_device(be), &opt, &w), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("BP_GGUF_LOAD_MAP"), std::string::npos) << bp_last_error();

  // Another device's buffer type is refused, naming it (lavapipe on CI).
  if (bp_backend *other = gguf_test::backend("vulkan")) {
    opt.mode = BP_GGUF_LOAD_AUTO;
    opt.buffer_type = bp_device_buffer_type(bp_backend_device(other));
    EXPECT_EQ(bp_gguf_load(g, wctx, bp_backend_device(be), &opt, &w), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(bp_last_error()).find("not a buffer type of this device"), std::string::npos)
        << bp_last_error();
    EXPECT_EQ(bp_context_tensor_count(wctx), 0u);  // nothing made
    bp_backend_free(other);
    opt.buffer_type = wbt;
  }

  opt.mode = BP_GGUF_LOAD_AUTO;
  opt.chunk_bytes = 100;  // pieces that split the groups
  ASSERT_EQ(bp_gguf_load(g, wctx, bp_backend_device(be), &opt, &w), BP_OK) << bp_last_error();
  EXPECT_FALSE(bp_gguf_weights_mapped(w));
  EXPECT_EQ(bp_buffer_buffer_type(bp_gguf_weights_buffer(w, 0)), wbt);
  bp_tensor *wq = bp_test::find_tensor(wctx, "wq");
  std::vector<uint8_t> back(q.size());
  ASSERT_EQ(bp_tensor_get(wq, back.data(), 0, back.size()), BP_OK) << bp_last_error();
  EXPECT_EQ(back, q);

  bp_context *ctx = bp_context_new(0);
  bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N);
  bp_tensor *y = bp_mul_mat(ctx, wq, x);
  bp_graph *graph = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(graph, y), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> xv(K * N);
  for (int64_t i = 0; i < K * N; ++i) xv[i] = static_cast<float>(i % 11 - 5) * 0.25f;
  ASSERT_EQ(bp_tensor_set(x, xv.data(), 0, xv.size() * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(be, graph), BP_OK) << bp_last_error();
  std::vector<float> yv(QM * N), deq(K * QM);
  ASSERT_EQ(bp_tensor_get(y, yv.data(), 0, yv.size() * 4), BP_OK);
  ASSERT_EQ(bp_dequantize(BP_TYPE_Q4_0, q.data(), deq.data(), K * QM), BP_OK);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < QM; ++m) {
      double want = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        want += static_cast<double>(deq[m * K + k]) * xv[n * K + k];
        mag += std::fabs(static_cast<double>(deq[m * K + k]) * xv[n * K + k]);
      }
      // b goes through int8 per block of 32: within 1% of the magnitude.
      ASSERT_NEAR(yv[n * QM + m], want, 1e-2 * mag + 1e-6) << m << "," << n;
    }
  bp_buffer_free(buf);
  bp_graph_free(graph);
  bp_context_free(ctx);
  bp_gguf_weights_free(w);
  bp_context_free(wctx);

  // An older caller's options end before buffer_type: mapped as before.
  bp_context *old_ctx = bp_context_new(0);
  opt.struct_size = offsetof(bp_gguf_load_options, buffer_type);
  ASSERT_EQ(bp_gguf_load(g, old_ctx, bp_backend_device(be), &opt, &w), BP_OK) << bp_last_error();
  EXPECT_TRUE(bp_gguf_weights_mapped(w));
  bp_gguf_weights_free(w);
  bp_context_free(old_ctx);
  bp_gguf_close(g);
  bp_backend_free(be);
}
