// model_forward_test.cpp: the model runtime's logits against a double-precision
// forward pass written independently in the test (tiny_model.cpp), for each
// architecture, weight type, batch split and KV cache type; and the errors a
// bad file or a full context give.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "backplane/model.h"
#include "backplane/trace.h"
#include "tiny_model.hpp"

namespace {

using bp::test::tiny_config;
using bp::test::tiny_weights;

struct loaded {
  bp_model *model = nullptr;
  bp_model_context *ctx = nullptr;
  ~loaded() {
    bp_model_context_free(ctx);
    bp_model_free(model);
  }
};

std::string make(const tiny_config &cfg, tiny_weights *w, const std::string &skip = "",
                 const std::vector<std::pair<std::string, std::string>> &extra = {}) {
  const std::string path = bp::test::temp_dir() + "/m.gguf";
  const std::string err = bp::test::write_tiny_model(cfg, path, w, skip, extra);
  EXPECT_EQ(err, "");
  return path;
}

// Context options: |n_ctx| positions, an f32 or f16 cache, |n_batch| tokens
// per prompt graph (0 = the default).
bp_model_context_options context_options(uint32_t n_ctx, bool kv_f32, uint32_t n_batch = 0) {
  bp_model_context_options opt{};
  opt.struct_size = sizeof opt;
  opt.n_ctx = n_ctx;
  opt.n_batch = n_batch;
  opt.kv_f32 = kv_f32;
  return opt;
}

std::vector<int32_t> prompt(int n, int n_vocab, uint32_t seed) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((seed * 2654435761u + i * 40503u) % n_vocab));
  return ids;
}

// Largest |a - b| over the rows, relative to the spread (rms) of the reference.
double rel_error(const float *got, const std::vector<double> &want, size_t n) {
  double ss = 0, worst = 0;
  for (size_t i = 0; i < n; ++i) ss += want[i] * want[i];
  const double rms = std::sqrt(ss / static_cast<double>(n));
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  return worst / rms;
}

// Evaluates |ids| as one prompt and checks every row of logits against the
// double-precision reference within |tol|.
void expect_prompt_matches(bp_model_context *ctx, const tiny_config &cfg, const tiny_weights &w,
                           const std::vector<int32_t> &ids, double tol, std::vector<double> *want_out = nullptr) {
  ASSERT_EQ(bp_model_context_eval(ctx, ids.data(), ids.size(), true), BP_OK) << bp_last_error();
  size_t rows = 0;
  const float *logits = bp_model_context_logits(ctx, &rows);
  ASSERT_NE(logits, nullptr);
  ASSERT_EQ(rows, ids.size());
  const auto want = bp::test::reference_logits(cfg, w, ids);
  EXPECT_LT(rel_error(logits, want, want.size()), tol);
  if (want_out) *want_out = want;
}

struct forward_case {
  std::string arch;
  bp_type type;
  bool kv_f32;
  double tol;
};

class ModelForward : public ::testing::TestWithParam<forward_case> {};

TEST_P(ModelForward, PromptLogitsMatchTheReference) {
  const forward_case &fc = GetParam();
  tiny_config cfg;
  cfg.arch = fc.arch;
  cfg.type = fc.type;
  if (bp_type_block_size(fc.type) == 256) {
    cfg.n_embd = 256;
    cfg.n_ff = 256;
    cfg.head_dim = 64;
  }
  tiny_weights w;
  const std::string path = make(cfg, &w);
  loaded m;
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &m.model), BP_OK) << bp_last_error();
  const bp_model_context_options opt = context_options(64, fc.kv_f32, 7);  // the 19-token prompt runs as 7 + 7 + 5
  ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
  const auto ids = prompt(19, cfg.n_vocab(), 7);
  std::vector<double> want;
  expect_prompt_matches(m.ctx, cfg, w, ids, fc.tol, &want);
  if (HasFatalFailure()) return;
  size_t rows = 0;

  // Decoding the same tokens one at a time after a rewind gives the same rows.
  ASSERT_EQ(bp_model_context_rewind(m.ctx, 0), BP_OK);
  for (size_t t = 0; t < ids.size(); ++t) {
    ASSERT_EQ(bp_model_context_eval(m.ctx, &ids[t], 1, false), BP_OK) << bp_last_error();
    const float *row = bp_model_context_logits(m.ctx, &rows);
    ASSERT_EQ(rows, 1u);
    std::vector<double> want_row(want.begin() + t * cfg.n_vocab(), want.begin() + (t + 1) * cfg.n_vocab());
    EXPECT_LT(rel_error(row, want_row, want_row.size()), fc.tol) << "position " << t;
  }
  EXPECT_EQ(bp_model_context_position(m.ctx), ids.size());
}

