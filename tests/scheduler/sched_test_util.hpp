// sched_test_util.hpp: a small MLP graph, built twice (once for the
// scheduler, once as a plain cpu-only reference), and the plumbing to load
// plugins and create backend lists for the scheduler tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "backplane/backplane.h"

namespace sched_test {

inline std::string cpu_plugin() { return std::string(BP_TEST_PLUGIN_DIR) + "/libbp-cpu.so"; }
inline std::string partial_plugin() { return std::string(BP_TEST_FIXTURE_DIR) + "/partial/libbp-partial.so"; }

inline bool file_exists(const std::string &p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

// Normalised mean squared error of |got| against |want| (0 when equal).
inline double nmse(const std::vector<float> &got, const std::vector<float> &want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double d = (double)got[i] - (double)want[i];
    err += d * d;
    ref += (double)want[i] * want[i];
  }
  return ref > 0 ? err / ref : err;
}

inline std::vector<float> read_f32(const bp_tensor *t) {
  std::vector<float> v((size_t)bp_tensor_nelements(t));
  EXPECT_EQ(bp_tensor_get(t, v.data(), 0, v.size() * sizeof(float)), BP_OK) << bp_last_error();
  return v;
}

inline void write_f32(bp_tensor *t, const std::vector<float> &v) {
  ASSERT_EQ(bp_tensor_set(t, v.data(), 0, v.size() * sizeof(float)), BP_OK) << bp_last_error();
}

inline std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &f : v) f = u(rng);
  return v;
}

// A two-layer MLP: weights in |wctx|, activations in |ctx|.
//   h = gelu?(W1 x + b1)  ->  rms_norm  ->  y = W2 h + b2  ->  soft_max(y * 0.5) -> out
// With |gelu_mid| an op the partial fixture cannot run sits between the
// layers, so a partial;cpu run splits four times.
struct mlp {
  int64_t d = 33, h = 65, n = 7;
  bp_tensor *x = nullptr, *w1 = nullptr, *b1 = nullptr, *w2 = nullptr, *b2 = nullptr;
  bp_tensor *mm1 = nullptr, *mm2 = nullptr, *out = nullptr;
  bp_graph *graph = nullptr;

  void build(bp_context *wctx, bp_context *ctx, bool gelu_mid) {
    x = bp_tensor_set_name(bp_tensor_set_flags(bp_tensor_new_2d(ctx, BP_TYPE_F32, d, n), BP_TENSOR_FLAG_INPUT), "x");
    w1 = bp_tensor_set_name(bp_tensor_new_2d(wctx, BP_TYPE_F32, d, h), "w1");
    b1 = bp_tensor_set_name(bp_tensor_new_1d(wctx, BP_TYPE_F32, h), "b1");
    w2 = bp_tensor_set_name(bp_tensor_new_2d(wctx, BP_TYPE_F32, h, d), "w2");
    b2 = bp_tensor_set_name(bp_tensor_new_1d(wctx, BP_TYPE_F32, d), "b2");
    mm1 = bp_tensor_set_name(bp_mul_mat(ctx, w1, x), "mm1");
    bp_tensor *t = bp_tensor_set_name(bp_add(ctx, mm1, b1), "add1");
    if (gelu_mid) t = bp_tensor_set_name(bp_gelu(ctx, t), "gelu");
    t = bp_tensor_set_name(bp_silu(ctx, t), "silu");
    t = bp_tensor_set_name(bp_rms_norm(ctx, t, 1e-5f), "norm");
    mm2 = bp_tensor_set_name(bp_mul_mat(ctx, w2, t), "mm2");
    t = bp_tensor_set_name(bp_add(ctx, mm2, b2), "add2");
    t = bp_tensor_set_name(bp_scale(ctx, t, 0.5f), "scale");
    out = bp_tensor_set_name(bp_soft_max(ctx, t, nullptr, 1.0f), "out");
    ASSERT_NE(out, nullptr) << bp_last_error();
    graph = bp_graph_new(ctx, 0);
    ASSERT_EQ(bp_graph_build(graph, out), BP_OK) << bp_last_error();
  }
  void fill_weights() {
    unsigned seed = 100;
    for (bp_tensor *t : {w1, b1, w2, b2}) write_f32(t, random_values((size_t)bp_tensor_nelements(t), seed++));
  }
  std::vector<float> input(unsigned seed) const { return random_values((size_t)(d * n), seed); }
};

