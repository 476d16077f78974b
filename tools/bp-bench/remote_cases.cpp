// remote_cases.cpp: bp-bench's remote cases, run when BP_REMOTE names a
// running bp-serve (bp-bench starts none itself; without BP_REMOTE they are
// skipped with one line on stderr). Every case uses remote:0.
//
//   remote/set/64MiB, remote/get/64MiB   bp_tensor_set / bp_tensor_get of 64 MiB
//                                        (the plugin's default chunk, 1 MiB)
//   remote/ref:tcp_loopback/64MiB        the same bytes through a plain TCP
//                                        loopback socket in this process (a
//                                        reader thread acknowledges each 64 MiB)
//   remote/set_async/64MiB/chunk=N,      the backend's transfers with
//   remote/get_async/64MiB/chunk=N       chunk_bytes=N (64 KiB .. 4 MiB)
//   remote/graph_add_4KiB                one ADD of two 4 KiB vectors, a graph
//                                        registered once: each iteration is one
//                                        GraphCompute round trip; p50/p99 in us
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"

namespace bp::bench {
namespace {

constexpr size_t kTransferBytes = size_t{64} << 20;

struct remote_tensor {
  std::string spec;
  bp_backend *be = nullptr;
  bp_context *ctx = nullptr;
  bp_buffer *buf = nullptr;
  bp_tensor *t = nullptr;
};

// Made at a case's first run (a filter that skips the remote cases costs no
// remote memory), kept until release_remote_benches.
std::vector<std::unique_ptr<remote_tensor>> g_tensors;
std::vector<char> g_host;  // 64 MiB of data, sent and received by every transfer case

char *host_data() {
  if (g_host.empty()) {
    g_host.assign(kTransferBytes, 0);
    for (size_t i = 0; i < g_host.size(); i += 4096) g_host[i] = static_cast<char>(i >> 12);
  }
  return g_host.data();
}

// The tensor of |elements| floats on backend |spec|, or nullptr with |why|.
remote_tensor *tensor_on(const std::string &spec, int64_t elements, std::string *why) {
  for (auto &r : g_tensors)
    if (r->spec == spec && bp_tensor_nelements(r->t) == elements) return r.get();
  auto r = std::make_unique<remote_tensor>();
  r->spec = spec;
  if (bp_backend_new(spec.c_str(), &r->be) != BP_OK) {
    *why = spec + ": " + bp_last_error();
    return nullptr;
  }
  r->ctx = bp_context_new(0);
  r->t = bp_tensor_new_1d(r->ctx, BP_TYPE_F32, elements);
  if (!r->t || bp_context_alloc_tensors(r->ctx, r->be, &r->buf) != BP_OK) {
    *why = "allocating on " + spec + ": " + bp_last_error();
    bp_context_free(r->ctx);
    bp_backend_free(r->be);
    return nullptr;
  }
  g_tensors.push_back(std::move(r));
  return g_tensors.back().get();
}

// A connected loopback pair and a reader that consumes |n| bytes per round
// and answers one byte, so the sender measures the whole transfer.
struct loopback {
  int send_fd = -1, recv_fd = -1;
  std::thread reader;
  bool open(size_t n) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listener, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
      close(listener);
      return false;
    }
    send_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(send_fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
      close(listener);
      return false;
    }
    recv_fd = accept(listener, nullptr, nullptr);
    close(listener);
    if (recv_fd < 0) return false;
    const int one = 1;
    setsockopt(send_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(recv_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    reader = std::thread([this, n] {
      std::vector<char> sink(size_t{1} << 20);
      for (;;) {
        size_t got = 0;
        while (got < n) {
          const ssize_t r = ::read(recv_fd, sink.data(), std::min(sink.size(), n - got));
          if (r <= 0) return;
          got += static_cast<size_t>(r);
        }
        const char ack = 1;
        if (::write(recv_fd, &ack, 1) != 1) return;
      }
    });
    return true;
  }
  bool round(const char *data, size_t n) {
    size_t sent = 0;
    while (sent < n) {
      const ssize_t w = ::write(send_fd, data + sent, n - sent);
      if (w <= 0) return false;
      sent += static_cast<size_t>(w);
    }
    char ack = 0;
    return ::read(send_fd, &ack, 1) == 1;
  }
  ~loopback() {
    if (send_fd >= 0) shutdown(send_fd, SHUT_RDWR);
    if (reader.joinable()) reader.join();
    if (send_fd >= 0) close(send_fd);
    if (recv_fd >= 0) close(recv_fd);
  }
};

void register_transfer(const std::string &name, const std::string &spec, bool set, bool async) {
  benchmark::RegisterBenchmark(
      name.c_str(),
      [spec, set, async](benchmark::State &st) {
        std::string why;
        remote_tensor *r = tensor_on(spec, static_cast<int64_t>(kTransferBytes / 4), &why);
        if (!r) {
          st.SkipWithError(why.c_str());
          return;
        }
        char *data = host_data();
        for (auto _ : st) {
          bp_status s = BP_OK;
          if (async) {
            s = set ? bp_backend_tensor_set_async(r->be, r->t, data, 0, kTransferBytes)
                    : bp_backend_tensor_get_async(r->be, r->t, data, 0, kTransferBytes);
            if (s == BP_OK) s = bp_backend_synchronize(r->be);
          } else {
            s = set ? bp_tensor_set(r->t, data, 0, kTransferBytes) : bp_tensor_get(r->t, data, 0, kTransferBytes);
          }
          if (s != BP_OK) {
            st.SkipWithError(bp_last_error());
            break;
          }
        }
        st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(kTransferBytes));
      })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

// One ADD of two 4 KiB vectors on remote:0; every iteration is one round trip.
void graph_round_trip(benchmark::State &st) {
  std::string why;
  remote_tensor *g = tensor_on("remote:0", 1024, &why);  // for its backend
  if (!g) {
    st.SkipWithError(why.c_str());
    return;
  }
  bp_context *ctx = bp_context_new(0);
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1024);
  bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1024);
  bp_tensor *sum = bp_add(ctx, a, b);
  bp_graph *graph = bp_graph_new(ctx, 0);
  bp_buffer *buf = nullptr;
  if (!sum || bp_graph_build(graph, sum) != BP_OK || bp_context_alloc_tensors(ctx, g->be, &buf) != BP_OK) {
    st.SkipWithError(bp_last_error());
    bp_graph_free(graph);
    bp_context_free(ctx);
    return;
  }
  std::vector<float> in(1024);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  bp_tensor_set(a, in.data(), 0, in.size() * 4);
  bp_tensor_set(b, in.data(), 0, in.size() * 4);
  std::vector<double> us;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    if (bp_backend_graph_compute(g->be, graph) != BP_OK) {
      st.SkipWithError(bp_last_error());
      break;
    }
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  // A wrong sum must not post a figure.
  float check[4] = {};
  bp_tensor_get(sum, check, 4 * 1000, sizeof check);
  for (int i = 0; i < 4; ++i)
    if (check[i] != 2.0f * static_cast<float>(1000 + i)) st.SkipWithError("the remote ADD gave a wrong sum");
  if (!us.empty()) {
    std::sort(us.begin(), us.end());
    st.counters["p50_us"] = us[us.size() / 2];
    st.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  }
  bp_buffer_free(buf);
  bp_graph_free(graph);
  bp_context_free(ctx);
}

