// recorder.cpp: the recording's state, its start and stop (BP_TRACE
// included), the backend tracks and the host table's tracing slots.
#include "core/trace/recorder.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "backplane/backplane.h"
#include "core/ops_internal.hpp"  // op_flops, op_bytes

namespace bp::core::trace {

std::atomic<bool> g_recording{false};

namespace {

// The recorder's lock. Spans end together (a product's workers reach its
// barrier at once), and with a std::mutex the loser of each race sleeps in
// the kernel and is woken by a system call, which on a small model's
// microsecond nodes cost as much as the nodes. An event's copy takes a few
// hundred nanoseconds, so the loser spins, yielding once it has waited
// long (the holder may have been preempted, or be taking a snapshot).
class spin_lock {
 public:
  void lock() noexcept {
    for (int spins = 0;; ++spins) {
      if (!held_.exchange(true, std::memory_order_acquire)) return;
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < kSpins) {
          relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpins = 512;
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  std::atomic<bool> held_{false};
};

struct state {
  spin_lock mutex;
  std::string path;  // "" when the recording only feeds the summary
  uint64_t origin = 0;
  // Fixed-capacity chunks: a recorded event never moves and a span costs no
  // allocation but one per kChunk events (a std::deque of events this size
  // allocates a block per event).
  std::vector<std::vector<event>> chunks;
  std::unordered_map<const void *, uint32_t> track_by_ctx;
  std::vector<std::string> tracks;  // stable across recordings
  std::vector<std::string> bases;   // per track: the backend's own name
};

// Leaked on purpose: plugin threads may report a span while the process
// exits, after namespace-scope objects were destroyed.
state &st() {
  static state *s = new state;
  return *s;
}

std::atomic<bool> g_env_checked{false};

constexpr size_t kChunk = 4096;

bool start_locked(state &s, const char *path, std::string &why) {
  if (on()) {
    why = "a trace is already recording" + (s.path.empty() ? std::string() : " to '" + s.path + "'") +
          ": call bp_trace_stop first";
    return false;
  }
  s.path = path ? path : "";
  s.chunks.clear();
  s.origin = now_ns();
  g_recording.store(true, std::memory_order_release);
  return true;
}

// Writes the file of a recording still running at exit (BP_TRACE, or a
// bp_trace_start without its stop): the trace of a process that never
// stopped it is the one most wanted.
struct exit_writer {
  ~exit_writer() {
    if (!on()) return;
    std::string why;
    stop(why);  // nowhere left to report a failure
  }
} g_exit_writer;

}  // namespace

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void name_backend(const void *ctx, const std::string &name) {
  state &s = st();
  std::lock_guard<spin_lock> lock(s.mutex);
  // Each backend of a process gets a track a reader can tell apart, even
  // when an earlier one had the same name (bp-run's reference cpu and the
  // cpu it measures are both "cpu:0").
  const auto same = static_cast<size_t>(std::count(s.bases.begin(), s.bases.end(), name));
  s.track_by_ctx[ctx] = static_cast<uint32_t>(s.tracks.size());
  s.tracks.push_back(same ? name + " #" + std::to_string(same + 1) : name);
  s.bases.push_back(name);
}

void forget_backend(const void *ctx) {
  state &s = st();
  std::lock_guard<spin_lock> lock(s.mutex);
  // A span reported after this (a plugin bug) lands on a "?" track rather
  // than on the track of a later backend that reuses the address.
  s.track_by_ctx.erase(ctx);
}

namespace {
uint32_t track_locked(state &s, const void *ctx) {
  auto it = s.track_by_ctx.find(ctx);
  if (it != s.track_by_ctx.end()) return it->second;
  const auto id = static_cast<uint32_t>(s.tracks.size());
  s.track_by_ctx[ctx] = id;
  s.tracks.emplace_back("?");
  s.bases.emplace_back("?");
  return id;
}
}  // namespace

uint32_t track_of(const void *ctx) {
  state &s = st();
  std::lock_guard<spin_lock> lock(s.mutex);
  return track_locked(s, ctx);
}

void record(const void *track_ctx, event &&e) {
  state &s = st();
  std::lock_guard<spin_lock> lock(s.mutex);
  // Checked again under the lock: a span that ends after bp_trace_stop took
  // its snapshot belongs to no recording.
  if (!on()) return;
  e.track = track_locked(s, track_ctx);
  if (s.chunks.empty() || s.chunks.back().size() == s.chunks.back().capacity()) {
    s.chunks.emplace_back();
    s.chunks.back().reserve(kChunk);
  }
  s.chunks.back().push_back(std::move(e));
}

void describe_node(const bp_tensor *t, bool full, event &e) {
  e.has_node = true;
  e.node_full = full;
  node_info &n = e.node;
  n.op = t->op;
  n.type = t->type;
  std::memcpy(n.name, t->name, sizeof n.name);
  n.name[sizeof n.name - 1] = '\0';
  e.name = bp_op_name(t->op);
  e.category = "node";
  if (!full) return;
  std::memcpy(n.ne, t->ne, sizeof n.ne);
  n.n_src = 0;
  for (const bp_tensor *src : t->src) {
    if (src == nullptr) continue;
    n.src_type[n.n_src] = src->type;
    std::memcpy(n.src_ne[n.n_src], src->ne, sizeof n.src_ne[0]);
    ++n.n_src;
  }
  // The node passed validate_node when it was submitted.
  n.flops = op_flops(t);
  n.bytes = op_bytes(t);
}

bool start(const char *path, std::string &why) {
  g_env_checked.store(true);  // an explicit start wins over BP_TRACE
  state &s = st();
  std::lock_guard<spin_lock> lock(s.mutex);
  return start_locked(s, path, why);
}

void start_from_env_once() {
  if (g_env_checked.load(std::memory_order_relaxed) || g_env_checked.exchange(true)) return;
  // secure_getenv: a setuid program must not write where its caller says.
  const char *path = secure_getenv("BP_TRACE");
  if (path == nullptr || *path == '\0') return;
  state &s = st();
  std::lock_guard<spin_lock> lock(s.mutex);
  std::string why;
  start_locked(s, path, why);
}

snapshot take_snapshot() {
  state &s = st();
  std::lock_guard<spin_lock> lock(s.mutex);
  snapshot out;
  out.origin = s.origin;
  out.tracks = s.tracks;
  size_t n = 0;
  for (const auto &c : s.chunks) n += c.size();
  out.events.reserve(n);
  for (const auto &c : s.chunks) out.events.insert(out.events.end(), c.begin(), c.end());
  return out;
}

bool stop(std::string &why) {
  state &s = st();
  std::string path;
  {
    std::lock_guard<spin_lock> lock(s.mutex);
    if (!on()) {
      why = "no trace is recording: call bp_trace_start first";
      return false;
    }
    g_recording.store(false, std::memory_order_release);
    path = s.path;
  }
  if (path.empty()) return true;
  return write_chrome_json(take_snapshot(), path, why);
}

int host_trace_enabled(void *) { return on() || capturing() ? 1 : 0; }

uint64_t host_trace_now(void *) { return now_ns(); }

void host_trace_node(void *, const bp_trace_node_span *span) {
  // Called from plugin code that may be noexcept: nothing may escape.
  try {
    if (span == nullptr || span->struct_size < offsetof(bp_trace_node_span, end_ns) + sizeof span->end_ns ||
        span->node == nullptr)
      return;
    if (capturing() && span->thread < 0) capture_node(span);
    if (!on()) return;
    event e;
    e.begin = span->begin_ns;
    e.end = std::max(span->end_ns, span->begin_ns);
    const bool whole = span->thread < 0;
    e.lane = whole ? kLaneNodes : kLaneWorker0 + static_cast<uint32_t>(span->thread);
    describe_node(span->node, whole, e);
    record(span->backend, std::move(e));
  } catch (...) {
    // Out of memory while tracing: the span is lost, the computation is not.
  }
}

}  // namespace bp::core::trace