// Tolerances (largest logit error over the logits' rms): f32 weights differ
// from the reference by f32 rounding only (measured < 1e-5); f16 and bf16
// weights are exact in the reference too, but the cpu plugin rounds the
// activations to the weight's type in those products (~1e-3 relative); an f16
// cache rounds K and V (~2e-3). Quantized weights are dequantized exactly in
// the reference, but their products round the activations to 8 bits per
// value (q8_0 / q8_K blocks, as llama.cpp does): up to 1/254 of a block's
// largest value per activation, which through two layers measures 0.03-0.06
// here, so 0.1.
INSTANTIATE_TEST_SUITE_P(
    Archs, ModelForward,
    ::testing::Values(forward_case{"llama", BP_TYPE_F32, true, 1e-4}, forward_case{"qwen2", BP_TYPE_F32, true, 1e-4},
                      forward_case{"qwen3", BP_TYPE_F32, true, 1e-4}, forward_case{"llama", BP_TYPE_F32, false, 5e-3},
                      forward_case{"llama", BP_TYPE_F16, true, 1e-3}, forward_case{"llama", BP_TYPE_BF16, true, 1e-3},
                      forward_case{"llama", BP_TYPE_Q8_0, true, 0.1}, forward_case{"qwen2", BP_TYPE_Q4_0, true, 0.1},
                      forward_case{"qwen3", BP_TYPE_Q5_0, true, 0.1}, forward_case{"llama", BP_TYPE_Q4_K, true, 0.1},
                      forward_case{"qwen2", BP_TYPE_Q5_K, true, 0.1}, forward_case{"qwen3", BP_TYPE_Q6_K, true, 0.1}),
    [](const ::testing::TestParamInfo<forward_case> &i) {
      return i.param.arch + "_" + bp_type_name(i.param.type) + (i.param.kv_f32 ? "_kvf32" : "_kvf16");
    });

TEST(ModelForward, TiedOutputUsesTheTokenTable) {
  tiny_config cfg;
  cfg.tied = true;
  tiny_weights w;
  const std::string path = make(cfg, &w);
  loaded m;
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &m.model), BP_OK) << bp_last_error();
  const bp_model_context_options opt = context_options(32, true);
  ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
  const auto ids = prompt(5, cfg.n_vocab(), 3);
  ASSERT_EQ(bp_model_context_eval(m.ctx, ids.data(), ids.size(), false), BP_OK) << bp_last_error();
  size_t rows = 0;
  const float *row = bp_model_context_logits(m.ctx, &rows);
  ASSERT_EQ(rows, 1u);
  const auto want = bp::test::reference_logits(cfg, w, ids);
  std::vector<double> last(want.end() - cfg.n_vocab(), want.end());
  EXPECT_LT(rel_error(row, last, last.size()), 1e-4);
}

// Loads the partial test plugin (an ACCEL device that runs f32
// ADD/MUL/MUL_MAT/RMS_NORM/SILU/SCALE, 1 GiB per buffer); false when it is not built.
bool load_partial_plugin() {
  const std::string plugin = std::string(BP_TEST_FIXTURE_DIR) + "/partial/libbp-partial.so";
  FILE *f = std::fopen(plugin.c_str(), "rb");
  if (!f) return false;
  std::fclose(f);
  EXPECT_EQ(bp_registry_load(plugin.c_str(), nullptr), BP_OK) << bp_last_error();
  return true;
}

bp_model_options on_devices(const char *devices, int32_t offload_layers) {
  bp_model_options mo{};
  mo.struct_size = sizeof mo;
  mo.devices = devices;
  mo.offload_layers = offload_layers;
  return mo;
}

