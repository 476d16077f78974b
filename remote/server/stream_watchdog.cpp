// stream_watchdog.cpp: cancelling idle streams (stream_watchdog.hpp).
#include "stream_watchdog.hpp"

#include <algorithm>

namespace bp::remote::server {

int64_t stream_watchdog::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

stream_watchdog::stream_watchdog(std::chrono::milliseconds idle) : idle_(idle) {
  if (idle_.count() > 0) thread_ = std::thread([this] { run(); });
}

stream_watchdog::~stream_watchdog() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

stream_watchdog::watch::watch(stream_watchdog &dog, grpc::ServerContext *ctx)
    : dog_(dog), ctx_(ctx), last_ns_(now_ns()) {
  std::lock_guard<std::mutex> l(dog_.mu_);
  dog_.watched_.insert(this);
}

stream_watchdog::watch::~watch() {
  // Under the lock: the watchdog never cancels a context whose call returned.
  std::lock_guard<std::mutex> l(dog_.mu_);
  dog_.watched_.erase(this);
}

void stream_watchdog::watch::touch() { last_ns_.store(now_ns()); }

void stream_watchdog::run() {
  const int64_t idle_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(idle_).count();
  // Checked a few times per deadline, at most every 100 ms.
  const auto tick = std::min(std::chrono::milliseconds(100), std::max(std::chrono::milliseconds(5), idle_ / 4));
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, tick, [this] { return stop_; });
    const int64_t now = now_ns();
    for (watch *w : watched_) {
      if (!w->expired_.load() && now - w->last_ns_.load() > idle_ns) {
        w->expired_.store(true);
        w->ctx_->TryCancel();  // Read and Write return false at once
      }
    }
  }
}

}  // namespace bp::remote::server
