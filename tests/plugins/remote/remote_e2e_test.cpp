// The remote plugin end to end: real bp-serve processes on loopback ports,
// the plugin loaded through the registry, results checked against double
// precision references computed here.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "remote_harness.hpp"
#include "support/find.hpp"

namespace {

using bp_test::log_capture;
using bp_test::reload_remote;
using bp_test::serve_cpu;
using bp_test::serve_process;
using clock_type = std::chrono::steady_clock;

void set_remote(const std::string &servers) {
  setenv("BP_REMOTE", servers.c_str(), 1);
  unsetenv("BP_REMOTE_TOKEN_FILE");
  unsetenv("BP_REMOTE_TIMEOUT_MS");
  unsetenv("BP_REMOTE_CHUNK_BYTES");
}

// A loopback port nothing listens on (connections are refused at once).
std::string dead_address() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
  close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto &x : v) x = d(rng);
  return v;
}

struct RemoteServed : ::testing::Test {
  serve_process server;
  bp_plugin *plugin = nullptr;
  void SetUp() override { BP_REQUIRE_SERVE(); }
  void start(std::vector<std::string> args = serve_cpu()) {
    ASSERT_TRUE(server.start(args)) << server.log();
    set_remote(server.address());
  }
  void TearDown() override {
    if (bp_plugin *p = bp_test::find_plugin("remote")) bp_plugin_unload(p);
  }
};

// ---- discovery -------------------------------------------------------------

TEST(RemoteDiscovery, NoConnectionIsOpenedUntilARemoteDeviceIsListed) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  socklen_t n = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr *>(&a), &n);
  set_remote("127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
  setenv("BP_REMOTE_TIMEOUT_MS", "300", 1);
  bp_plugin *p = reload_remote();
  ASSERT_NE(p, nullptr);
  bp_backend *cpu = nullptr;
  ASSERT_EQ(bp_backend_new("cpu", &cpu), BP_OK) << bp_last_error();
  bp_backend_free(cpu);
  EXPECT_LT(accept(listener, nullptr, nullptr), 0) << "the remote plugin connected for a cpu backend";
  // Listing the plugin's devices does connect (and gives up: no bp-serve).
  const char *why = nullptr;
  EXPECT_EQ(bp_plugin_status(p, &why), BP_ERR_UNAVAILABLE);
  pollfd pfd{listener, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 2000), 1) << "listing remote devices did not connect";
  close(listener);
  bp_plugin_unload(p);
}

TEST_F(RemoteServed, DevicesNameTheirServerAndAreSelectedByStableId) {
  start();
  plugin = reload_remote();
  ASSERT_GE(bp_plugin_device_count(plugin), 1u);
  bp_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(bp_device_describe(bp_plugin_device(plugin, 0), &info), BP_OK);
  EXPECT_EQ(std::string(info.description).rfind(server.address(), 0), 0u) << info.description;
  EXPECT_NE(std::string(info.id).find('/'), std::string::npos) << info.id;
  EXPECT_STREQ(info.spec, "remote:0");
  EXPECT_EQ(info.caps & BP_DEVICE_CAP_HOST_MEMORY, 0u);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new(("remote:id=" + std::string(info.id)).c_str(), &be), BP_OK) << bp_last_error();
  EXPECT_STREQ(bp_backend_name(be), "remote:0");
  bp_backend_free(be);
}

TEST_F(RemoteServed, AnUnreachableServerIsAProblemAndTheOthersStillServe) {
  start();
  const std::string dead = dead_address();
  set_remote(dead + "," + server.address());
  log_capture log(BP_LOG_WARN);
  plugin = reload_remote();
  EXPECT_GE(bp_plugin_device_count(plugin), 1u);
  const char *why = nullptr;
  EXPECT_EQ(bp_plugin_status(plugin, &why), BP_OK);
  EXPECT_EQ(log.count(dead), 1) << log.all();
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
}

