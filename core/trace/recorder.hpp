// recorder.hpp: the in-memory trace recorder behind backplane/trace.h and
// the host table's tracing slots (docs/performance.md, "Tracing").
//
// One process-wide recording: a flag that every instrumented place tests
// first (the one branch tracing costs when off), and a list of events under
// one lock. One lock rather than per-thread buffers: plugin worker threads
// are not the core's, and a per-thread buffer would have to outlive the
// thread (and the plugin that made it). The lock spins (a sleeping mutex
// made each contended span a system call), and storage in fixed chunks (no
// allocation per span, recorded events never move) keeps a span cheap
// (docs/performance.md has the figures).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "backplane/plugin.h"
#include "backplane/trace.h"

namespace bp::core::trace {

extern std::atomic<bool> g_recording;

// The branch every instrumented place takes first.
inline bool on() { return g_recording.load(std::memory_order_relaxed); }

// The trace clock: steady_clock in nanoseconds (what plugins get as
// bp_host_api.trace_now).
uint64_t now_ns();

// The tracks of one backend (a Chrome trace "process"): lane 0 host calls,
// lane 1 whole nodes, lane 2 + i worker thread i.
constexpr uint32_t kLaneHost = 0;
constexpr uint32_t kLaneNodes = 1;
constexpr uint32_t kLaneWorker0 = 2;

// What a node span keeps of its tensor: the tensor may be gone when the
// file is written.
struct node_info {
  bp_op op = BP_OP_NONE;
  bp_type type = BP_TYPE_F32;
  int64_t ne[BP_MAX_DIMS] = {};
  int n_src = 0;
  bp_type src_type[BP_MAX_SRC] = {};
  int64_t src_ne[BP_MAX_SRC][BP_MAX_DIMS] = {};
  uint64_t flops = 0, bytes = 0;
  char name[BP_MAX_NAME] = {};
};

struct event {
  uint64_t begin = 0, end = 0;
  uint32_t track = 0;  // index into the recording's track names
  uint32_t lane = 0;
  std::string name;           // the label ("split 3", "copy", an op's name: short, so no allocation)
  const char *category = "";  // static: "sched", "copy", "plan", "submit", "sync", "node"
  std::string args;           // a JSON object's members, already written ("" for none)
  bool has_node = false;
  bool node_full = false;  // a whole-node span: shapes, sources, bytes and FLOPs filled
  node_info node;
};

// Names the track of the backend whose plugin ctx is |ctx| (a backend is
// known to its plugin by its ctx; span reports carry it). Called at every
// backend creation, traced or not; a ctx reused by a later backend gets that
// backend's name and a new track. The second backend of one name in the
// process gets " #2", the third " #3", ...
void name_backend(const void *ctx, const std::string &name);
// Called when the backend is freed.
void forget_backend(const void *ctx);

// The track of |ctx| (one named "?" when it was never named).
uint32_t track_of(const void *ctx);

// Appends |e| (moved) when a recording runs; |track_ctx| names its track
// (track_of), looked up under the same lock.
void record(const void *track_ctx, event &&e);

// Fills the node fields of |e| from |t|: everything when |full| (a
// whole-node span), else the op and the name (a worker's part, which the
// whole-node span describes already).
void describe_node(const bp_tensor *t, bool full, event &e);

// Starts and stops the recording (trace.h's semantics); the env variant
// runs once, at the first backend creation.
bool start(const char *path, std::string &why);
bool stop(std::string &why);
void start_from_env_once();

// A copy of what the file and the summary need, taken under the lock.
struct snapshot {
  uint64_t origin = 0;
  std::vector<std::string> tracks;
  std::vector<event> events;
};
snapshot take_snapshot();

// Writes |s| as Chrome trace-event JSON to |path|; false with |why|.
bool write_chrome_json(const snapshot &s, const std::string &path, std::string &why);

// Per-backend captures of node times (capture.cpp, bp_trace_capture_begin):
// how many run, so that the host slots' test stays one load when none does.
extern std::atomic<int> g_captures;
inline bool capturing() { return g_captures.load(std::memory_order_relaxed) > 0; }
// Keeps |span| (a whole-node span) when its backend has a capture.
void capture_node(const bp_trace_node_span *span);
bool capture_begin(const void *ctx, std::string &why);
bool capture_end(const void *ctx, std::vector<bp_trace_node_time> &out, std::string &why);
// Ends the capture of a backend being freed, if it has one.
void capture_drop(const void *ctx);

// The host table's slots (registry/loader.cpp fills bp_host_api with them).
int host_trace_enabled(void *host);
uint64_t host_trace_now(void *host);
void host_trace_node(void *host, const bp_trace_node_span *span);

}  // namespace bp::core::trace
