// api.cpp: the entry points of backplane/trace.h, and the per-op summary
// (bp_trace_op_stats) built from the recording's whole-node spans.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "backplane/trace.h"
#include "core/errors.hpp"
#include "core/handles.hpp"
#include "core/liveness.hpp"
#include "core/trace/recorder.hpp"

using namespace bp::core;

extern "C" {

BP_API bp_status bp_trace_start(const char *path) {
  return api_guard([&]() -> bp_status {
    if (path != nullptr && *path == '\0')
      return set_error(BP_ERR_INVALID_ARGUMENT, "bp_trace_start: path is empty (NULL records without a file)");
    std::string why;
    if (!trace::start(path, why)) return set_errorf(BP_ERR_FAILED_PRECONDITION, "bp_trace_start: %s", why.c_str());
    return BP_OK;
  });
}

BP_API bp_status bp_trace_stop(void) {
  return api_guard([&]() -> bp_status {
    if (!trace::on()) return set_error(BP_ERR_FAILED_PRECONDITION, "bp_trace_stop: no trace is recording");
    std::string why;
    if (trace::stop(why)) return BP_OK;
    return set_errorf(BP_ERR_NOT_FOUND, "bp_trace_stop: %s", why.c_str());
  });
}

BP_API bool bp_trace_active(void) { return trace::on(); }

BP_API bp_status bp_trace_op_stats(bp_trace_op_stat *out, size_t capacity, size_t *out_count) {
  return api_guard([&]() -> bp_status {
    if (out_count == nullptr) return set_error(BP_ERR_INVALID_ARGUMENT, "bp_trace_op_stats: out_count is NULL");
    *out_count = 0;
    if (out == nullptr && capacity != 0)
      return set_error(BP_ERR_INVALID_ARGUMENT, "bp_trace_op_stats: out is NULL with a capacity above 0");
    const trace::snapshot s = trace::take_snapshot();
    std::map<std::pair<uint32_t, int>, bp_trace_op_stat> rows;
    for (const trace::event &e : s.events) {
      // Worker spans are parts of a node the whole-node span already counts.
      if (!e.has_node || e.lane != trace::kLaneNodes) continue;
      bp_trace_op_stat &r = rows[{e.track, static_cast<int>(e.node.op)}];
      if (r.count == 0) {
        const std::string &name = e.track < s.tracks.size() ? s.tracks[e.track] : std::string("?");
        std::snprintf(r.backend, sizeof r.backend, "%s", name.c_str());
        r.op = e.node.op;
      }
      ++r.count;
      r.total_ns += e.end - e.begin;
      r.bytes += e.node.bytes;
      r.flops += e.node.flops;
    }
    std::vector<bp_trace_op_stat> sorted;
    sorted.reserve(rows.size());
    for (auto &kv : rows) sorted.push_back(kv.second);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const bp_trace_op_stat &a, const bp_trace_op_stat &b) { return a.total_ns > b.total_ns; });
    for (size_t i = 0; i < sorted.size() && i < capacity; ++i) out[i] = sorted[i];
    *out_count = sorted.size();
    return BP_OK;
  });
}

BP_API uint64_t bp_trace_clock_ns(void) { return trace::now_ns(); }

BP_API bp_status bp_trace_capture_begin(bp_backend *backend) {
  return api_guard([&]() -> bp_status {
    if (!handle_ok(backend, TAG_BACKEND)) return bad_handle("bp_trace_capture_begin", "backend", backend, TAG_BACKEND);
    std::string why;
    if (!trace::capture_begin(backend->ref.ctx, why))
      return set_errorf(BP_ERR_FAILED_PRECONDITION, "bp_trace_capture_begin: %s", why.c_str());
    return BP_OK;
  });
}

BP_API bp_status bp_trace_capture_end(bp_backend *backend, bp_trace_node_time *out, size_t capacity,
                                      size_t *out_count) {
  return api_guard([&]() -> bp_status {
    if (!handle_ok(backend, TAG_BACKEND)) return bad_handle("bp_trace_capture_end", "backend", backend, TAG_BACKEND);
    if (out_count == nullptr) return set_error(BP_ERR_INVALID_ARGUMENT, "bp_trace_capture_end: out_count is NULL");
    *out_count = 0;
    if (out == nullptr && capacity != 0)
      return set_error(BP_ERR_INVALID_ARGUMENT, "bp_trace_capture_end: out is NULL with a capacity above 0");
    std::vector<bp_trace_node_time> times;
    std::string why;
    if (!trace::capture_end(backend->ref.ctx, times, why))
      return set_errorf(BP_ERR_FAILED_PRECONDITION, "bp_trace_capture_end: %s", why.c_str());
    std::copy_n(times.begin(), std::min(capacity, times.size()), out);
    *out_count = times.size();
    return BP_OK;
  });
}

}  // extern "C"
