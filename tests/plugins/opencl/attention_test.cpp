// attention_test.cpp: the opencl backend's split ATTENTION (attention=split;
// GPUs pick it for a decode step over a long cache; ops_attention.cpp):
// runs of the keys in several work-groups per query row, merged by a second
// launch. Against a double-precision reference: runs whose keys are all
// masked (their maximum is -inf: they must add nothing), runs past the last
// key (empty), a row with every key masked (zeros), GQA (4 query heads on 2
// key heads) and value rows wider than one work-group (two channels per
// work-item). The debug log shows the split ran.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "opencl_harness.hpp"

namespace bp_opencl_test {
namespace {

struct split_case {
  int D, Dv, N;
};

class OpenclSplitAttention : public ::testing::TestWithParam<split_case> {
 protected:
  void SetUp() override {
    specs = device_specs();
    if (specs.empty()) GTEST_SKIP() << "no OpenCL device on this machine";
  }
  std::vector<std::string> specs;
};

// 700 keys: 11 runs of one 64-key block; 1100 keys: 16 runs of two blocks,
// the last 7 past the keys.
TEST_P(OpenclSplitAttention, MaskedAndEmptyRunsAndFullyMaskedRowsMatchDoubleReference) {
  const split_case c = GetParam();
  const int T = 2, H = 4, Hk = 2;
  const float scale = 0.125f;
  log_lines log;
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new((specs[0] + ",attention=split,cache_dir=" + test_cache_dir()).c_str(), &be), BP_OK)
      << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *q = bp_tensor_new_3d(ctx, BP_TYPE_F32, c.D, T, H);
  bp_tensor *k = bp_tensor_new_3d(ctx, BP_TYPE_F32, c.D, c.N, Hk);
  bp_tensor *v = bp_tensor_new_3d(ctx, BP_TYPE_F32, c.Dv, c.N, Hk);
  bp_tensor *mask = bp_tensor_new_2d(ctx, BP_TYPE_F32, c.N, T);
  bp_tensor *att = bp_attention(ctx, q, k, v, mask, scale);
  ASSERT_NE(att, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, att), BP_OK) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  const auto vq = random_values(size_t(c.D) * T * H, 71), vk = random_values(size_t(c.D) * c.N * Hk, 72),
             vv = random_values(size_t(c.Dv) * c.N * Hk, 73);
  // Row 0 masks its first 400 keys (whole runs without a key), row 1 all.
  std::vector<float> vm(size_t(c.N) * T, 0.0f);
  for (int j = 0; j < c.N; ++j) {
    if (j < 400) vm[j] = -INFINITY;
    vm[c.N + j] = -INFINITY;
  }
  ASSERT_EQ(bp_tensor_set(q, vq.data(), 0, vq.size() * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(k, vk.data(), 0, vk.size() * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(v, vv.data(), 0, vv.size() * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(mask, vm.data(), 0, vm.size() * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(be, g), BP_OK) << bp_last_error();
  std::vector<float> got(size_t(c.Dv) * H * T);  // [Dv, H, T]
  ASSERT_EQ(bp_tensor_get(att, got.data(), 0, got.size() * 4), BP_OK);
  EXPECT_TRUE(log.has("split ATTENTION")) << "the split kernels did not run";
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int hk = h / (H / Hk);
      std::vector<double> s(c.N);
      double mx = -INFINITY;
      for (int j = 0; j < c.N; ++j) {
        double dot = 0;
        for (int i = 0; i < c.D; ++i)
          dot += double(vq[(size_t(h) * T + t) * c.D + i]) * vk[(size_t(hk) * c.N + j) * c.D + i];
        s[j] = scale * dot + vm[size_t(t) * c.N + j];
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      std::vector<double> out(c.Dv, 0.0);
      for (int j = 0; j < c.N; ++j) {
        if (std::isinf(s[j])) continue;
        const double p = std::exp(s[j] - mx);
        sum += p;
        for (int ch = 0; ch < c.Dv; ++ch) out[ch] += p * vv[(size_t(hk) * c.N + j) * c.Dv + ch];
      }
      for (int ch = 0; ch < c.Dv; ++ch) {
        const double ref = sum > 0 ? out[ch] / sum : 0.0;
        ASSERT_NEAR(got[(size_t(t) * H + h) * c.Dv + ch], ref, 1e-5) << "t " << t << " h " << h << " channel " << ch;
      }
    }
  bp_graph_free(g);
  bp_buffer_free(buf);
  bp_context_free(ctx);
  bp_backend_free(be);
}

INSTANTIATE_TEST_SUITE_P(Shapes, OpenclSplitAttention,
                         ::testing::Values(split_case{64, 64, 700}, split_case{40, 72, 1100}),
                         [](const ::testing::TestParamInfo<split_case> &i) {
                           return "D" + std::to_string(i.param.D) + "_Dv" + std::to_string(i.param.Dv) + "_N" +
                                  std::to_string(i.param.N);
                         });

}  // namespace
}  // namespace bp_opencl_test
