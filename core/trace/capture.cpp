// capture.cpp: per-backend captures of node times (bp_trace_capture_begin),
// the way a program gets one graph's node times without a recording: the
// remote server answers a traced client's GraphCompute with them.
#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "core/trace/recorder.hpp"

namespace bp::core::trace {

std::atomic<int> g_captures{0};

namespace {

struct captures {
  std::mutex mutex;
  std::unordered_map<const void *, std::vector<bp_trace_node_time>> by_ctx;  // by the plugin's backend ctx
};

// Leaked on purpose, like the recording's state: a plugin thread may report
// a span while the process exits.
captures &caps() {
  static captures *c = new captures;
  return *c;
}

}  // namespace

void capture_node(const bp_trace_node_span *span) {
  captures &c = caps();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_ctx.find(span->backend);
  if (it == c.by_ctx.end()) return;
  it->second.push_back(bp_trace_node_time{span->node, span->begin_ns, std::max(span->end_ns, span->begin_ns)});
}

bool capture_begin(const void *ctx, std::string &why) {
  captures &c = caps();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.by_ctx.emplace(ctx, std::vector<bp_trace_node_time>{}).second) {
    why = "the backend already has a capture: end it with bp_trace_capture_end first";
    return false;
  }
  g_captures.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool capture_end(const void *ctx, std::vector<bp_trace_node_time> &out, std::string &why) {
  captures &c = caps();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_ctx.find(ctx);
  if (it == c.by_ctx.end()) {
    why = "the backend has no capture: start one with bp_trace_capture_begin";
    return false;
  }
  out = std::move(it->second);
  c.by_ctx.erase(it);
  g_captures.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void capture_drop(const void *ctx) {
  captures &c = caps();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.by_ctx.erase(ctx) != 0) g_captures.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace bp::core::trace
