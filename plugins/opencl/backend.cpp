// backend.cpp: a backend is one in-order command queue on a device: graph
// compute enqueues one kernel per node and returns;
// synchronize waits. Asynchronous transfers and events go on the same queue.
#include <CL/cl.h>

#include <memory>

#include "backend.hpp"
#include "backplane/plugin_guard.hpp"
#include "buffer_slots.hpp"

namespace bp::opencl {

backend_ctx::~backend_ctx() {
  if (queue && !dev->lost.load()) clFinish(queue);  // a lost device may never finish
  // Not reported: the graphs those nodes belonged to may be gone by now.
  trace_harvest(this, 0, false);
  for (auto &[key, k] : kernels) clReleaseKernel(k);
  if (scratch) clReleaseMemObject(scratch);
  if (plain_queue) clReleaseCommandQueue(plain_queue);
  if (profiled_queue) clReleaseCommandQueue(profiled_queue);
}

namespace {

void backend_free(void *backend) noexcept { delete static_cast<backend_ctx *>(backend); }

bp_buffer_type_ref backend_buffer_type(void *backend) noexcept {
  return buffer_type_of(static_cast<backend_ctx *>(backend)->dev);
}

// The queue of plugins::async_transfer_slots: the backend's own queue,
// not blocking (synchronize waits).
struct cl_queue {
  using backend = backend_ctx;
  using buffer = cl_buffer;
  static constexpr const char *memory = "this backend's OpenCL device";
  static bp_status alive(backend_ctx *be, bp_error *err) { return device_check(be->dev, err); }
  static cl_buffer *buffer_of(const bp_tensor *t) { return opencl::buffer_of(t); }
  static bool reaches(const backend_ctx *be, const cl_buffer *b) { return b->dev->context == be->dev->context; }
  static bp_status write(backend_ctx *be, cl_buffer *b, size_t at, const void *data, size_t size, bp_error *err) {
    cl_int rc = clEnqueueWriteBuffer(be->queue, b->mem, CL_FALSE, at, size, data, 0, nullptr, nullptr);
    return rc == CL_SUCCESS ? BP_OK : device_fail(be->dev, rc, cl_site::setup, "set_tensor_async", err);
  }
  static bp_status read(backend_ctx *be, cl_buffer *b, size_t at, void *data, size_t size, bp_error *err) {
    cl_int rc = clEnqueueReadBuffer(be->queue, b->mem, CL_FALSE, at, size, data, 0, nullptr, nullptr);
    return rc == CL_SUCCESS ? BP_OK : device_fail(be->dev, rc, cl_site::setup, "get_tensor_async", err);
  }
};

using async = plugins::async_transfer_slots<cl_queue>;

bp_status backend_synchronize(void *backend, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *be = static_cast<backend_ctx *>(backend);
    if (!be) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "synchronize needs a backend");
    if (bp_status s = device_check(be->dev, err); s != BP_OK) return s;
    cl_int rc = clFinish(be->queue);
    if (rc != CL_SUCCESS) return device_fail(be->dev, rc, cl_site::wait, "clFinish", err);
    // The graphs are still valid here (until synchronize, by contract).
    if (!be->traced.empty()) trace_harvest(be, bp_host_trace_now(be->dev->plugin->host), true);
    return BP_OK;
  });
}

bp_status backend_graph_compute(void *backend, const bp_graph_desc *graph, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *be = static_cast<backend_ctx *>(backend);
    if (bp_status s = plugins::check_graph(be, graph, err); s != BP_OK) return s;
    if (bp_status s = device_check(be->dev, err); s != BP_OK) return s;
    // Asked once per graph: untraced, a node costs this one flag test.
    const bool tracing = bp_host_trace_enabled(be->dev->plugin->host) != 0;
    if (bp_status s = trace_select_queue(be, tracing, err); s != BP_OK) return s;
    for (uint32_t i = 0; i < graph->n_nodes; ++i) {
      const bp_tensor *node = graph->nodes[i];
      if (bp_op_is_view(node->op)) continue;
      // Untraced only: a trace reports each node's own device time.
      const fused_pair f = be->fuse && !tracing ? find_fused_pair(graph, i) : fused_pair{};
      if (f.second != 0 && op_supported(be->dev, node) && op_supported(be->dev, graph->nodes[f.second])) {
        if (f.between != 0)
          if (bp_status s = compute_node(be, graph->nodes[f.between], err); s != BP_OK) return s;
        if (bp_status s = run_fused(be, node, graph->nodes[f.second], err); s != BP_OK) return s;
        i = f.second;  // the nodes up to it ran
        continue;
      }
      if (tracing) be->traced_node = node;
      const bp_status s = compute_node(be, node, err);
      be->traced_node = nullptr;
      if (s != BP_OK) return s;
    }
    clFlush(be->queue);  // start the work now; synchronize waits for it
    return BP_OK;
  });
}

int backend_supports_op(void *backend, const bp_tensor *op) noexcept {
  return plugin_guard_value(0, [&] {
    auto *be = static_cast<backend_ctx *>(backend);
    if (!be || !op) return 0;
    if (bp_op_is_view(op->op)) return 1;
    return op_supported(be->dev, op) ? 1 : 0;
  });
}

int backend_supports_buft(void *backend, bp_buffer_type_ref buft) noexcept {
  return plugin_guard_value(0, [&] {
    auto *be = static_cast<backend_ctx *>(backend);
    if (!be || buft.iface != &buffer_type_iface || !buft.ctx) return 0;
    // Kernels can only address memory of their own context.
    return static_cast<device_state *>(buft.ctx) == be->dev ? 1 : 0;
  });
}