void loopback_reference(benchmark::State &st) {
  loopback lb;
  if (!lb.open(kTransferBytes)) {
    st.SkipWithError("cannot open a loopback socket pair");
    return;
  }
  for (auto _ : st)
    if (!lb.round(host_data(), kTransferBytes)) {
      st.SkipWithError("loopback transfer failed");
      break;
    }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(kTransferBytes));
}

}  // namespace

void register_remote_benches() {
  const char *servers = std::getenv("BP_REMOTE");
  if (!servers || !*servers) {
    std::fprintf(stderr,
                 "bp-bench: remote cases skipped: set BP_REMOTE=host:port of a running bp-serve "
                 "(bp-serve --listen 127.0.0.1:0 --devices cpu) to run them\n");
    return;
  }
  register_transfer("remote/set/64MiB", "remote:0", true, false);
  register_transfer("remote/get/64MiB", "remote:0", false, false);
  benchmark::RegisterBenchmark("remote/ref:tcp_loopback/64MiB", loopback_reference)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (int kib : {64, 256, 1024, 4096}) {
    const std::string spec = "remote:0,chunk_bytes=" + std::to_string(kib * 1024);
    register_transfer("remote/set_async/64MiB/chunk=" + std::to_string(kib) + "KiB", spec, true, true);
    register_transfer("remote/get_async/64MiB/chunk=" + std::to_string(kib) + "KiB", spec, false, true);
  }
  benchmark::RegisterBenchmark("remote/graph_add_4KiB", graph_round_trip)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void release_remote_benches() {
  for (auto &r : g_tensors) {
    bp_buffer_free(r->buf);
    bp_context_free(r->ctx);
    bp_backend_free(r->be);
  }
  g_tensors.clear();
  g_host.clear();
}

}  // namespace bp::bench
