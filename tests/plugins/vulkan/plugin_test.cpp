// plugin_test.cpp: the vulkan plugin through its C ABI, loaded directly
// (dlopen) so the parts the core does not reach yet are tested: graph plans
// recorded once and replayed, async set/get and events, out-of-memory,
// GET_ROWS id checks, device properties, and that init creates no instance.
// Results are checked against double-precision references computed here.
// Every test skips when no Vulkan device exists.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/plugin.h"
#include "sanitizers/pin_loaded_objects.hpp"

namespace {

// Every line the plugin logs, so tests named for a path can see the path in
// the profile table (profile=true: one "profile: <op> <variant> N
// dispatches" line per op and shader variant, logged when the backend is
// freed).
struct captured_log {
  std::mutex mu;
  std::vector<std::string> lines;
  static void log(void *self, bp_log_level, const char *message) {
    auto *c = static_cast<captured_log *>(self);
    std::lock_guard<std::mutex> lock(c->mu);
    c->lines.emplace_back(message ? message : "");
  }
  static int enabled(void *, bp_log_level) { return 1; }
};

captured_log &plugin_log() {
  static captured_log c;
  return c;
}

const bp_host_api *test_host() {
  static const bp_host_api host{sizeof(bp_host_api),
                                BP_PLUGIN_ABI_VERSION,
                                BP_PLUGIN_ABI_MINOR,
                                &plugin_log(),
                                &captured_log::log,
                                &captured_log::enabled,
                                nullptr,
                                nullptr,
                                nullptr};
  return &host;
}

struct loaded_plugin {
  void *handle = nullptr;
  const bp_plugin_i *iface = nullptr;
  void *state = nullptr;
  bp_status enumerate_status = BP_ERR_UNAVAILABLE;
  uint32_t devices_before_enumerate = 0;
  std::string message;
  loaded_plugin() {
    // BP_TEST_PLUGIN_DIR in the environment: the plugin folder of a build
    // carried to another machine (scripts/gpu/check.sh on a GPU machine),
    // where the build's own path does not exist.
    const char *dir = std::getenv("BP_TEST_PLUGIN_DIR");
    const std::string path = std::string(dir && *dir ? dir : BP_TEST_PLUGIN_DIR) + "/libbp-vulkan.so";
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      message = dlerror();
      return;
    }
    auto entry = reinterpret_cast<bp_plugin_entry_fn>(dlsym(handle, BP_PLUGIN_ENTRY_SYMBOL));
    bp_error err{};
    iface = entry ? entry(BP_PLUGIN_ABI_VERSION, test_host(), &err) : nullptr;
    // As the host does (ABI 1.2): the host table again, through init_with_host.
    if (!iface || !iface->init_with_host || iface->init_with_host(test_host(), &state, &err) != BP_OK) {
      message = err.message;
      iface = nullptr;
      return;
    }
    devices_before_enumerate = iface->device_count(state);
    enumerate_status = iface->enumerate(state, &err);
    message = err.message;
    bp_test::pin_loaded_objects();  // the driver stays mapped for LSan
  }
  ~loaded_plugin() {
    if (iface) iface->shutdown(state);
    if (handle) dlclose(handle);
  }
  bool usable() const { return iface && enumerate_status == BP_OK && iface->device_count(state) > 0; }
};

// A tensor placed by hand at |offset| of |buf| (what the core's allocator does).
struct placed {
  bp_buffer_ref buf{};
  size_t used = 0;
  void place(bp_tensor *t) {
    t->data = static_cast<char *>(buf.iface->base(buf.ctx)) + used;
    t->buffer_ctx = buf.ctx;
    t->buffer = reinterpret_cast<bp_buffer *>(buf.ctx);  // only tested for non-NULL
    used += (bp_tensor_nbytes(t) + 255) / 256 * 256;
  }
};

class VulkanPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!plugin().usable()) GTEST_SKIP() << "no Vulkan device: " << plugin().message;
    bp_error err{};
    ASSERT_EQ(plugin().iface->device_get(plugin().state, 0, &dev_, &err), BP_OK) << err.message;
    const std::string cols = std::to_string(tile_cols());
    std::vector<bp_param_value> params = {{"f16", BP_PARAM_BOOL, 1, "true"},
                                          {"fast_paths", BP_PARAM_BOOL, 1, "true"},
                                          {"tile_cols", BP_PARAM_INT, tile_cols(), cols.c_str()},
                                          {"mul_mat", BP_PARAM_STRING, 0, mul_mat()},
                                          {"mul_mv", BP_PARAM_STRING, 0, mul_mv()},
                                          {"attention", BP_PARAM_STRING, 0, attention()},
                                          {"profile", BP_PARAM_BOOL, profile(), profile() ? "true" : "false"}};
    {
      std::lock_guard<std::mutex> lock(plugin_log().mu);
      plugin_log().lines.clear();
    }
    ASSERT_EQ(dev_.iface->backend_init(dev_.ctx, params.data(), params.size(), &be_, &err), BP_OK) << err.message;
    bp_buffer_type_ref buft = dev_.iface->buffer_type(dev_.ctx);
    ASSERT_EQ(buft.iface->alloc(buft.ctx, 64 << 20, &mem_.buf, &err), BP_OK) << err.message;
    ctx_ = bp_context_new(0);
  }
  // The backend's tile_cols parameter: 0 is the device's choice.
  virtual int64_t tile_cols() const { return 0; }
  // The backend's mul_mat and mul_mv parameters.
  virtual const char *mul_mat() const { return "auto"; }
  virtual const char *mul_mv() const { return "auto"; }
  virtual const char *attention() const { return "auto"; }
  bp_device_type device_type() const {
    bp_device_props props{};
    props.struct_size = sizeof props;
    bp_error err{};
    if (dev_.iface->get_props(dev_.ctx, &props, &err) != BP_OK) return BP_DEVICE_TYPE_GPU;
    return props.type;
  }
  // The backend's profile parameter: tests named for a path set it and read
  // the profile table (profile_rows) to show the path ran.
  virtual bool profile() const { return false; }
  // Frees the backend (which logs its profile table) and returns the table's
  // rows, "<op> <variant>" -> dispatches.
  std::map<std::string, int> profile_rows() {
    if (be_.iface) be_.iface->free(be_.ctx);
    be_ = {};
    std::map<std::string, int> rows;
    std::lock_guard<std::mutex> lock(plugin_log().mu);
    for (const std::string &l : plugin_log().lines) {
      char op[64], variant[64];
      int n = 0;
      if (std::sscanf(l.c_str(), "profile: %63s %63s %d dispatches", op, variant, &n) == 3)
        rows[std::string(op) + " " + variant] += n;
    }
    return rows;
  }
  static std::string rows_str(const std::map<std::string, int> &rows) {
    std::string s;
    for (const auto &[k, n] : rows) s += "\n  " + k + ": " + std::to_string(n);
    return s.empty() ? " (none: no profile lines logged)" : s;
  }
  void TearDown() override {
    if (ctx_) bp_context_free(ctx_);
    if (mem_.buf.iface) mem_.buf.iface->free(mem_.buf.ctx);
    if (be_.iface) be_.iface->free(be_.ctx);
  }
  void set(bp_tensor *t, const std::vector<float> &v) {
    bp_error err{};
    ASSERT_EQ(mem_.buf.iface->set_tensor(mem_.buf.ctx, t, v.data(), 0, v.size() * 4, &err), BP_OK) << err.message;
  }
  std::vector<float> get(const bp_tensor *t) {
    std::vector<float> v(static_cast<size_t>(bp_tensor_nelements(t)));
    bp_error err{};
    EXPECT_EQ(mem_.buf.iface->get_tensor(mem_.buf.ctx, t, v.data(), 0, v.size() * 4, &err), BP_OK) << err.message;
    return v;
  }
  static std::vector<float> random(size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(-1, 1);
    std::vector<float> v(n);
    for (float &x : v) x = d(g);
    return v;
  }
  bp_status sync() {
    bp_error err{};
    return be_.iface->synchronize(be_.ctx, &err);
  }

  // Loaded at the first test, not at static initialisation: listing the
  // tests (gtest_discover_tests at build time) must not create a VkInstance.
  static loaded_plugin &plugin() {
    static loaded_plugin p;
    return p;
  }
  bp_device_ref dev_{};
  bp_backend_ref be_{};
  placed mem_;
  bp_context *ctx_ = nullptr;
};

// The tests named for a path (a fused pair, a shader variant) with the
// profile on: each asserts on the table that the path ran.
class VulkanPluginPaths : public VulkanPlugin {
 protected:
  bool profile() const override { return true; }
  void norm_then_mul(int n0);
  void mul_mat_then_elementwise(int K, int M, int N, bp_type type, const char *variant);
  // Dispatches per op label ("MUL_MAT+ADD"), any variant.
  static std::map<std::string, int> by_op(const std::map<std::string, int> &rows) {
    std::map<std::string, int> ops;
    for (const auto &[k, n] : rows) ops[k.substr(0, k.find(' '))] += n;
    return ops;
  }
};

TEST_F(VulkanPlugin, TheFirstCountFindsTheDevicesAndEnumerateRepeatsIt) {
  // The harness asks for the count before enumerate, as a host of ABI 1.0
  // (which has no enumerate) would: devices are found once, by the first
  // call that needs them (plugins/common/plugin_common.hpp), and enumerate
  // then repeats that outcome.
  EXPECT_GT(plugin().devices_before_enumerate, 0u);
  EXPECT_EQ(plugin().iface->device_count(plugin().state), plugin().devices_before_enumerate);
  EXPECT_EQ(plugin().enumerate_status, BP_OK) << plugin().message;
}

TEST_F(VulkanPlugin, PropsNameTheDeviceByUuid) {
  bp_device_props p{};
  p.struct_size = sizeof p;
  bp_error err{};
  ASSERT_EQ(dev_.iface->get_props(dev_.ctx, &p, &err), BP_OK);
  EXPECT_EQ(std::strlen(p.id), 32u) << p.id;
  EXPECT_GT(p.memory_total, 0u);
  if (std::strstr(p.description, "llvmpipe")) {
    EXPECT_EQ(p.type, BP_DEVICE_TYPE_CPU);
  }
}

