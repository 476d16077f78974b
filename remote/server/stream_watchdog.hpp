// stream_watchdog.hpp: ends streams whose peer stopped sending or reading.
// gRPC's synchronous streams block a server thread in Read or Write for as
// long as the peer keeps the connection open without moving data; one
// thread here cancels any stream idle past a deadline, so a stuck client
// holds a thread for at most that long.
#pragma once

#include <grpcpp/server_context.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace bp::remote::server {

class stream_watchdog {
 public:
  // |idle| 0: never cancels.
  explicit stream_watchdog(std::chrono::milliseconds idle);
  ~stream_watchdog();
  stream_watchdog(const stream_watchdog &) = delete;
  stream_watchdog &operator=(const stream_watchdog &) = delete;

  // One stream under watch for as long as it lives; touch() after every
  // message read or written.
  class watch {
   public:
    watch(stream_watchdog &dog, grpc::ServerContext *ctx);
    ~watch();
    watch(const watch &) = delete;
    watch &operator=(const watch &) = delete;
    void touch();
    // True once the watchdog cancelled the stream for idling.
    bool expired() const { return expired_.load(); }

   private:
    friend class stream_watchdog;
    stream_watchdog &dog_;
    grpc::ServerContext *ctx_;
    std::atomic<int64_t> last_ns_;
    std::atomic<bool> expired_{false};
  };

  std::chrono::milliseconds idle() const { return idle_; }

 private:
  void run();
  static int64_t now_ns();

  std::chrono::milliseconds idle_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<watch *> watched_;
  std::thread thread_;
};

}  // namespace bp::remote::server