// A list that names only a device that is not CPU-type runs: "cpu" is
// appended as the scheduler's fallback, and the logits still match the
// reference. Before, the context failed on such a list (a GPU's "vulkan")
// with the scheduler's error. The layers stay on the cpu backend: the
// fixture cannot write a KV cache (no CPY or SET_ROWS).
TEST(ModelForward, AListEndingOnANonCpuDeviceGetsCpuAppended) {
  if (!load_partial_plugin()) GTEST_SKIP() << "the partial test plugin is not built";
  tiny_config cfg;
  tiny_weights w;
  const std::string path = make(cfg, &w);
  const bp_model_options mo = on_devices("partial", 0);
  loaded m;
  ASSERT_EQ(bp_model_load(path.c_str(), &mo, &m.model), BP_OK) << bp_last_error();
  const bp_model_context_options opt = context_options(32, true);
  ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
  expect_prompt_matches(m.ctx, cfg, w, prompt(5, cfg.n_vocab(), 3), 1e-4);
}

// A failed context keeps its cause: freeing the half-made context calls the
// core, which must not leave the caller an empty message.
TEST(ModelErrors, AContextThatCannotBeMadeSaysWhy) {
  if (!load_partial_plugin()) GTEST_SKIP() << "the partial test plugin is not built";
  tiny_config cfg;
  cfg.n_head = 8;
  cfg.n_head_kv = 8;
  cfg.n_embd = 128;
  tiny_weights w;
  const std::string path = make(cfg, &w);
  const bp_model_options mo = on_devices("partial;cpu", -1);
  loaded m;
  ASSERT_EQ(bp_model_load(path.c_str(), &mo, &m.model), BP_OK) << bp_last_error();
  // 2^20 positions of 128 f32 keys and values in 2 layers: 2 GiB, more than
  // one buffer of the partial device (1 GiB).
  const bp_model_context_options opt = context_options(1u << 20, true);
  EXPECT_NE(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK);
  EXPECT_EQ(m.ctx, nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("allocating the KV cache"), std::string::npos) << bp_last_error();
}

TEST(ModelErrors, AContextPastItsLengthIsAClearErrorAndRunsNothing) {
  tiny_config cfg;
  tiny_weights w;
  const std::string path = make(cfg, &w);
  loaded m;
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &m.model), BP_OK) << bp_last_error();
  const bp_model_context_options opt = context_options(8, false);
  ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
  const auto ids = prompt(6, cfg.n_vocab(), 1);
  ASSERT_EQ(bp_model_context_eval(m.ctx, ids.data(), ids.size(), false), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_model_context_eval(m.ctx, ids.data(), 3, false), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("2 are left"), std::string::npos) << bp_last_error();
  EXPECT_EQ(bp_model_context_position(m.ctx), 6u);
  const int32_t bad = cfg.n_vocab();
  EXPECT_EQ(bp_model_context_eval(m.ctx, &bad, 1, false), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_free(m.model), BP_ERR_FAILED_PRECONDITION);  // a context lives
}

TEST(ModelErrors, AMissingTensorIsNamedBeforeAnythingIsLoaded) {
  tiny_config cfg;
  tiny_weights w;
  const std::string path = make(cfg, &w, "blk.1.ffn_up.weight");
  bp_model *m = nullptr;
  EXPECT_EQ(bp_model_load(path.c_str(), nullptr, &m), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("blk.1.ffn_up.weight"), std::string::npos) << bp_last_error();
}

TEST(ModelErrors, AnotherArchitectureIsUnimplementedAndNamed) {
  tiny_config cfg;
  cfg.arch = "falcon";
  tiny_weights w;
  const std::string path = make(cfg, &w);
  bp_model *m = nullptr;
  EXPECT_EQ(bp_model_load(path.c_str(), nullptr, &m), BP_ERR_UNIMPLEMENTED);
  EXPECT_NE(std::string(bp_last_error()).find("falcon"), std::string::npos) << bp_last_error();
}

TEST(ModelErrors, AMissingFileIsNotFound) {
  bp_model *m = nullptr;
  EXPECT_EQ(bp_model_load("/nonexistent/model.gguf", nullptr, &m), BP_ERR_NOT_FOUND);
  EXPECT_NE(std::string(bp_last_error()).find("/nonexistent/model.gguf"), std::string::npos) << bp_last_error();
}

}  // namespace