// A backend parameter value the plugin has no shader for: backend_init
// fails with INVALID_ARGUMENT and a message naming the values that work,
// creates nothing, and the device still opens a backend with |good|.
void expect_refused(const bp_device_ref &dev, const bp_param_value &bad, const char *message,
                    const bp_param_value &good) {
  bp_backend_ref be{};
  bp_error err{};
  EXPECT_EQ(dev.iface->backend_init(dev.ctx, &bad, 1, &be, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find(message), std::string::npos) << err.message;
  EXPECT_EQ(be.iface, nullptr);
  ASSERT_EQ(dev.iface->backend_init(dev.ctx, &good, 1, &be, &err), BP_OK) << err.message;
  be.iface->free(be.ctx);
}

TEST_F(VulkanPlugin, TileColsOutsideTheVariantsIsRefused) {
  expect_refused(dev_, {"tile_cols", BP_PARAM_INT, 12, "12"}, "tile_cols=12; use 0 (auto), 8, 16 or 32",
                 {"tile_cols", BP_PARAM_INT, 16, "16"});
}

TEST_F(VulkanPlugin, MulMatChoiceOutsideTheShadersIsRefused) {
  expect_refused(dev_, {"mul_mat", BP_PARAM_STRING, 0, "tiled"}, "mul_mat=tiled; use auto, cpu or gpu",
                 {"mul_mat", BP_PARAM_STRING, 0, "cpu"});
}

TEST_F(VulkanPlugin, ShaderChoicesOutsideTheShapesAreRefused) {
  expect_refused(dev_, {"mul_mv", BP_PARAM_STRING, 0, "warp"}, "mul_mv=warp; use auto, subgroup or workgroup",
                 {"mul_mv", BP_PARAM_STRING, 0, "workgroup"});
  expect_refused(dev_, {"attention", BP_PARAM_STRING, 0, "flash"}, "attention=flash; use auto, row, tile or split",
                 {"attention", BP_PARAM_STRING, 0, "split"});
}

// coopmat=true on a device without cooperative matrices (lavapipe) is a
// clear refusal, not a pipeline that fails at the first product.
TEST_F(VulkanPlugin, CoopmatWithoutCooperativeMatricesIsRefused) {
  bp_device_props props{};
  props.struct_size = sizeof props;
  bp_error err{};
  ASSERT_EQ(dev_.iface->get_props(dev_.ctx, &props, &err), BP_OK) << err.message;
  if (std::string(props.description).find("cooperative matrices no") == std::string::npos)
    GTEST_SKIP() << "this device has cooperative matrices: " << props.description;
  expect_refused(dev_, {"coopmat", BP_PARAM_BOOL, 1, "true"}, "coopmat=true: ",
                 {"coopmat", BP_PARAM_BOOL, 0, "false"});
}

// out = rms_norm(a x b + c): the register-blocked MUL_MAT (K, M multiples of
// 4, N >= 8), a texel ADD and a row op, replayed from one plan with new
// inputs, against a double reference each time.
TEST_F(VulkanPlugin, PlanReplaysWithNewInputs) {
  const int K = 68, M = 40, N = 24;
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, K, M);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, K, N);
  bp_tensor *c = bp_tensor_new_2d(ctx_, BP_TYPE_F32, M, N);
  bp_tensor *mm = bp_mul_mat(ctx_, a, b);
  bp_tensor *sum = bp_add(ctx_, mm, c);
  bp_tensor *out = bp_rms_norm(ctx_, sum, 1e-5f);
  ASSERT_TRUE(out);
  for (bp_tensor *t : {a, b, c, mm, sum, out}) mem_.place(t);
  bp_tensor *nodes[] = {mm, sum, out};
  bp_graph_desc g{sizeof(bp_graph_desc), 3, nodes};
  void *plan = nullptr;
  bp_error err{};
  ASSERT_EQ(be_.iface->graph_plan_create(be_.ctx, &g, &plan, &err), BP_OK) << err.message;
  for (unsigned round = 0; round < 3; ++round) {
    auto va = random(K * M, 1 + round), vb = random(K * N, 7 + round), vc = random(M * N, 13 + round);
    set(a, va);
    set(b, vb);
    set(c, vc);
    ASSERT_EQ(be_.iface->graph_plan_compute(be_.ctx, plan, &err), BP_OK) << err.message;
    ASSERT_EQ(sync(), BP_OK);
    std::vector<float> got = get(out);
    for (int n = 0; n < N; ++n) {
      std::vector<double> row(M);
      double ss = 0;
      for (int m = 0; m < M; ++m) {
        double s = vc[n * M + m];
        for (int k = 0; k < K; ++k) s += static_cast<double>(va[m * K + k]) * vb[n * K + k];
        row[m] = s;
        ss += s * s;
      }
      const double inv = 1.0 / std::sqrt(ss / M + 1e-5);
      for (int m = 0; m < M; ++m) ASSERT_NEAR(got[n * M + m], row[m] * inv, 1e-4) << "round " << round;
    }
  }
  be_.iface->graph_plan_free(be_.ctx, plan);
}

TEST_F(VulkanPlugin, AsyncSetComputeGetAndEvent) {
  const int n = 1000;
  bp_tensor *x = bp_tensor_new_1d(ctx_, BP_TYPE_F32, n);
  bp_tensor *y = bp_scale(ctx_, x, 3.0f);
  mem_.place(x);
  mem_.place(y);
  auto vx = random(n, 3);
  bp_error err{};
  ASSERT_EQ(be_.iface->set_tensor_async(be_.ctx, x, vx.data(), 0, n * 4, &err), BP_OK) << err.message;
  bp_tensor *nodes[] = {y};
  bp_graph_desc g{sizeof(bp_graph_desc), 1, nodes};
  ASSERT_EQ(be_.iface->graph_compute(be_.ctx, &g, &err), BP_OK) << err.message;
  std::vector<float> got(n, 0.0f);
  ASSERT_EQ(be_.iface->get_tensor_async(be_.ctx, y, got.data(), 0, n * 4, &err), BP_OK) << err.message;
  bp_event_ref ev{};
  ASSERT_EQ(dev_.iface->event_new(dev_.ctx, &ev, &err), BP_OK);
  ASSERT_EQ(be_.iface->event_record(be_.ctx, ev.ctx, &err), BP_OK);
  ASSERT_EQ(ev.iface->synchronize(ev.ctx, &err), BP_OK);
  ev.iface->free(ev.ctx);
  ASSERT_EQ(sync(), BP_OK);  // async reads land in caller memory here
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(got[i], 3.0f * vx[i]);
}

TEST_F(VulkanPlugin, OutOfMemoryIsAStatusAndTheDeviceGoesOn) {
  bp_buffer_type_ref buft = dev_.iface->buffer_type(dev_.ctx);
  bp_buffer_ref huge{};
  bp_error err{};
  const bp_status st = buft.iface->alloc(buft.ctx, size_t(1) << 46, &huge, &err);
  EXPECT_EQ(st, BP_ERR_OUT_OF_DEVICE_MEMORY) << err.message;
  // The host prefixes the plugin's name; the plugin's own text says what failed.
  EXPECT_NE(std::string(err.message), "");
  EXPECT_NE(std::string(err.message).rfind("vulkan:", 0), 0u) << err.message;
  bp_buffer_ref small{};
  ASSERT_EQ(buft.iface->alloc(buft.ctx, 4096, &small, &err), BP_OK) << err.message;
  small.iface->free(small.ctx);
}