int backend_offload_op(void *, const bp_tensor *op) noexcept {
  // Big products are worth copying host weights over; the rest is not.
  return op && op->op == BP_OP_MUL_MAT && op->ne[1] >= 32 ? 1 : 0;
}

// ---- events ----------------------------------------------------------------

struct event_obj {
  device_state *dev = nullptr;
  cl_event ev = nullptr;  // the marker of the last record; nullptr: never recorded
  ~event_obj() {
    if (ev) clReleaseEvent(ev);
  }
};

// The plugin's parts of plugins::event_slots: markers on the backend's queue.
struct cl_events {
  using backend = backend_ctx;
  using event = event_obj;
  static bp_status alive(backend_ctx *be, bp_error *err) { return device_check(be->dev, err); }
  static bp_status record(backend_ctx *be, event_obj *e, bp_error *err) {
    cl_event ev = nullptr;
    cl_int rc = clEnqueueMarkerWithWaitList(be->queue, 0, nullptr, &ev);
    if (rc != CL_SUCCESS) return device_fail(be->dev, rc, cl_site::setup, "event_record", err);
    if (e->ev) clReleaseEvent(e->ev);
    e->ev = ev;
    clFlush(be->queue);
    return BP_OK;
  }
  static bp_status wait(backend_ctx *be, event_obj *e, bp_error *err) {
    if (bp_status s = device_check(e->dev, err); s != BP_OK) return s;
    if (!e->ev) return BP_OK;
    cl_context ev_ctx = nullptr;
    clGetEventInfo(e->ev, CL_EVENT_CONTEXT, sizeof ev_ctx, &ev_ctx, nullptr);
    if (ev_ctx == be->dev->context) {
      // Same context: the queue waits on the device, the host does not.
      cl_int rc = clEnqueueBarrierWithWaitList(be->queue, 1, &e->ev, nullptr);
      return rc == CL_SUCCESS ? BP_OK : device_fail(be->dev, rc, cl_site::setup, "event_wait", err);
    }
    cl_int rc = clWaitForEvents(1, &e->ev);  // events do not cross contexts
    return rc == CL_SUCCESS ? BP_OK : device_fail(e->dev, rc, cl_site::wait, "event_wait", err);
  }
  static bp_status synchronize(event_obj *e, bp_error *err) {
    if (bp_status s = device_check(e->dev, err); s != BP_OK) return s;
    if (!e->ev) return BP_OK;
    cl_int rc = clWaitForEvents(1, &e->ev);
    return rc == CL_SUCCESS ? BP_OK : device_fail(e->dev, rc, cl_site::wait, "event_synchronize", err);
  }
};

using events = plugins::event_slots<cl_events>;

const bp_backend_i backend_iface = {
    sizeof(bp_backend_i),
    backend_free,
    backend_buffer_type,
    async::set_async,
    async::get_async,
    nullptr,  // copy_tensor_async: the host's synchronous copy
    backend_synchronize,
    nullptr,  // graph_plan_create
    nullptr,  // graph_plan_free
    nullptr,  // graph_plan_compute
    backend_graph_compute,
    backend_supports_op,
    backend_supports_buft,
    backend_offload_op,
    events::record,
    events::wait,
};

}  // namespace

bp_status backend_create(device_state *dev, const backend_options &opt, bp_backend_ref *out, bp_error *err) {
  if (bp_status s = device_open(dev, err); s != BP_OK) return s;
  auto be = std::make_unique<backend_ctx>();
  be->dev = dev;
  be->cache = resolve_cache(opt.cache, opt.cache_dir);
  // MUL_MAT vectors as wide as the device prefers (PoCL: its SIMD width;
  // GPUs report 1 and get float4). Columns per work-item: 4 x 4 vector
  // accumulators fill half of AVX-512's 32 registers, leaving room for the
  // 8 loaded vectors; AVX2's 16 registers hold 4 x 2 and 6 loads. GPUs
  // have registers enough for 4 x 4 float4.
  const uint32_t vw = opt.matmul_width ? static_cast<uint32_t>(opt.matmul_width) : dev->vector_width;
  be->matmul_vector_width = vw >= 16 ? 16 : vw >= 8 ? 8 : 4;
  be->matmul_cols = opt.matmul_cols ? opt.matmul_cols : be->matmul_vector_width == 8 ? 2 : 4;
  be->fuse = opt.fuse;
  be->matmul = opt.matmul;
  be->attention = opt.attention;
  cl_int rc = CL_SUCCESS;
  be->queue = be->plain_queue = clCreateCommandQueue(dev->context, dev->device, 0, &rc);
  if (!be->queue || rc != CL_SUCCESS) return device_fail(dev, rc, cl_site::setup, "creating a queue", err);
  bp_host_logf(dev->plugin->host, BP_LOG_INFO, "backend on %s (cache %s)", dev->name.c_str(),
               be->cache.enabled ? be->cache.dir.c_str() : "off");
  out->iface = &backend_iface;
  out->ctx = be.release();
  return BP_OK;
}

bp_status event_create(device_state *dev, bp_event_ref *out, bp_error *err) {
  if (!dev || !out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "event_new needs a device and an out ref");
  if (bp_status s = device_check(dev, err); s != BP_OK) return s;
  auto *e = new event_obj();
  e->dev = dev;
  out->iface = &events::table;
  out->ctx = e;
  return BP_OK;
}

}  // namespace bp::opencl
