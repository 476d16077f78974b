// The remote plugin when things go wrong: a wrong or missing token, a server
// killed in the middle of a graph (DEVICE_LOST within 2 s, no hang), a
// restarted server (a new session works, the old handles are refused), a
// client killed in the middle of a transfer (the server frees its session),
// and two clients at once.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "remote_harness.hpp"
#include "support/find.hpp"

extern char **environ;

namespace {

using bp_test::log_capture;
using bp_test::reload_remote;
using bp_test::serve_cpu;
using bp_test::serve_process;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

void set_remote(const std::string &servers) {
  setenv("BP_REMOTE", servers.c_str(), 1);
  unsetenv("BP_REMOTE_TOKEN_FILE");
  unsetenv("BP_REMOTE_TIMEOUT_MS");
  unsetenv("BP_REMOTE_CHUNK_BYTES");
}

std::string write_temp(const std::string &text) {
  char path[] = "/tmp/bp-remote-token.XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

pid_t spawn(const std::vector<std::string> &args) {
  std::vector<char *> argv;
  std::vector<std::string> copy = args;
  for (auto &a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct RemoteFaults : ::testing::Test {
  void SetUp() override { BP_REQUIRE_SERVE(); }
  void TearDown() override {
    if (bp_plugin *p = bp_test::find_plugin("remote")) bp_plugin_unload(p);
  }
};

TEST_F(RemoteFaults, AWrongOrMissingTokenIsRefusedNamingTheTokenFile) {
  const std::string good = write_temp("s3cret-token-of-the-test-0123456789\n");
  const std::string bad = write_temp("not-the-token-at-all-0123456789\n");
  serve_process server;
  ASSERT_TRUE(server.start(serve_cpu({"--token-file", good}))) << server.log();
  for (const char *token_file : {"", bad.c_str()}) {
    set_remote(server.address());
    if (*token_file) setenv("BP_REMOTE_TOKEN_FILE", token_file, 1);
    bp_plugin *p = reload_remote();
    const char *why = nullptr;
    EXPECT_NE(bp_plugin_status(p, &why), BP_OK);
    EXPECT_NE(std::string(why ? why : "").find("token rejected: check BP_REMOTE_TOKEN_FILE"), std::string::npos)
        << (why ? why : "");
  }
  set_remote(server.address());
  setenv("BP_REMOTE_TOKEN_FILE", good.c_str(), 1);
  bp_plugin *p = reload_remote();
  EXPECT_GE(bp_plugin_device_count(p), 1u);
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  bp_backend_free(be);
  unlink(good.c_str());
  unlink(bad.c_str());
}

// A chain of products long enough to run for seconds on the server.
struct long_chain {
  bp_context *ctx = bp_context_new(0);
  bp_tensor *w, *x, *y;
  bp_graph *graph = bp_graph_new(ctx, 0);
  explicit long_chain(int links) {
    w = bp_tensor_new_2d(ctx, BP_TYPE_F32, 1024, 1024);
    x = bp_tensor_new_2d(ctx, BP_TYPE_F32, 1024, 256);
    y = x;
    for (int i = 0; i < links; ++i) y = bp_mul_mat(ctx, w, y);
    bp_graph_build(graph, y);
  }
  ~long_chain() {
    bp_graph_free(graph);
    bp_context_free(ctx);
  }
};

TEST_F(RemoteFaults, AServerKilledMidGraphIsDeviceLostWithinTwoSecondsAndARestartedOneServesAgain) {
  serve_process server;
  ASSERT_TRUE(server.start(serve_cpu())) << server.log();
  set_remote(server.address());
  bp_plugin *p = reload_remote();
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  long_chain chain(400);
  ASSERT_NE(chain.y, nullptr) << bp_last_error();
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(chain.ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> ones(1024 * 1024, 1.0f / 1024);
  ASSERT_EQ(bp_tensor_set(chain.w, ones.data(), 0, ones.size() * 4), BP_OK);
  std::atomic<bool> done{false};
  bp_status compute_status = BP_OK;
  std::string compute_error;
  std::thread worker([&] {
    compute_status = bp_backend_graph_compute(be, chain.graph);
    compute_error = bp_last_error();
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_FALSE(done.load()) << "the graph finished before the server was killed: make the chain longer";
  const auto killed = clock_type::now();
  server.stop(SIGKILL);
  while (!done.load() && ms_since(killed) < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double waited = ms_since(killed);
  worker.join();
  std::printf("graph_compute returned %.0f ms after the server was killed\n", waited);
  EXPECT_LT(waited, 2000.0) << "graph_compute returned " << waited << " ms after the server died";
  EXPECT_EQ(compute_status, BP_ERR_DEVICE_LOST) << compute_error;
  EXPECT_NE(compute_error.find(server.address()), std::string::npos) << compute_error;
  // Every later call on the lost device fails at once.
  auto t0 = clock_type::now();
  EXPECT_EQ(bp_tensor_set(chain.w, ones.data(), 0, 4096), BP_ERR_DEVICE_LOST);
  EXPECT_LT(ms_since(t0), 200.0);

  // The server comes back on the same port. Old handles are refused (an
  // error, never a crash); a fresh load of the plugin opens a new session.
  serve_process again;
  ASSERT_TRUE(again.start(serve_cpu(), server.address())) << again.log();
  EXPECT_EQ(bp_tensor_set(chain.w, ones.data(), 0, 4096), BP_ERR_DEVICE_LOST);
  EXPECT_NE(bp_backend_graph_compute(be, chain.graph), BP_OK);
  bp_buffer_free(buf);
  bp_backend_free(be);
  EXPECT_EQ(bp_plugin_unload(p), BP_OK) << bp_last_error();
  p = reload_remote();
  bp_backend *fresh = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &fresh), BP_OK) << bp_last_error();
  long_chain small(1);
  bp_buffer *b2 = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(small.ctx, fresh, &b2), BP_OK) << bp_last_error();
  std::vector<float> xs(1024 * 256, 2.0f);
  ASSERT_EQ(bp_tensor_set(small.w, ones.data(), 0, ones.size() * 4), BP_OK);
  ASSERT_EQ(bp_tensor_set(small.x, xs.data(), 0, xs.size() * 4), BP_OK);
  ASSERT_EQ(bp_backend_graph_compute(fresh, small.graph), BP_OK) << bp_last_error();
  float out[4];
  ASSERT_EQ(bp_tensor_get(small.y, out, 0, sizeof out), BP_OK);
  for (float v : out) EXPECT_NEAR(v, 2.0, 1e-5);  // each output: 1024 * (1/1024) * 2
  bp_buffer_free(b2);
  bp_backend_free(fresh);
}

TEST_F(RemoteFaults, AServerThatDiesIdleIsNoticedBeforeTheNextCall) {
  serve_process server;
  ASSERT_TRUE(server.start(serve_cpu())) << server.log();
  set_remote(server.address());
  reload_remote();
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1024);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  server.stop(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the Lifeline reader notices
  std::vector<float> v(1024, 1.0f);
  const auto t0 = clock_type::now();
  EXPECT_EQ(bp_tensor_set(t, v.data(), 0, 4096), BP_ERR_DEVICE_LOST);
  EXPECT_LT(ms_since(t0), 100.0) << "the call went to the network instead of failing at once";
  EXPECT_NE(std::string(bp_last_error()).find("Lifeline"), std::string::npos) << bp_last_error();
  bp_buffer_free(buf);
  bp_context_free(ctx);
  bp_backend_free(be);
}

// Run by the next test in a child process (this binary, filtered to this
// test, with BP_REMOTE_TEST_CHILD=transfer): sends 64 MiB over and over
// until it is killed.
TEST(RemoteChild, EndlessTransfer) {
  const char *role = std::getenv("BP_REMOTE_TEST_CHILD");
  if (!role || std::string(role) != "transfer") GTEST_SKIP() << "run by AClientKilledMidTransfer only";
  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("remote:0", &be), BP_OK) << bp_last_error();
  bp_context *ctx = bp_context_new(0);
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 16 << 20);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, be, &buf), BP_OK) << bp_last_error();
  std::vector<float> v(16 << 20, 1.0f);
  std::fprintf(stderr, "child: transferring\n");
  for (;;) ASSERT_EQ(bp_tensor_set(t, v.data(), 0, v.size() * 4), BP_OK) << bp_last_error();
}

TEST_F(RemoteFaults, AClientKilledMidTransferHasItsSessionFreed) {
  serve_process server;
  // One session at a time: a second client gets in only once the first
  // client's session was freed.
  ASSERT_TRUE(server.start(serve_cpu({"--max-clients", "1"}))) << server.log();
  set_remote(server.address());
  setenv("BP_REMOTE_TEST_CHILD", "transfer", 1);
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof self - 1), 0);
  const pid_t child = spawn({self, "--gtest_filter=RemoteChild.EndlessTransfer"});
  unsetenv("BP_REMOTE_TEST_CHILD");
  ASSERT_GT(child, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well inside its transfers
  // The server is full while the child lives.
  bp_plugin *p = reload_remote();
  const char *why = nullptr;
  EXPECT_NE(bp_plugin_status(p, &why), BP_OK) << "a second session was allowed beside the child's";
  kill(child, SIGKILL);
  wait_exit(child);
  log_capture quiet(BP_LOG_ERROR);  // each refused try is a warning
  const auto t0 = clock_type::now();
  bool in = false;
  while (!in && ms_since(t0) < 5000) {
    p = reload_remote();
    in = bp_plugin_status(p, &why) == BP_OK;
    if (!in) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(in) << "the killed client's session was not freed: " << (why ? why : "") << "\n" << server.log();
}

TEST_F(RemoteFaults, TwoClientsAtOnceBothGetTheRightLogits) {
  serve_process server;
  ASSERT_TRUE(server.start(serve_cpu())) << server.log();
  set_remote(server.address());
  const std::string run = std::string(BP_TEST_BIN_DIR) + "/bp-run";
  // Under AddressSanitizer, LeakSanitizer's exit-time tracer crashed (signal
  // 11 while stopping gRPC's threads) in one of two such children, failing
  // the exit status with no leak found. These children skip the leak check;
  // Remote.RunMatchesCpuAlone runs bp-run on a remote device with it.
  const char *asan = std::getenv("ASAN_OPTIONS");
  const std::string saved = asan ? asan : "";
  setenv("ASAN_OPTIONS", (saved.empty() ? std::string("detect_leaks=0") : saved + ":detect_leaks=0").c_str(), 1);
  const pid_t a = spawn({run, "--device", "remote:0", "--runs", "5"});
  const pid_t b = spawn({run, "--device", "remote:0", "--runs", "5"});
  if (asan)
    setenv("ASAN_OPTIONS", saved.c_str(), 1);
  else
    unsetenv("ASAN_OPTIONS");
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_EQ(wait_exit(a), 0);
  EXPECT_EQ(wait_exit(b), 0);
}

}  // namespace