// The cpu-only reference: every tensor in its own memory, one backend.
class reference {
 public:
  explicit reference(bp_backend *cpu, bool gelu_mid) : cpu_(cpu) {
    wctx_ = bp_context_new(0);
    ctx_ = bp_context_new(0);
    m_.build(wctx_, ctx_, gelu_mid);
    EXPECT_EQ(bp_context_alloc_tensors(wctx_, cpu_, &wbuf_), BP_OK) << bp_last_error();
    EXPECT_EQ(bp_context_alloc_tensors(ctx_, cpu_, &buf_), BP_OK) << bp_last_error();
    m_.fill_weights();
  }
  ~reference() {
    bp_graph_free(m_.graph);
    bp_buffer_free(buf_);
    bp_buffer_free(wbuf_);
    bp_context_free(ctx_);
    bp_context_free(wctx_);
  }
  std::vector<float> run(unsigned input_seed) {
    write_f32(m_.x, m_.input(input_seed));
    EXPECT_EQ(bp_backend_graph_compute(cpu_, m_.graph), BP_OK) << bp_last_error();
    return read_f32(m_.out);
  }
  const mlp &graph() const { return m_; }

 private:
  bp_backend *cpu_;
  bp_context *wctx_ = nullptr, *ctx_ = nullptr;
  bp_buffer *wbuf_ = nullptr, *buf_ = nullptr;
  mlp m_;
};

// Loads the plugins and creates the backends of |list| for one test.
class SchedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_clear_error();
    if (!file_exists(cpu_plugin())) GTEST_SKIP() << "missing " << cpu_plugin();
    ASSERT_EQ(bp_registry_load(cpu_plugin().c_str(), nullptr), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_backend_new("cpu", &cpu_ref), BP_OK) << bp_last_error();
    wctx = bp_context_new(0);
    ctx = bp_context_new(0);
  }
  void TearDown() override {
    bp_sched_free(sched);
    bp_graph_free(m.graph);
    for (bp_buffer *b : buffers) bp_buffer_free(b);
    bp_context_free(ctx);
    bp_context_free(wctx);
    for (bp_backend *be : backends) bp_backend_free(be);
    bp_backend_free(cpu_ref);
  }
  // Skips the test (naming the file) when the partial fixture is not built.
  bool need_partial() {
    if (!file_exists(partial_plugin())) return false;
    EXPECT_EQ(bp_registry_load(partial_plugin().c_str(), nullptr), BP_OK) << bp_last_error();
    return true;
  }
  void make_backends(const char *list) {
    bp_backend *out[8] = {};
    size_t n = 0;
    ASSERT_EQ(bp_backend_new_list(list, out, 8, &n), BP_OK) << bp_last_error();
    backends.assign(out, out + n);
  }
  void make_sched(bool parallel = false, size_t graph_size = 0) {
    sched = bp_sched_new(backends.data(), nullptr, (int)backends.size(), graph_size, parallel);
    ASSERT_NE(sched, nullptr) << bp_last_error();
  }
  // Builds the MLP with its weights in one buffer of |weights_on|, marked as
  // weights when |mark_weights|.
  void build_mlp(bp_backend *weights_on, bool gelu_mid, bool mark_weights = true) {
    m.build(wctx, ctx, gelu_mid);
    bp_buffer *wbuf = nullptr;
    ASSERT_EQ(bp_context_alloc_tensors(wctx, weights_on, &wbuf), BP_OK) << bp_last_error();
    buffers.push_back(wbuf);
    if (mark_weights) bp_buffer_set_usage(wbuf, BP_BUFFER_USAGE_WEIGHTS);
    m.fill_weights();
  }
  // One run through the scheduler with input |seed|.
  std::vector<float> run(unsigned seed) {
    if (!bp_sched_split_count(sched) || !m.x->data) {
      EXPECT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
    }
    write_f32(m.x, m.input(seed));
    EXPECT_EQ(bp_sched_graph_compute(sched, m.graph), BP_OK) << bp_last_error();
    return read_f32(m.out);
  }
  bp_backend *backend_of(const bp_tensor *t) { return bp_sched_get_tensor_backend(sched, t); }
  int backend_index(const bp_backend *be) {
    for (size_t i = 0; i < backends.size(); ++i)
      if (backends[i] == be) return (int)i;
    return -1;
  }

  bp_backend *cpu_ref = nullptr;
  std::vector<bp_backend *> backends;
  bp_sched *sched = nullptr;
  bp_context *wctx = nullptr, *ctx = nullptr;
  std::vector<bp_buffer *> buffers;
  mlp m;
};

}  // namespace sched_test