TEST_F(VulkanPlugin, GetRowsBadIdFailsTheCompute) {
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 8, 4);
  bp_tensor *ids = bp_tensor_new_1d(ctx_, BP_TYPE_I32, 2);
  bp_tensor *r = bp_get_rows(ctx_, a, ids);
  for (bp_tensor *t : {a, ids, r}) mem_.place(t);
  set(a, random(32, 5));
  const int32_t bad[2] = {1, 9};
  bp_error err{};
  ASSERT_EQ(mem_.buf.iface->set_tensor(mem_.buf.ctx, ids, bad, 0, sizeof bad, &err), BP_OK);
  bp_tensor *nodes[] = {r};
  bp_graph_desc g{sizeof(bp_graph_desc), 1, nodes};
  ASSERT_EQ(be_.iface->graph_compute(be_.ctx, &g, &err), BP_OK) << err.message;
  err = bp_error{};
  EXPECT_EQ(be_.iface->synchronize(be_.ctx, &err), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find("id 9"), std::string::npos) << err.message;
  EXPECT_EQ(sync(), BP_OK);  // reported once; the backend goes on
}

// Every MUL_MAT path the plugin picks by shape: mul_mv (N < 8), mul_mat_nt
// (K % 4 == 0, a read in place, any M and N; 8, 16 or 32 columns per
// invocation, at most tile_cols) and the general shader (K % 4 != 0), f32
// and f16 weights, with a batch of b broadcasting over a's; and the
// GPU-shaped ones (mul_mv_wg, mul_mat_shared) forced by mul_mat=gpu, since
// lavapipe is a CPU-type device.
struct mul_mat_case {
  int K, M, N, B;
  bool f16;
  int tile_cols = 0;             // the backend parameter; 0 = the device's choice
  const char *mul_mat = "auto";  // the backend parameter
  // The shader variant the case is for ("x*": any starting with x), on a
  // CPU-type device: the profile table must show the product ran there.
  const char *variant = "";
  const char *mul_mv = "auto";  // the backend parameter
};

class VulkanMulMatPaths : public VulkanPlugin, public ::testing::WithParamInterface<mul_mat_case> {
 protected:
  int64_t tile_cols() const override { return GetParam().tile_cols; }
  const char *mul_mat() const override { return GetParam().mul_mat; }
  const char *mul_mv() const override { return GetParam().mul_mv; }
  bool profile() const override { return true; }
};

TEST_P(VulkanMulMatPaths, MatchDoubleReference) {
  const mul_mat_case c = GetParam();
  const int A2 = c.B > 1 ? c.B / 2 : 1;  // a has half of b's batches: each serves two
  bp_tensor *a = bp_tensor_new_3d(ctx_, c.f16 ? BP_TYPE_F16 : BP_TYPE_F32, c.K, c.M, A2);
  bp_tensor *b = bp_tensor_new_3d(ctx_, BP_TYPE_F32, c.K, c.N, c.B);
  bp_tensor *mm = bp_mul_mat(ctx_, a, b);
  ASSERT_NE(mm, nullptr) << bp_last_error();
  for (bp_tensor *t : {a, b, mm}) mem_.place(t);
  auto va = random(static_cast<size_t>(c.K) * c.M * A2, 41), vb = random(static_cast<size_t>(c.K) * c.N * c.B, 42);
  if (c.f16) {
    std::vector<uint16_t> h(va.size());
    for (size_t i = 0; i < va.size(); ++i) {
      h[i] = bp_fp32_to_fp16(va[i]);
      va[i] = bp_fp16_to_fp32(h[i]);  // the reference sees what the device sees
    }
    bp_error err{};
    ASSERT_EQ(mem_.buf.iface->set_tensor(mem_.buf.ctx, a, h.data(), 0, h.size() * 2, &err), BP_OK) << err.message;
  } else {
    set(a, va);
  }
  set(b, vb);
  bp_tensor *nodes[] = {mm};
  bp_graph_desc g{sizeof(bp_graph_desc), 1, nodes};
  bp_error err{};
  ASSERT_EQ(be_.iface->graph_compute(be_.ctx, &g, &err), BP_OK) << err.message;
  ASSERT_EQ(sync(), BP_OK);
  std::vector<float> got = get(mm);
  for (int i2 = 0; i2 < c.B; ++i2)
    for (int n = 0; n < c.N; ++n)
      for (int m = 0; m < c.M; ++m) {
        double s = 0;
        const float *ar = &va[(static_cast<size_t>(i2 / (c.B / A2)) * c.M + m) * c.K];
        const float *br = &vb[(static_cast<size_t>(i2) * c.N + n) * c.K];
        for (int k = 0; k < c.K; ++k) s += static_cast<double>(ar[k]) * br[k];
        ASSERT_NEAR(got[(static_cast<size_t>(i2) * c.N + n) * c.M + m], s, 1e-4 * std::sqrt(c.K))
            << "batch " << i2 << " n " << n << " m " << m;
      }
  // The path the case is named for ran: the product's only dispatches used
  // its variant. (The auto choices are a CPU-type device's: lavapipe's.)
  const bool cpu_type = device_type() == BP_DEVICE_TYPE_CPU;
  if (std::string(c.mul_mat) == "auto" && !cpu_type) return;
  const auto table = profile_rows();
  std::string want = std::string("MUL_MAT ") + c.variant;
  const bool prefix = want.back() == '*';
  if (prefix) want.pop_back();
  int dispatches = 0, others = 0;
  for (const auto &[k, count] : table)
    ((prefix ? k.compare(0, want.size(), want) == 0 : k == want) ? dispatches : others) += count;
  EXPECT_GT(dispatches, 0) << "no dispatch of " << want << "; the profile:" << rows_str(table);
  EXPECT_EQ(others, 0) << "dispatches other than " << want << "; the profile:" << rows_str(table);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanMulMatPaths,
    ::testing::Values(mul_mat_case{256, 96, 3, 1, false, 0, "auto", "mul_mv"},  // mul_mv
                      mul_mat_case{64, 37, 3, 1, false, 0, "auto", "mul_mv"},   // mul_mv, M not a multiple of 4
                      // nt_c8, M not a multiple of the 8-row block
                      mul_mat_case{128, 37, 8, 1, false, 0, "auto", "mul_mat_nt_c8"},
                      // nt_c16 one column past nt_c8, M past a workgroup
                      mul_mat_case{64, 129, 9, 1, true, 0, "auto", "mul_mat_nt_c16"},
                      // nt_c32 on lavapipe, N past a column block, batches
                      mul_mat_case{96, 70, 33, 4, false, 0, "auto", "mul_mat_nt_c32"},
                      mul_mat_case{96, 70, 33, 4, false, 16, "auto", "mul_mat_nt_c16"},  // by tile_cols, 3 blocks
                      mul_mat_case{64, 50, 20, 1, false, 8, "auto", "mul_mat_nt_c8"},    // by tile_cols, N past 2
                      // nt, f16 weights, two whole column blocks; one column past them; f16 weights, wide
                      mul_mat_case{64, 40, 64, 1, true, 0, "auto", "mul_mat_nt_c32"},
                      mul_mat_case{64, 40, 65, 2, false, 0, "auto", "mul_mat_nt_c*"},
                      mul_mat_case{128, 96, 130, 2, true, 0, "auto", "mul_mat_nt_c*"},
                      mul_mat_case{30, 20, 70, 1, false, 0, "auto", "mul_mat_f32"},  // general: K % 4 != 0
                      // mul_mat_shared, forced (GPUs pick it where M, N >= 64): 64 blocks with M and N
                      // past the edge and a K tail of 5 slices and one texel, batches; whole blocks,
                      // f16 weights; 128 blocks (chosen once there are 128 of them), K tail of 2 texels
                      mul_mat_case{84, 70, 33, 4, false, 0, "gpu", "mul_mat_shared_*"},
                      mul_mat_case{64, 64, 128, 1, true, 0, "gpu", "mul_mat_shared_*"},
                      mul_mat_case{40, 129, 65, 1, true, 0, "gpu", "mul_mat_shared_*"},
                      mul_mat_case{20, 200, 1000, 8, false, 0, "gpu", "mul_mat_shared_*"},
                      // mul_mv_wg, forced: a subgroup per row (the default) and a workgroup per row;
                      // K over several strides with a remainder, batches, f16 weights, M not a
                      // multiple of a workgroup's rows, and more rows than one dispatch's 65535
                      // workgroups cover (a subgroup per row: 4 rows each on lavapipe)
                      mul_mat_case{1028, 37, 7, 4, false, 0, "gpu", "mul_mv_wg"},
                      mul_mat_case{256, 96, 3, 1, true, 0, "gpu", "mul_mv_wg"},
                      mul_mat_case{8, 300001, 1, 1, false, 0, "gpu", "mul_mv_wg"},
                      mul_mat_case{1028, 37, 7, 4, false, 0, "gpu", "mul_mv_wg", "workgroup"},
                      mul_mat_case{256, 97, 3, 1, true, 0, "gpu", "mul_mv_wg", "workgroup"},
                      mul_mat_case{8, 70000, 1, 1, false, 0, "gpu", "mul_mv_wg", "workgroup"}),
    [](const ::testing::TestParamInfo<mul_mat_case> &i) {
      const mul_mat_case &c = i.param;
      return "K" + std::to_string(c.K) + "_M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_B" +
             std::to_string(c.B) + (c.f16 ? "_f16" : "_f32") +
             (c.tile_cols ? "_tile" + std::to_string(c.tile_cols) : "") +
             (std::string(c.mul_mat) != "auto" ? std::string("_") + c.mul_mat : "") +
             (std::string(c.mul_mv) != "auto" ? std::string("_") + c.mul_mv : "");
    });

}  // namespace