TEST(RemoteDiscovery, NoServerAnsweringIsUnavailableNamingTheServer) {
  const std::string dead = dead_address();
  set_remote(dead);
  bp_plugin *p = reload_remote();
  const char *why = nullptr;
  const auto t0 = clock_type::now();
  EXPECT_EQ(bp_plugin_status(p, &why), BP_ERR_UNAVAILABLE);
  EXPECT_LT(ms_since(t0), 3000.0);
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find(dead), std::string::npos) << why;
  bp_backend *be = nullptr;
  EXPECT_NE(bp_backend_new("remote", &be), BP_OK);
  EXPECT_NE(std::string(bp_last_error()).find(dead), std::string::npos) << bp_last_error();
  bp_plugin_unload(p);
}

// A machine that names no server has no remote devices, and nothing is
// wrong with it: bp-devices must not list the plugin under Problems.
TEST(RemoteDiscovery, NoServerConfiguredIsNoDevicesNotAProblem) {
  unsetenv("BP_REMOTE");
  bp_plugin *p = reload_remote();
  const char *why = nullptr;
  EXPECT_EQ(bp_plugin_status(p, &why), BP_OK) << (why ? why : "");
  EXPECT_EQ(bp_plugin_device_count(p), 0u);
  bp_backend *be = nullptr;
  EXPECT_NE(bp_backend_new("remote", &be), BP_OK);
  bp_plugin_unload(p);
}

// ---- data ------------------------------------------------------------------

TEST_F(RemoteServed, TransfersMemsetClearAndCopyRoundTripInSmallChunks) {
  start();
  setenv("BP_REMOTE_CHUNK_BYTES", "65536", 1);  // a 3 MiB tensor is ~50 messages each way
  plugin = reload_remote();
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  const int64_t n = (3 << 20) / 4 + 4097;  // not a multiple of the chunk
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, n);
  bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, n);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  EXPECT_FALSE(bp_buffer_is_host(buf));
  const size_t bytes = static_cast<size_t>(n) * 4;
  std::vector<float> x = random_floats(static_cast<size_t>(n), 1);
  ASSERT_EQ(bp_tensor_set(a, x.data(), 0, bytes), BP_OK) << bp_last_error();
  std::vector<float> y(static_cast<size_t>(n));
  ASSERT_EQ(bp_tensor_get(a, y.data(), 0, bytes), BP_OK) << bp_last_error();
  EXPECT_EQ(std::memcmp(x.data(), y.data(), bytes), 0);
  // A part, at an odd offset.
  std::vector<uint8_t> part(200001, 0x5a);
  ASSERT_EQ(bp_tensor_set(a, part.data(), 1001, part.size()), BP_OK) << bp_last_error();
  std::vector<uint8_t> back(bytes);
  ASSERT_EQ(bp_tensor_get(a, back.data(), 0, bytes), BP_OK);
  EXPECT_EQ(std::memcmp(back.data(), x.data(), 1001), 0);
  EXPECT_EQ(std::memcmp(back.data() + 1001, part.data(), part.size()), 0);
  EXPECT_EQ(std::memcmp(back.data() + 1001 + part.size(), reinterpret_cast<uint8_t *>(x.data()) + 1001 + part.size(),
                        bytes - 1001 - part.size()),
            0);
  // Copy on the server, then memset a range of the copy.
  ASSERT_EQ(bp_tensor_copy(a, b), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_memset(b, 0xab, 12, 100), BP_OK) << bp_last_error();
  std::vector<uint8_t> cb(bytes);
  ASSERT_EQ(bp_tensor_get(b, cb.data(), 0, bytes), BP_OK);
  EXPECT_EQ(std::memcmp(cb.data(), back.data(), 12), 0);
  for (size_t i = 12; i < 112; ++i) ASSERT_EQ(cb[i], 0xab) << i;
  EXPECT_EQ(std::memcmp(cb.data() + 112, back.data() + 112, bytes - 112), 0);
  ASSERT_EQ(bp_buffer_clear(buf, 0), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(b, cb.data(), 0, bytes), BP_OK);
  for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(cb[i], 0) << i;
  bp_buffer_free(buf);
  bp_context_free(ctx);
  bp_backend_free(be);
}

// ---- graphs ----------------------------------------------------------------