namespace {

// The same model through the scheduler on a GPU plugin's device list: every
// op the device declines (or a node whose weights stay on cpu) runs on cpu.
class ModelDevices : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelDevices, LogitsMatchTheReferenceOnADeviceList) {
  const std::string devices = GetParam();
  bp_backend *probe = nullptr;
  const std::string first = devices.substr(0, devices.find(';'));
  if (bp_backend_new(first.c_str(), &probe) != BP_OK) GTEST_SKIP() << first << ": " << bp_last_error();
  bp_backend_free(probe);
  tiny_config cfg;
  cfg.arch = "qwen2";
  cfg.n_head_kv = 1;
  tiny_weights w;
  const std::string path = make(cfg, &w);
  bp_model_options mo{};
  mo.struct_size = sizeof mo;
  mo.devices = devices.c_str();
  mo.offload_layers = 1;  // layer 0 on the first device, layer 1 on cpu
  loaded m;
  ASSERT_EQ(bp_model_load(path.c_str(), &mo, &m.model), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_model_backend_count(m.model), 2u);
  bp_model_backend_info bi{};
  bi.struct_size = sizeof bi;
  ASSERT_EQ(bp_model_backend_describe(m.model, 0, &bi), BP_OK);
  EXPECT_EQ(bi.layers, 1);
  const bp_model_context_options opt = context_options(32, true);
  ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
  const auto ids = prompt(9, cfg.n_vocab(), 5);
  expect_prompt_matches(m.ctx, cfg, w, ids, 1e-3);
  ASSERT_EQ(bp_model_context_eval(m.ctx, ids.data(), 1, false), BP_OK) << bp_last_error();
}

// Every layer on the first device: the token table goes there too (a step
// is one graph on it), also when it is the output matrix (tied), except
// where the device does not run GET_ROWS of it (blas runs MUL_MAT only):
// then it stays on cpu. The logits match the reference either way.
TEST_P(ModelDevices, EveryLayerOnTheFirstDeviceTakesTheTokenTable) {
  const std::string devices = GetParam();
  bp_backend *probe = nullptr;
  const std::string first = devices.substr(0, devices.find(';'));
  if (bp_backend_new(first.c_str(), &probe) != BP_OK) GTEST_SKIP() << first << ": " << bp_last_error();
  bp_backend_free(probe);
  const bool table_on_first = first != "blas";
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    tiny_config cfg;
    cfg.tied = tied;
    cfg.rope_freqs = true;
    tiny_weights w;
    const std::string path = make(cfg, &w);
    bp_model_options mo{};
    mo.struct_size = sizeof mo;
    mo.devices = devices.c_str();
    mo.offload_layers = cfg.n_layer;
    loaded m;
    ASSERT_EQ(bp_model_load(path.c_str(), &mo, &m.model), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_model_backend_count(m.model), 2u);
    bp_model_backend_info bi{};
    bi.struct_size = sizeof bi;
    ASSERT_EQ(bp_model_backend_describe(m.model, 1, &bi), BP_OK);
    EXPECT_EQ(bi.layers, 0);
    if (table_on_first)
      EXPECT_EQ(bi.weight_bytes, 0u) << "weights left on " << bi.backend;
    else
      EXPECT_GT(bi.weight_bytes, 0u) << "the token table is not on " << bi.backend;
    const bp_model_context_options opt = context_options(32, true);
    ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
    expect_prompt_matches(m.ctx, cfg, w, prompt(9, cfg.n_vocab(), 5), 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Lists, ModelDevices, ::testing::Values("vulkan;cpu", "opencl;cpu", "blas;cpu", "remote:0;cpu"),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                           std::string name = i.param.substr(0, i.param.find(';'));
                           return name.substr(0, name.find(':'));
                         });

}  // namespace

namespace {

TEST(ModelContexts, TwoContextsShareOneModelFromTwoThreads) {
  tiny_config cfg;
  tiny_weights w;
  const std::string path = make(cfg, &w);
  bp_model *m = nullptr;
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &m), BP_OK) << bp_last_error();
  const auto a = prompt(11, cfg.n_vocab(), 21), b = prompt(13, cfg.n_vocab(), 22);
  const auto want_a = bp::test::reference_logits(cfg, w, a), want_b = bp::test::reference_logits(cfg, w, b);
  double err[2] = {1, 1};
  auto run = [&](const std::vector<int32_t> &ids, const std::vector<double> &want, double *out) {
    const bp_model_context_options opt = context_options(32, true);
    bp_model_context *c = nullptr;
    if (bp_model_context_new(m, &opt, &c) != BP_OK) return;
    for (int rep = 0; rep < 5; ++rep) {
      bp_model_context_rewind(c, 0);
      if (bp_model_context_eval(c, ids.data(), ids.size(), true) != BP_OK) break;
      size_t rows = 0;
      *out = rel_error(bp_model_context_logits(c, &rows), want, want.size());
    }
    bp_model_context_free(c);
  };
  std::thread t1(run, std::cref(a), std::cref(want_a), &err[0]);
  std::thread t2(run, std::cref(b), std::cref(want_b), &err[1]);
  t1.join();
  t2.join();
  EXPECT_LT(err[0], 1e-4);
  EXPECT_LT(err[1], 1e-4);
  EXPECT_EQ(bp_model_free(m), BP_OK);
}

}  // namespace

