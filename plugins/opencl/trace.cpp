// trace.cpp: node times from OpenCL profiling events, reported through the
// host table's tracing slots (docs/performance.md, "Tracing").
//
// Profiling is on only while a trace records: a traced graph runs on a second
// queue made with CL_QUEUE_PROFILING_ENABLE, and the backend switches back at
// the first untraced graph (each switch finishes the other queue first, so
// the backend's commands keep their order). Each command of a traced node
// gets an event; synchronize, after clFinish, reads them and reports one
// span per node.
//
// Clocks: the device's profiling clock is not the host's, and what OpenCL
// offers to relate them (clGetDeviceAndHostTimer) is 2.1, which PoCL and
// many drivers lack; a command's QUEUED time is no anchor either (PoCL takes
// it when it submits the command, not at clEnqueue). What always holds: no
// command starts before the host enqueued it, and the last one ended before
// clFinish returned. Each harvest places the device's START and END at one
// offset, the earliest those bounds allow (exact when the device was idle as
// a command arrived, as it is for a graph's first node); a synchronize that
// came long after the work ended changes nothing.
#include <CL/cl.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend.hpp"

namespace bp::opencl {

bp_status trace_select_queue(backend_ctx *be, bool tracing, bp_error *err) {
  cl_command_queue want = tracing ? be->profiled_queue : be->plain_queue;
  if (tracing && want == nullptr) {
    cl_int rc = CL_SUCCESS;
    be->profiled_queue = clCreateCommandQueue(be->dev->context, be->dev->device, CL_QUEUE_PROFILING_ENABLE, &rc);
    if (!be->profiled_queue || rc != CL_SUCCESS)
      return device_fail(be->dev, rc, cl_site::setup, "creating a profiling queue for a trace", err);
    want = be->profiled_queue;
  }
  if (want == be->queue) return BP_OK;
  cl_int rc = clFinish(be->queue);
  if (rc != CL_SUCCESS) return device_fail(be->dev, rc, cl_site::wait, "clFinish", err);
  be->queue = want;
  return BP_OK;
}

uint64_t trace_before_enqueue(const backend_ctx *be) {
  return be->traced_node ? bp_host_trace_now(be->dev->plugin->host) : 0;
}

void trace_enqueued(backend_ctx *be, cl_event ev, uint64_t before_ns) {
  if (ev == nullptr) return;
  try {
    be->traced.push_back({be->traced_node, ev, before_ns});
  } catch (...) {
    clReleaseEvent(ev);  // out of memory while tracing: this command goes untimed
  }
}

namespace {

bool profile_of(cl_event ev, cl_ulong *start, cl_ulong *end) {
  return clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof *start, start, nullptr) == CL_SUCCESS &&
         clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof *end, end, nullptr) == CL_SUCCESS &&
         *end >= *start;
}

struct timed {
  const bp_tensor *node;
  int64_t enqueued, start, end;  // host ns; device ns; device ns
};

}  // namespace

void trace_harvest(backend_ctx *be, uint64_t finished_ns, bool report) {
  const bp_host_api *host = be->dev->plugin->host;
  report = report && bp_host_trace_enabled(host);
  std::vector<timed> cmds;
  for (const auto &c : be->traced) {
    cl_ulong start = 0, end = 0;
    if (report && profile_of(c.ev, &start, &end))
      cmds.push_back(
          {c.node, static_cast<int64_t>(c.enqueued_ns), static_cast<int64_t>(start), static_cast<int64_t>(end)});
    clReleaseEvent(c.ev);
  }
  be->traced.clear();
  if (cmds.empty()) return;
  // host = device + offset, with offset >= enqueued - start for every
  // command and offset <= finished - end for the last.
  int64_t lower = INT64_MIN, last_end = INT64_MIN;
  for (const timed &c : cmds) {
    lower = std::max(lower, c.enqueued - c.start);
    last_end = std::max(last_end, c.end);
  }
  const int64_t offset = std::min(lower, static_cast<int64_t>(finished_ns) - last_end);
  for (size_t i = 0; i < cmds.size();) {
    // A node's commands are consecutive: one span from the first start to the last end.
    const bp_tensor *node = cmds[i].node;
    int64_t begin = cmds[i].start, end = cmds[i].end;
    for (; i < cmds.size() && cmds[i].node == node; ++i) {
      begin = std::min(begin, cmds[i].start);
      end = std::max(end, cmds[i].end);
    }
    const uint64_t b = std::max(static_cast<uint64_t>(begin + offset), be->last_traced_end);
    const uint64_t e = std::max(static_cast<uint64_t>(end + offset), b);
    be->last_traced_end = e;
    bp_host_trace_node(host, be, node, BP_TRACE_WHOLE_NODE, b, e);
  }
}

}  // namespace bp::opencl