namespace {

// A norm followed by a MUL of its result runs as one dispatch (fusion.cpp,
// plan_fused): the product by a weight row and by a same-shape tensor, the
// norm still readable by a later node, and the product written over the
// norm's own memory (the allocator's in-place reuse). Rows of |n0| values:
// a multiple of 4 takes rows_vec4 on CPU-type devices, any other length
// (and every row on a GPU) the workgroup-per-row rows shader.
void VulkanPluginPaths::norm_then_mul(int n0) {
  const int rows = 5;
  bp_tensor *x = bp_tensor_new_2d(ctx_, BP_TYPE_F32, n0, rows);
  bp_tensor *w = bp_tensor_new_1d(ctx_, BP_TYPE_F32, n0);
  bp_tensor *full = bp_tensor_new_2d(ctx_, BP_TYPE_F32, n0, rows);
  bp_tensor *rms = bp_rms_norm(ctx_, x, 1e-5f);
  bp_tensor *rms_w = bp_mul(ctx_, rms, w);
  bp_tensor *later = bp_add(ctx_, rms, rms_w);  // reads the norm after the fused pair
  bp_tensor *norm = bp_norm(ctx_, x, 1e-5f);
  bp_tensor *norm_full = bp_mul(ctx_, norm, full);
  bp_tensor *rms2 = bp_rms_norm(ctx_, full, 1e-5f);
  bp_tensor *in_place = bp_mul(ctx_, rms2, w);
  ASSERT_TRUE(in_place);
  for (bp_tensor *t : {x, w, full, rms, rms_w, later, norm, norm_full, rms2}) mem_.place(t);
  in_place->data = rms2->data;
  in_place->buffer_ctx = rms2->buffer_ctx;
  in_place->buffer = rms2->buffer;
  auto vx = random(n0 * rows, 51), vw = random(n0, 52), vf = random(n0 * rows, 53);
  set(x, vx);
  set(w, vw);
  set(full, vf);
  bp_tensor *nodes[] = {rms, rms_w, later, norm, norm_full, rms2, in_place};
  bp_graph_desc g{sizeof(bp_graph_desc), 7, nodes};
  bp_error err{};
  ASSERT_EQ(be_.iface->graph_compute(be_.ctx, &g, &err), BP_OK) << err.message;
  ASSERT_EQ(sync(), BP_OK);
  std::vector<float> g_rms_w = get(rms_w), g_later = get(later), g_norm = get(norm), g_norm_full = get(norm_full),
                     g_in_place = get(in_place);
  for (int r = 0; r < rows; ++r) {
    const float *row = &vx[r * n0], *frow = &vf[r * n0];
    double s = 0, ss = 0, fss = 0;
    for (int i = 0; i < n0; ++i) {
      s += row[i];
      ss += static_cast<double>(row[i]) * row[i];
      fss += static_cast<double>(frow[i]) * frow[i];
    }
    const double mean = s / n0;
    double var = 0;
    for (int i = 0; i < n0; ++i) var += (row[i] - mean) * (row[i] - mean);
    for (int i = 0; i < n0; ++i) {
      const size_t at = static_cast<size_t>(r) * n0 + i;
      const double rn = row[i] / std::sqrt(ss / n0 + 1e-5), nn = (row[i] - mean) / std::sqrt(var / n0 + 1e-5);
      ASSERT_NEAR(g_rms_w[at], rn * vw[i], 1e-5) << "row " << r << " col " << i;
      ASSERT_NEAR(g_later[at], rn + rn * vw[i], 1e-5) << "row " << r << " col " << i;
      ASSERT_NEAR(g_norm[at], nn, 1e-5) << "row " << r << " col " << i;
      ASSERT_NEAR(g_norm_full[at], nn * vf[at], 1e-5) << "row " << r << " col " << i;
      ASSERT_NEAR(g_in_place[at], frow[i] / std::sqrt(fss / n0 + 1e-5) * vw[i], 1e-5) << "row " << r << " col " << i;
    }
  }
  // Each norm and its MUL in one dispatch, no norm or MUL alone, on the
  // shader the row length calls for.
  const auto table = profile_rows();
  const auto ops = by_op(table);
  auto count = [&](const char *op) { return ops.count(op) ? ops.at(op) : 0; };
  EXPECT_EQ(count("RMS_NORM+MUL"), 2) << rows_str(table);
  EXPECT_EQ(count("NORM+MUL"), 1) << rows_str(table);
  EXPECT_EQ(count("RMS_NORM") + count("NORM") + count("MUL"), 0) << rows_str(table);
  EXPECT_EQ(count("ADD"), 1) << rows_str(table);
  const bool vec4 = device_type() == BP_DEVICE_TYPE_CPU && n0 % 4 == 0;
  EXPECT_EQ(table.count(std::string("RMS_NORM+MUL ") + (vec4 ? "rows_vec4" : "rows")), 1u) << rows_str(table);
}

TEST_F(VulkanPluginPaths, NormThenMulMatchDoubleReference) { norm_then_mul(64); }
TEST_F(VulkanPluginPaths, NormThenMulOfOddRowsMatchDoubleReference) { norm_then_mul(66); }

// A MUL_MAT followed by ADD or MUL of its product with a tensor of the same
// layout, or by SILU of it, runs as one dispatch (plan_fused), in the
// epilogue of the product's shader (|variant|, "x*": any starting with x):
// the product on either side of the ADD/MUL, the product still readable by
// a later node, the result written over the operand's memory and over the
// product's, and a row-broadcast ADD (not fused) beside them. |type|: the
// weights' (f32, or a block type decoded as bp_dequantize does). Frees the
// backend (to read its profile): once per test.
void VulkanPluginPaths::mul_mat_then_elementwise(int K, int M, int N, bp_type type, const char *variant) {
  bp_tensor *a = bp_tensor_new_2d(ctx_, type, K, M);
  bp_tensor *b = bp_tensor_new_2d(ctx_, BP_TYPE_F32, K, N);
  bp_tensor *x = bp_tensor_new_2d(ctx_, BP_TYPE_F32, M, N);
  bp_tensor *row = bp_tensor_new_1d(ctx_, BP_TYPE_F32, M);
  bp_tensor *mm1 = bp_mul_mat(ctx_, a, b), *add = bp_add(ctx_, x, mm1);     // product as src1
  bp_tensor *mm2 = bp_mul_mat(ctx_, a, b), *mul = bp_mul(ctx_, mm2, x);     // product as src0
  bp_tensor *mm3 = bp_mul_mat(ctx_, a, b), *silu = bp_silu(ctx_, mm3);      // result over the product
  bp_tensor *later = bp_sub(ctx_, mm1, x);                                  // reads a fused product
  bp_tensor *mm4 = bp_mul_mat(ctx_, a, b), *bias = bp_add(ctx_, mm4, row);  // broadcast: not fused
  bp_tensor *x2 = bp_tensor_new_2d(ctx_, BP_TYPE_F32, M, N);
  bp_tensor *mm5 = bp_mul_mat(ctx_, a, b), *over_operand = bp_add(ctx_, mm5, x2);  // result over x2
  ASSERT_TRUE(over_operand && bias && later && silu);
  for (bp_tensor *t : {a, b, x, row, mm1, add, mm2, mul, mm3, later, mm4, bias, x2, mm5}) mem_.place(t);
  silu->data = mm3->data, silu->buffer_ctx = mm3->buffer_ctx, silu->buffer = mm3->buffer;
  over_operand->data = x2->data, over_operand->buffer_ctx = x2->buffer_ctx, over_operand->buffer = x2->buffer;
  auto va = random(K * M, 61), vb = random(K * N, 62), vx = random(M * N, 63), vr = random(M, 64),
       vx2 = random(M * N, 65);
  if (type == BP_TYPE_F32) {
    set(a, va);
  } else {
    std::vector<unsigned char> q(bp_type_row_size(type, K) * M);
    size_t written = 0;
    ASSERT_EQ(bp_quantize_rows(type, va.data(), q.data(), M, K, &written), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_dequantize(type, q.data(), va.data(), K * M), BP_OK);  // the reference sees the device's weights
    bp_error err{};
    ASSERT_EQ(mem_.buf.iface->set_tensor(mem_.buf.ctx, a, q.data(), 0, q.size(), &err), BP_OK) << err.message;
  }
  set(b, vb);
  set(x, vx);
  set(row, vr);
  set(x2, vx2);
  bp_tensor *nodes[] = {mm1, add, mm2, mul, mm3, silu, later, mm4, bias, mm5, over_operand};
  bp_graph_desc g{sizeof(bp_graph_desc), 11, nodes};
  bp_error err{};
  ASSERT_EQ(be_.iface->graph_compute(be_.ctx, &g, &err), BP_OK) << err.message;
  ASSERT_EQ(sync(), BP_OK);
  std::vector<float> g_add = get(add), g_mul = get(mul), g_silu = get(silu), g_later = get(later), g_bias = get(bias),
                     g_over = get(over_operand), g_mm2 = get(mm2);
  for (int n = 0; n < N; ++n)
    for (int m = 0; m < M; ++m) {
      double p = 0;
      for (int k = 0; k < K; ++k) p += static_cast<double>(va[m * K + k]) * vb[n * K + k];
      const size_t at = static_cast<size_t>(n) * M + m;
      const double tol = 1e-4 * std::sqrt(K);
      ASSERT_NEAR(g_add[at], vx[at] + p, tol) << "n " << n << " m " << m;
      ASSERT_NEAR(g_mul[at], p * vx[at], tol) << "n " << n << " m " << m;
      ASSERT_NEAR(g_mm2[at], p, tol) << "n " << n << " m " << m;
      ASSERT_NEAR(g_silu[at], p / (1 + std::exp(-p)), tol) << "n " << n << " m " << m;
      ASSERT_NEAR(g_later[at], p - vx[at], tol) << "n " << n << " m " << m;
      ASSERT_NEAR(g_bias[at], p + vr[m], tol) << "n " << n << " m " << m;
      ASSERT_NEAR(g_over[at], p + vx2[at], tol) << "n " << n << " m " << m;
    }
  // The two ADDs over a same-layout operand, the MUL and the SILU each in
  // the product's dispatch; the broadcast ADD and its product alone, as is
  // the SUB.
  const auto table = profile_rows();
  const auto ops = by_op(table);
  auto count = [&](const char *op) { return ops.count(op) ? ops.at(op) : 0; };
  EXPECT_EQ(count("MUL_MAT+ADD"), 2) << rows_str(table);
  EXPECT_EQ(count("MUL_MAT+MUL"), 1) << rows_str(table);
  EXPECT_EQ(count("MUL_MAT+SILU"), 1) << rows_str(table);
  EXPECT_EQ(count("MUL_MAT"), 1) << rows_str(table);
  EXPECT_EQ(count("ADD"), 1) << rows_str(table);
  EXPECT_EQ(count("SUB"), 1) << rows_str(table);
  EXPECT_EQ(count("MUL") + count("SILU"), 0) << rows_str(table);
  if (device_type() != BP_DEVICE_TYPE_CPU && std::string(mul_mat()) == "auto") return;  // a GPU's own choice
  std::string want = variant;
  const bool prefix = want.back() == '*';
  if (prefix) want.pop_back();
  for (const auto &[k, n] : table) {
    if (k.rfind("MUL_MAT+", 0) != 0) continue;
    const std::string v = k.substr(k.find(' ') + 1);
    EXPECT_TRUE(prefix ? v.rfind(want, 0) == 0 : v == want) << k << " is not " << variant << rows_str(table);
  }
}

// mul_mat_nt's epilogue on CPU-type devices (N >= 8, and standing in for
// mul_mv where fused); mul_mv_q's for block weights.
TEST_F(VulkanPluginPaths, MulMatThenElementwiseMatchDoubleReference) {
  mul_mat_then_elementwise(72, 40, 12, BP_TYPE_F32, "mul_mat_nt_c*");
}
TEST_F(VulkanPluginPaths, Q8_0MulMatThenElementwiseMatchDoubleReference) {
  mul_mat_then_elementwise(96, 40, 3, BP_TYPE_Q8_0, "mul_mv_q_*");
}
TEST_F(VulkanPluginPaths, Q4_KMatrixVectorThenElementwiseMatchDoubleReference) {
  mul_mat_then_elementwise(512, 33, 2, BP_TYPE_Q4_K, "mul_mv_q_*");  // N > 1: the row ADD broadcasts
}

// The GPU-shaped matrix x vector shaders' epilogues, forced on a CPU-type
// device: mul_mv_wg (f32 weights) and mul_mv_q, a subgroup per row and a
// workgroup per row.
class VulkanGpuFusion : public VulkanPluginPaths, public ::testing::WithParamInterface<const char *> {
 protected:
  const char *mul_mat() const override { return "gpu"; }
  const char *mul_mv() const override { return GetParam(); }
};

TEST_P(VulkanGpuFusion, MatrixVectorThenElementwiseMatchDoubleReference) {
  mul_mat_then_elementwise(260, 37, 3, BP_TYPE_F32, "mul_mv_wg");
}
TEST_P(VulkanGpuFusion, QuantMatrixVectorThenElementwiseMatchDoubleReference) {
  mul_mat_then_elementwise(256, 37, 2, BP_TYPE_Q6_K, "mul_mv_q_*");
}
INSTANTIATE_TEST_SUITE_P(MulMv, VulkanGpuFusion, ::testing::Values("subgroup", "workgroup"));

// Rows of a multiple of 4 take rows.comp's VEC4 variant (one invocation per row), which
// the conformance runner's odd row lengths never reach. 76 = 19 texels: four
// texels at a time, then a tail of three. SOFT_MAX's one-pass maximum and sum
// meet a row whose first 40 elements are masked (-inf), a row masked
// entirely (zeros), and a row whose values span +-30 (large rescales).
TEST_F(VulkanPluginPaths, TexelRowOpsMatchDoubleReference) {
  const int n0 = 76, rows = 5;
  bp_tensor *x = bp_tensor_new_2d(ctx_, BP_TYPE_F32, n0, rows);
  bp_tensor *mask = bp_tensor_new_2d(ctx_, BP_TYPE_F32, n0, rows);
  bp_tensor *rms = bp_rms_norm(ctx_, x, 1e-5f);
  bp_tensor *norm = bp_norm(ctx_, x, 1e-5f);
  bp_tensor *sm = bp_soft_max(ctx_, x, mask, 0.5f);
  for (bp_tensor *t : {x, mask, rms, norm, sm}) mem_.place(t);
  auto vx = random(n0 * rows, 31), vm = random(n0 * rows, 32);
  const float inf = INFINITY;
  for (int i = 0; i < 40; ++i) vm[1 * n0 + i] = -inf;
  for (int i = 0; i < n0; ++i) vm[3 * n0 + i] = -inf;
  for (int i = 0; i < n0; ++i) vx[2 * n0 + i] *= 60;
  set(x, vx);
  set(mask, vm);
  bp_tensor *nodes[] = {rms, norm, sm};
  bp_graph_desc g{sizeof(bp_graph_desc), 3, nodes};
  bp_error err{};
  ASSERT_EQ(be_.iface->graph_compute(be_.ctx, &g, &err), BP_OK) << err.message;
  ASSERT_EQ(sync(), BP_OK);
  std::vector<float> grms = get(rms), gnorm = get(norm), gsm = get(sm);
  for (int r = 0; r < rows; ++r) {
    const float *row = &vx[r * n0];
    double s = 0, ss = 0, mx = -1e300, se = 0;
    for (int i = 0; i < n0; ++i) {
      s += row[i];
      ss += static_cast<double>(row[i]) * row[i];
      mx = std::max(mx, 0.5 * row[i] + vm[r * n0 + i]);
    }
    const double mean = s / n0;
    double var = 0;
    for (int i = 0; i < n0; ++i) var += (row[i] - mean) * (row[i] - mean);
    for (int i = 0; i < n0; ++i) se += std::exp(0.5 * row[i] + vm[r * n0 + i] - mx);
    for (int i = 0; i < n0; ++i) {
      const double rms_ref = row[i] / std::sqrt(ss / n0 + 1e-5);
      ASSERT_NEAR(grms[r * n0 + i], rms_ref, 1e-5 * std::max(1.0, std::abs(rms_ref)));
      ASSERT_NEAR(gnorm[r * n0 + i], (row[i] - mean) / std::sqrt(var / n0 + 1e-5), 1e-5);
      const double sm_ref = se == 0 ? 0.0 : std::exp(0.5 * row[i] + vm[r * n0 + i] - mx) / se;
      ASSERT_NEAR(gsm[r * n0 + i], sm_ref, 1e-6) << "row " << r << " element " << i;
    }
  }
  // Each of the three ran on rows_vec4.comp.
  const auto table = profile_rows();
  for (const char *op : {"RMS_NORM", "NORM", "SOFT_MAX"})
    EXPECT_EQ(table.count(std::string(op) + " rows_vec4") ? table.at(std::string(op) + " rows_vec4") : 0, 1)
        << op << ":" << rows_str(table);
}

// ATTENTION split over runs of the keys (attention=split; GPUs pick it for a
// decode step over a long cache): 700 keys in 11 runs of one 64-key block,
// merged by attention_merge. Row 0 masks its first 400 keys, so whole runs
// have no key at all (their maximum is -inf and they must add nothing);
// row 1 masks every key (zeros). GQA: 4 query heads on 2 key heads.
class VulkanSplitAttention : public VulkanPluginPaths {
 protected:
  const char *attention() const override { return "split"; }
};

TEST_F(VulkanSplitAttention, RunsWithoutKeysAndFullyMaskedRowsMatchDoubleReference) {
  const int D = 64, T = 2, H = 4, Hk = 2, N = 700;
  bp_tensor *q = bp_tensor_new_3d(ctx_, BP_TYPE_F32, D, T, H);
  bp_tensor *k = bp_tensor_new_3d(ctx_, BP_TYPE_F32, D, N, Hk);
  bp_tensor *v = bp_tensor_new_3d(ctx_, BP_TYPE_F32, D, N, Hk);
  bp_tensor *mask = bp_tensor_new_2d(ctx_, BP_TYPE_F32, N, T);
  const float scale = 0.125f;
  bp_tensor *att = bp_attention(ctx_, q, k, v, mask, scale);
  ASSERT_NE(att, nullptr) << bp_last_error();
  for (bp_tensor *t : {q, k, v, mask, att}) mem_.place(t);
  auto vq = random(D * T * H, 71), vk = random(D * N * Hk, 72), vv = random(D * N * Hk, 73);
  std::vector<float> vm(static_cast<size_t>(N) * T, 0.0f);
  for (int j = 0; j < N; ++j) {
    if (j < 400) vm[j] = -INFINITY;
    vm[N + j] = -INFINITY;
  }
  set(q, vq);
  set(k, vk);
  set(v, vv);
  set(mask, vm);
  bp_tensor *nodes[] = {att};
  bp_graph_desc g{sizeof(bp_graph_desc), 1, nodes};
  bp_error err{};
  ASSERT_EQ(be_.iface->graph_compute(be_.ctx, &g, &err), BP_OK) << err.message;
  ASSERT_EQ(sync(), BP_OK);
  const std::vector<float> got = get(att);  // [D, H, T]
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int hk = h / (H / Hk);
      std::vector<double> s(N);
      double mx = -INFINITY;
      for (int j = 0; j < N; ++j) {
        double dot = 0;
        for (int i = 0; i < D; ++i) dot += static_cast<double>(vq[(h * T + t) * D + i]) * vk[(hk * N + j) * D + i];
        s[j] = scale * dot + vm[t * N + j];
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      std::vector<double> out(D, 0.0);
      for (int j = 0; j < N; ++j) {
        if (std::isinf(s[j])) continue;
        const double p = std::exp(s[j] - mx);
        sum += p;
        for (int c = 0; c < D; ++c) out[c] += p * vv[(hk * N + j) * D + c];
      }
      for (int c = 0; c < D; ++c) {
        const double ref = sum > 0 ? out[c] / sum : 0.0;
        ASSERT_NEAR(got[(t * H + h) * D + c], ref, 1e-5) << "t " << t << " h " << h << " channel " << c;
      }
    }
  const auto table = profile_rows();
  EXPECT_EQ(table.count("ATTENTION attention_merge"), 1u) << rows_str(table);
  EXPECT_EQ(table.count("ATTENTION attention_f32"), 1u) << rows_str(table);
}

}  // namespace