namespace {

TEST(ModelForward, RopeFrequencyFactorsDivideEachPairsFrequency) {
  tiny_config cfg;
  cfg.rope_freqs = true;
  tiny_weights w;
  const std::string path = make(cfg, &w);
  loaded m;
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &m.model), BP_OK) << bp_last_error();
  const bp_model_context_options opt = context_options(64, true);
  ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
  const auto ids = prompt(40, cfg.n_vocab(), 9);
  ASSERT_EQ(bp_model_context_eval(m.ctx, ids.data(), ids.size(), true), BP_OK) << bp_last_error();
  size_t rows = 0;
  const float *logits = bp_model_context_logits(m.ctx, &rows);
  const auto want = bp::test::reference_logits(cfg, w, ids);
  EXPECT_LT(rel_error(logits, want, want.size()), 1e-4);
  // Without the factors the reference differs: the test sees them.
  tiny_weights plain = w;
  plain.values.erase("rope_freqs.weight");
  const auto other = bp::test::reference_logits(cfg, plain, ids);
  EXPECT_GT(rel_error(logits, other, other.size()), 1e-2);
}

}  // namespace

// On cpu the layers' quantized matrices load into the weight buffer type
// (repacked, copied) unless plain_weights asks for the file's layout
// (mapped). Q4_0, Q8_0 and Q5_0 give the same logits up to float summation order:
// the activations are rounded to int8 the same way and the block dots are
// exact. The K-quants' repacked products round the activations with one
// scale per 256 values instead of per 32: close to the reference, not equal.
TEST(ModelForward, WeightBufferAndPlainWeightsAgree) {
  for (bp_type type : {BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q5_K, BP_TYPE_Q6_K}) {
    SCOPED_TRACE(bp_type_name(type));
    tiny_config cfg;
    cfg.type = type;
    const bool k_quant = bp_type_block_size(type) == 256;
    if (k_quant) {
      cfg.n_embd = 256;
      cfg.n_ff = 256;
      cfg.head_dim = 64;
    }
    tiny_weights w;
    const std::string path = make(cfg, &w);
    std::vector<float> got[2];
    for (int plain = 0; plain < 2; ++plain) {
      bp_model_options mo{};
      mo.struct_size = sizeof mo;
      mo.devices = "cpu:threads=2";
      mo.offload_layers = -1;
      mo.plain_weights = plain != 0;
      loaded m;
      ASSERT_EQ(bp_model_load(path.c_str(), &mo, &m.model), BP_OK) << bp_last_error();
      bp_model_backend_info bi{};
      bi.struct_size = sizeof bi;
      ASSERT_EQ(bp_model_backend_describe(m.model, 0, &bi), BP_OK);
      EXPECT_EQ(bi.mapped, plain != 0);
      const bp_model_context_options opt = context_options(64, true);
      ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
      const auto ids = prompt(9, cfg.n_vocab(), 3);
      ASSERT_EQ(bp_model_context_eval(m.ctx, ids.data(), ids.size(), true), BP_OK) << bp_last_error();
      size_t rows = 0;
      const float *logits = bp_model_context_logits(m.ctx, &rows);
      ASSERT_NE(logits, nullptr);
      got[plain].assign(logits, logits + rows * static_cast<size_t>(cfg.n_vocab()));
    }
    ASSERT_EQ(got[0].size(), got[1].size());
    const std::vector<double> plain_d(got[1].begin(), got[1].end());
    const double error = rel_error(got[0].data(), plain_d, plain_d.size());
    if (!k_quant) {
      EXPECT_LT(error, 1e-4);
      continue;
    }
    // Against the double-precision reference, the repacked K-quant product
    // (b rounded per 256 values, as llama.cpp rounds it) stays within twice
    // the plain one's error (per 32 values).
    EXPECT_GT(error, 0.0) << "the repacked K-quant product ran (its b is rounded differently)";
    const auto want = bp::test::reference_logits(cfg, w, prompt(9, cfg.n_vocab(), 3));
    const double repacked = rel_error(got[0].data(), want, want.size()),
                 plain = rel_error(got[1].data(), want, want.size());
    EXPECT_LT(repacked, 2 * plain) << "plain " << plain;
  }
}

