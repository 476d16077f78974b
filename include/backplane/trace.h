/* trace.h: record where a Backplane process spends its time.
 *
 * What it is: a recorder of timed spans that writes a Chrome trace-event
 * JSON file (Perfetto, chrome://tracing), and the per-op summary the tools
 * print with --profile. Every backend gets a track group: "host calls"
 * (scheduler splits, copies between backends, graph plan builds, graph
 * submissions, synchronize), "nodes" (each node from start to finish, with
 * its op, types, shapes, bytes and FLOPs) and, for plugins with worker
 * threads, one track per worker. docs/performance.md ("Tracing") says what
 * each span measures and which plugins report nodes.
 *
 * Setting BP_TRACE=FILE.json in the environment starts a recording when the
 * process creates its first backend and writes FILE.json at bp_trace_stop or
 * at process exit; a bp_trace_start before that wins over BP_TRACE.
 *
 * Errors follow backplane.h: calls return a bp_status and bp_last_error()
 * names the cause. Threads: every call here may be made from any thread; the
 * recording itself is thread-safe. Off, tracing costs one branch per node.
 */
#ifndef BACKPLANE_TRACE_H_
#define BACKPLANE_TRACE_H_

#include "backplane/backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Starts a recording (dropping the previous one's events). |path|: the file
 * bp_trace_stop writes, or NULL to record only for bp_trace_op_stats.
 * FAILED_PRECONDITION while a recording runs; INVALID_ARGUMENT for "". */
BP_API bp_status bp_trace_start(const char *path);

/* Stops the recording and writes its file (when bp_trace_start named one).
 * The events stay for bp_trace_op_stats until the next start. NOT_FOUND
 * (with the path and the system's reason) when the file cannot be written;
 * FAILED_PRECONDITION when nothing records. */
BP_API bp_status bp_trace_stop(void);

/* True while a recording runs (started by bp_trace_start or BP_TRACE). */
BP_API bool bp_trace_active(void);

/* One row of the per-op summary: the node spans of one op on one backend. */
typedef struct bp_trace_op_stat {
  char backend[64]; /* the backend's name, e.g. "cpu:0" */
  bp_op op;
  uint64_t count;    /* nodes */
  uint64_t total_ns; /* their times, each from start to finish */
  uint64_t bytes;    /* bp_op_bytes of those nodes, summed */
  uint64_t flops;    /* bp_op_flops of those nodes, summed */
} bp_trace_op_stat;

/* The per-op summary of the current or last recording, largest total_ns
 * first. Writes at most |capacity| rows to |out| (may be NULL when capacity
 * is 0) and the number of rows there are to *out_count. */
BP_API bp_status bp_trace_op_stats(bp_trace_op_stat *out, size_t capacity, size_t *out_count);

/* The trace clock: the host's steady clock in nanoseconds, the clock of
 * every span and of bp_trace_node_time. */
BP_API uint64_t bp_trace_clock_ns(void);

/* One node's time from a capture: the node as its backend's plugin reported
 * it (valid as long as the graph it came from), its start and end on
 * bp_trace_clock_ns()'s clock. */
typedef struct bp_trace_node_time {
  const bp_tensor *node;
  uint64_t begin_ns;
  uint64_t end_ns;
} bp_trace_node_time;

/* Starts keeping the node times that |backend|'s plugin reports, whether or
 * not a recording runs: a program that wants one graph's node times (the
 * remote server answering a traced client) captures them without a trace.
 * While any capture runs, plugins are told that tracing is on (they time
 * their nodes), and nothing is recorded unless a recording runs too.
 * INVALID_ARGUMENT for a bad handle; FAILED_PRECONDITION when |backend|
 * already has a capture. */
BP_API bp_status bp_trace_capture_begin(bp_backend *backend);

/* Ends |backend|'s capture. Writes at most |capacity| node times to |out|
 * (may be NULL when capacity is 0), in the order the plugin reported them,
 * and how many there were to *out_count. A node the plugin reported twice
 * (a vulkan graph replayed) appears twice. FAILED_PRECONDITION when
 * |backend| has no capture. */
BP_API bp_status bp_trace_capture_end(bp_backend *backend, bp_trace_node_time *out, size_t capacity, size_t *out_count);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_TRACE_H_ */