// y = relu(W x + c) * 0.5 for W [k, m] (ggml order: a row of W is k long).
struct small_net {
  bp_context *ctx = bp_context_new(0);
  bp_tensor *w, *x, *c, *y;
  int64_t k = 64, m = 32, n = 8;
  bp_graph *graph = nullptr;
  small_net() {
    w = bp_tensor_new_2d(ctx, BP_TYPE_F32, k, m);
    x = bp_tensor_new_2d(ctx, BP_TYPE_F32, k, n);
    c = bp_tensor_new_2d(ctx, BP_TYPE_F32, m, n);
    y = bp_scale(ctx, bp_relu(ctx, bp_add(ctx, bp_mul_mat(ctx, w, x), c)), 0.5f);
    graph = bp_graph_new(ctx, 0);
    bp_graph_build(graph, y);
  }
  ~small_net() {
    bp_graph_free(graph);
    bp_context_free(ctx);
  }
  std::vector<double> reference(const std::vector<float> &wv, const std::vector<float> &xv,
                                const std::vector<float> &cv) const {
    std::vector<double> out(static_cast<size_t>(m * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double s = 0;
        for (int64_t t = 0; t < k; ++t) s += double(wv[size_t(i * k + t)]) * double(xv[size_t(j * k + t)]);
        s += cv[size_t(j * m + i)];
        out[size_t(j * m + i)] = (s > 0 ? s : 0) * 0.5;
      }
    return out;
  }
};

void expect_close(const std::vector<float> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << i;
}

TEST_F(RemoteServed, AGraphMatchesADoubleReferenceAndRunsAgainWithoutBeingSentAgain) {
  start();
  log_capture log(BP_LOG_DEBUG);
  plugin = reload_remote();
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  small_net net;
  ASSERT_NE(net.y, nullptr) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(net.ctx, be, &buf), BP_OK) << bp_last_error();
  for (uint32_t run = 0; run < 3; ++run) {
    auto wv = random_floats(size_t(net.k * net.m), 10 + run), xv = random_floats(size_t(net.k * net.n), 20 + run),
         cv = random_floats(size_t(net.m * net.n), 30 + run);
    bp_tensor_set(net.w, wv.data(), 0, wv.size() * 4);
    bp_tensor_set(net.x, xv.data(), 0, xv.size() * 4);
    bp_tensor_set(net.c, cv.data(), 0, cv.size() * 4);
    ASSERT_EQ(bp_backend_graph_compute(be, net.graph), BP_OK) << bp_last_error();
    std::vector<float> out(size_t(net.m * net.n));
    ASSERT_EQ(bp_tensor_get(net.y, out.data(), 0, out.size() * 4), BP_OK);
    expect_close(out, net.reference(wv, xv, cv));
  }
  EXPECT_EQ(log.count("registered on"), 1) << log.all();
  // A plan registers once more and replays.
  bp_graph_plan *plan = nullptr;
  ASSERT_EQ(bp_graph_plan_new(be, net.graph, &plan), BP_OK) << bp_last_error();
  auto wv = random_floats(size_t(net.k * net.m), 7), xv = random_floats(size_t(net.k * net.n), 8),
       cv = random_floats(size_t(net.m * net.n), 9);
  bp_tensor_set(net.w, wv.data(), 0, wv.size() * 4);
  bp_tensor_set(net.x, xv.data(), 0, xv.size() * 4);
  bp_tensor_set(net.c, cv.data(), 0, cv.size() * 4);
  ASSERT_EQ(bp_graph_plan_compute_async(plan), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_synchronize(be), BP_OK);
  std::vector<float> out(size_t(net.m * net.n));
  ASSERT_EQ(bp_tensor_get(net.y, out.data(), 0, out.size() * 4), BP_OK);
  expect_close(out, net.reference(wv, xv, cv));
  bp_graph_plan_free(plan);
  bp_buffer_free(buf);
  bp_backend_free(be);
}