namespace {

// ATTENTION nodes recorded since the last bp_trace_start.
uint64_t attention_nodes() {
  bp_trace_op_stat stats[64];
  size_t n = 0;
  if (bp_trace_op_stats(stats, 64, &n) != BP_OK) return 0;
  uint64_t count = 0;
  for (size_t i = 0; i < n && i < 64; ++i)
    if (stats[i].op == BP_OP_ATTENTION) count += stats[i].count;
  return count;
}

// The fused op (the default where the backend has it) and the two products
// around SOFT_MAX (unfused_attention) both give the reference's logits, for
// a prompt split over graphs and for decode steps, with an f16 and an f32
// cache; the trace shows which one ran, and the graph counts that the fused
// cache's decode steps reuse one graph and plan.
TEST(ModelForward, FusedAndUnfusedAttentionBothMatchTheReference) {
  uint64_t b = 1, p = 1;
  EXPECT_EQ(bp_model_context_graph_stats(nullptr, &b, &p), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, 0u);
  EXPECT_EQ(p, 0u);
  tiny_config cfg;
  cfg.arch = "llama";
  cfg.n_head_kv = 1;  // grouped-query attention
  tiny_weights w;
  const std::string path = make(cfg, &w);
  const auto ids = prompt(13, cfg.n_vocab(), 11);
  const auto want = bp::test::reference_logits(cfg, w, ids);
  for (bool kv_f32 : {true, false}) {
    for (bool unfused : {false, true}) {
      SCOPED_TRACE(std::string(unfused ? "unfused" : "fused") + (kv_f32 ? ", f32 cache" : ", f16 cache"));
      loaded m;
      ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &m.model), BP_OK) << bp_last_error();
      bp_model_context_options opt = context_options(64, kv_f32, 5);  // 5 + 5 + 3
      opt.unfused_attention = unfused;
      ASSERT_EQ(bp_model_context_new(m.model, &opt, &m.ctx), BP_OK) << bp_last_error();
      ASSERT_EQ(bp_trace_start(nullptr), BP_OK);
      ASSERT_EQ(bp_model_context_eval(m.ctx, ids.data(), ids.size(), true), BP_OK) << bp_last_error();
      ASSERT_EQ(bp_trace_stop(), BP_OK);
      EXPECT_EQ(attention_nodes(), unfused ? 0u : 3u * static_cast<uint64_t>(cfg.n_layer));  // three graphs
      size_t rows = 0;
      const float *logits = bp_model_context_logits(m.ctx, &rows);
      ASSERT_EQ(rows, ids.size());
      const double tol = kv_f32 ? 1e-4 : 5e-3;
      EXPECT_LT(rel_error(logits, want, want.size()), tol);
      ASSERT_EQ(bp_model_context_rewind(m.ctx, 0), BP_OK);
      uint64_t builds0 = 0, plans0 = 0, builds = 0, plans = 0;
      for (size_t t = 0; t < ids.size(); ++t) {
        ASSERT_EQ(bp_model_context_eval(m.ctx, &ids[t], 1, false), BP_OK) << bp_last_error();
        if (t == 0) {
          ASSERT_EQ(bp_model_context_graph_stats(m.ctx, &builds0, &plans0), BP_OK);
        }
        const float *row = bp_model_context_logits(m.ctx, &rows);
        std::vector<double> want_row(want.begin() + t * cfg.n_vocab(), want.begin() + (t + 1) * cfg.n_vocab());
        EXPECT_LT(rel_error(row, want_row, want_row.size()), tol) << "position " << t;
      }
      // Decode steps after the first: the fused cache reuses the step's graph
      // and plan (the write position is data); the transposed one builds a
      // graph per position.
      ASSERT_EQ(bp_model_context_graph_stats(m.ctx, &builds, &plans), BP_OK);
      const uint64_t steps = ids.size() - 1;
      EXPECT_EQ(builds - builds0, unfused ? steps : 0u);
      EXPECT_EQ(plans - plans0, unfused ? steps : 0u);
    }
  }
}

}  // namespace