TEST_F(RemoteServed, TwoServersShareOneGraphThroughTheScheduler) {
  serve_process second;
  ASSERT_TRUE(second.start(serve_cpu())) << second.log();
  start();
  set_remote(server.address() + "," + second.address());
  plugin = reload_remote();
  ASSERT_GE(bp_plugin_device_count(plugin), 2u);
  bp_backend *be[3] = {};
  ASSERT_EQ(bp_backend_new("remote:0", &be[0]), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_new("remote:1", &be[1]), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_new("cpu", &be[2]), BP_OK) << bp_last_error();
  // Weights of layer 1 on the first server, of layer 2 on the second.
  const int64_t k = 48;
  bp_context *w1c = bp_context_new(0), *w2c = bp_context_new(0), *ctx = bp_context_new(0);
  bp_tensor *w1 = bp_tensor_new_2d(w1c, BP_TYPE_F32, k, k);
  bp_tensor *w2 = bp_tensor_new_2d(w2c, BP_TYPE_F32, k, k);
  bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, k, 4);
  bp_tensor_set_flags(x, BP_TENSOR_FLAG_INPUT);
  bp_tensor *h = bp_relu(ctx, bp_mul_mat(ctx, w1, x));
  bp_tensor *y = bp_mul_mat(ctx, w2, h);
  bp_tensor_set_flags(y, BP_TENSOR_FLAG_OUTPUT);
  bp_graph *g = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g, y), BP_OK) << bp_last_error();
  bp_buffer *b1 = nullptr, *b2 = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(w1c, be[0], &b1), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_context_alloc_tensors(w2c, be[1], &b2), BP_OK) << bp_last_error();
  bp_buffer_set_usage(b1, BP_BUFFER_USAGE_WEIGHTS);
  bp_buffer_set_usage(b2, BP_BUFFER_USAGE_WEIGHTS);
  auto w1v = random_floats(size_t(k * k), 1), w2v = random_floats(size_t(k * k), 2),
       xv = random_floats(size_t(k * 4), 3);
  bp_tensor_set(w1, w1v.data(), 0, w1v.size() * 4);
  bp_tensor_set(w2, w2v.data(), 0, w2v.size() * 4);
  bp_sched *sched = bp_sched_new(be, nullptr, 3, 256, false);
  ASSERT_NE(sched, nullptr) << bp_last_error();
  ASSERT_EQ(bp_sched_alloc_graph(sched, g), BP_OK) << bp_last_error();
  bool on0 = false, on1 = false;
  for (size_t i = 0; i < bp_sched_split_count(sched); ++i) {
    bp_sched_split_info s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(bp_sched_split_describe(sched, i, &s), BP_OK);
    on0 = on0 || s.backend == be[0];
    on1 = on1 || s.backend == be[1];
  }
  EXPECT_TRUE(on0 && on1) << "the scheduler did not use both servers";
  ASSERT_EQ(bp_tensor_set(x, xv.data(), 0, xv.size() * 4), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_sched_graph_compute(sched, g), BP_OK) << bp_last_error();
  std::vector<float> out(size_t(k * 4));
  ASSERT_EQ(bp_tensor_get(y, out.data(), 0, out.size() * 4), BP_OK) << bp_last_error();
  std::vector<double> want(size_t(k * 4));
  for (int64_t j = 0; j < 4; ++j) {
    std::vector<double> hv(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += double(w1v[size_t(i * k + t)]) * xv[size_t(j * k + t)];
      hv[size_t(i)] = s > 0 ? s : 0;
    }
    for (int64_t i = 0; i < k; ++i) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += double(w2v[size_t(i * k + t)]) * hv[size_t(t)];
      want[size_t(j * k + i)] = s;
    }
  }
  expect_close(out, want);
  // server= counts the device index within one server.
  bp_backend *second_only = nullptr;
  ASSERT_EQ(bp_backend_new(("remote:server=" + second.address() + ",device=0").c_str(), &second_only), BP_OK)
      << bp_last_error();
  bp_buffer *b3 = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(second_only, 4096, &b3), BP_OK) << bp_last_error();
  bp_buffer_free(b3);
  bp_backend_free(second_only);
  bp_backend *nowhere = nullptr;
  EXPECT_EQ(bp_backend_new("remote:server=127.0.0.1:9,device=0", &nowhere), BP_ERR_NOT_FOUND);
  EXPECT_NE(std::string(bp_last_error()).find("BP_REMOTE"), std::string::npos) << bp_last_error();
  bp_sched_free(sched);
  bp_graph_free(g);
  bp_buffer_free(b1);
  bp_buffer_free(b2);
  bp_context_free(ctx);
  bp_context_free(w1c);
  bp_context_free(w2c);
  for (auto *b : be) bp_backend_free(b);
}

}  // namespace
