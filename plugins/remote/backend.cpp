// backend.cpp: a backend is a backend on the server (BackendOpen) in the
// device's current session. graph_compute sends a graph once
// (GraphRegister) and keeps its handle under the hash of its description,
// so running the same graph again costs one round trip (GraphCompute).
// Every call is synchronous: graph_compute returns when the server has
// run the graph, set/get_tensor_async transfer before returning, and
// synchronize has nothing to wait for. Events are local markers: recording
// one after synchronous work means it is already complete.
#include <algorithm>
#include <cinttypes>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backplane/plugin_guard.hpp"
#include "buffer_slots.hpp"
#include "graph_wire.hpp"
#include "remote.hpp"

namespace bp::remote_plugin {
namespace {

// Graphs kept registered per backend; the oldest is freed beyond this.
constexpr size_t k_graph_cache_entries = 64;

struct cached_graph {
  std::string description;  // the serialized GraphRegisterRequest
  uint64_t handle = 0;
};

struct backend_ctx {
  device_state *dev = nullptr;
  std::shared_ptr<session> sess;
  uint64_t handle = 0;
  backend_options opt;
  std::unordered_multimap<uint64_t, cached_graph> graphs;  // by hash_bytes(description)
  std::deque<uint64_t> graph_order;                        // handles, oldest first
  std::unordered_map<std::string, bool> supported;         // by node description
};

struct plan_obj {
  uint64_t handle = 0;
  std::vector<const bp_tensor *> nodes;  // the plan's graph's nodes, which its traced runs report
};

pb::Remote::Stub *stub(backend_ctx *be) { return be->sess->server->stub.get(); }

bp_status free_graph(backend_ctx *be, uint64_t handle, bp_error *err) {
  if (be->sess->lost.load()) return BP_OK;  // the server dropped the session's graphs
  call c(be->sess.get(), be->opt.timeout_ms);
  pb::Handle req;
  req.set_id(handle);
  pb::Empty reply;
  const grpc::Status st = stub(be)->GraphFree(c.ctx(), req, &reply);
  return st.ok() ? BP_OK : rpc_failed(be->sess.get(), st, "GraphFree", err);
}

bp_status register_graph(backend_ctx *be, const bp_graph_desc *graph, pb::GraphRegisterRequest *req, uint64_t *handle,
                         bp_error *err) {
  req->set_backend(be->handle);
  if (bp_status s = describe_graph(graph, be->sess.get(), req, err); s != BP_OK) return s;
  call c(be->sess.get(), be->opt.timeout_ms);
  pb::Handle reply;
  const grpc::Status st = stub(be)->GraphRegister(c.ctx(), *req, &reply);
  if (!st.ok()) return rpc_failed(be->sess.get(), st, "GraphRegister", err);
  *handle = reply.id();
  return BP_OK;
}

// Reports the server's node times of one GraphCompute on the host's trace
// clock. Only the call's two ends are known here: the server's part is
// placed in their middle, so the network time splits evenly before and after
// it (exact when the two directions take the same time).
void report_node_times(backend_ctx *be, const pb::GraphComputeReply &reply, const bp_tensor *const *nodes,
                       uint32_t n_nodes, uint64_t sent, uint64_t received) {
  const bp_host_api *host = be->dev->plugin->host;
  const uint64_t wire = received - sent;
  const uint64_t server = std::min<uint64_t>(reply.duration_ns(), wire);
  const uint64_t origin = sent + (wire - server) / 2;
  for (const pb::NodeTime &t : reply.nodes()) {
    if (t.node() >= n_nodes) continue;  // not a node of this graph: a broken server, ignored
    const uint64_t b = std::min<uint64_t>(t.begin_ns(), server),
                   e = std::min<uint64_t>(std::max(t.end_ns(), t.begin_ns()), server);
    bp_host_trace_node(host, be, nodes[t.node()], BP_TRACE_WHOLE_NODE, origin + b, origin + e);
  }
}

// Runs the registered graph |handle| whose nodes are |nodes| (in the order
// they were registered); while a trace records, asks for the node times.
bp_status run_graph(backend_ctx *be, uint64_t handle, const bp_tensor *const *nodes, uint32_t n_nodes,
                    grpc::Status *status) {
  const bp_host_api *host = be->dev->plugin->host;
  const bool traced = bp_host_trace_enabled(host) != 0;
  call c(be->sess.get(), be->opt.timeout_ms);
  pb::GraphComputeRequest req;
  req.set_id(handle);
  req.set_node_times(traced);
  pb::GraphComputeReply reply;
  const uint64_t sent = traced ? bp_host_trace_now(host) : 0;
  *status = stub(be)->GraphCompute(c.ctx(), req, &reply);
  if (!status->ok()) return BP_ERR_INTERNAL;
  if (traced) report_node_times(be, reply, nodes, n_nodes, sent, bp_host_trace_now(host));
  return BP_OK;
}

void forget_graph(backend_ctx *be, uint64_t hash, uint64_t handle) {
  auto range = be->graphs.equal_range(hash);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second.handle == handle) {
      be->graphs.erase(it);
      break;
    }
  for (auto it = be->graph_order.begin(); it != be->graph_order.end(); ++it)
    if (*it == handle) {
      be->graph_order.erase(it);
      break;
    }
}

void backend_free(void *backend) noexcept {
  auto *be = static_cast<backend_ctx *>(backend);
  if (!be) return;
  if (!be->sess->lost.load()) {
    for (uint64_t h : be->graph_order) free_graph(be, h, nullptr);
    call c(be->sess.get(), be->opt.timeout_ms);
    pb::Handle req;
    req.set_id(be->handle);
    pb::Empty reply;
    stub(be)->BackendFree(c.ctx(), req, &reply);
  }
  delete be;
}

bp_buffer_type_ref backend_buffer_type(void *backend) noexcept {
  return buffer_type_of(static_cast<backend_ctx *>(backend)->dev);
}

// The queue of plugins::async_transfer_slots: the streamed transfers of
// buffer.cpp with this backend's chunk size and deadline, done before the
// slot returns.
struct remote_queue {
  using backend = backend_ctx;
  using buffer = remote_buffer;
  static constexpr const char *memory = "this backend's server session";
  static bp_status alive(backend_ctx *be, bp_error *err) { return session_check(be->sess.get(), err); }
  static remote_buffer *buffer_of(const bp_tensor *t) { return remote_plugin::buffer_of(t); }
  static bool reaches(const backend_ctx *be, const remote_buffer *b) { return b->sess == be->sess; }
  static bp_status write(backend_ctx *be, remote_buffer *b, size_t at, const void *data, size_t size, bp_error *err) {
    return write_bytes(b, at, data, size, be->opt.chunk_bytes, be->opt.timeout_ms, err);
  }
  static bp_status read(backend_ctx *be, remote_buffer *b, size_t at, void *data, size_t size, bp_error *err) {
    return read_bytes(b, at, data, size, be->opt.chunk_bytes, be->opt.timeout_ms, err);
  }
};

using async = plugins::async_transfer_slots<remote_queue>;

bp_status backend_synchronize(void *backend, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *be = static_cast<backend_ctx *>(backend);
    if (!be) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "synchronize needs a backend");
    return session_check(be->sess.get(), err);  // every call finished before it returned
  });
}

bp_status backend_graph_compute(void *backend, const bp_graph_desc *graph, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *be = static_cast<backend_ctx *>(backend);
    if (bp_status s = plugins::check_graph(be, graph, err); s != BP_OK) return s;
    if (bp_status s = session_check(be->sess.get(), err); s != BP_OK) return s;
    pb::GraphRegisterRequest req;
    req.set_backend(be->handle);
    if (bp_status s = describe_graph(graph, be->sess.get(), &req, err); s != BP_OK) return s;
    std::string description = req.SerializeAsString();
    const uint64_t hash = hash_bytes(description);
    uint64_t handle = 0;
    auto range = be->graphs.equal_range(hash);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second.description == description) handle = it->second.handle;
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (handle == 0) {
        call c(be->sess.get(), be->opt.timeout_ms);
        pb::Handle reply;
        const grpc::Status st = stub(be)->GraphRegister(c.ctx(), req, &reply);
        if (!st.ok()) return rpc_failed(be->sess.get(), st, "GraphRegister", err);
        handle = reply.id();
        bp_host_logf(be->dev->plugin->host, BP_LOG_DEBUG, "graph of %u nodes registered on %s as %" PRIu64,
                     graph->n_nodes, be->dev->name.c_str(), handle);
        if (be->graph_order.size() >= k_graph_cache_entries) {
          const uint64_t oldest = be->graph_order.front();
          for (auto it = be->graphs.begin(); it != be->graphs.end(); ++it)
            if (it->second.handle == oldest) {
              forget_graph(be, it->first, oldest);
              break;
            }
          free_graph(be, oldest, nullptr);
        }
        be->graphs.emplace(hash, cached_graph{description, handle});
        be->graph_order.push_back(handle);
      }
      grpc::Status st;
      if (run_graph(be, handle, graph->nodes, graph->n_nodes, &st) == BP_OK) return BP_OK;
      // A graph the server no longer knows is sent again, once.
      forget_graph(be, hash, handle);
      if (st.error_code() != grpc::StatusCode::NOT_FOUND || attempt == 1)
        return rpc_failed(be->sess.get(), st, "GraphCompute", err);
      handle = 0;
    }
    return BP_OK;
  });
}

bp_status backend_plan_create(void *backend, const bp_graph_desc *graph, void **out_plan, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *be = static_cast<backend_ctx *>(backend);
    if (!out_plan) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "graph_plan_create needs an out pointer");
    *out_plan = nullptr;
    if (bp_status s = plugins::check_graph(be, graph, err); s != BP_OK) return s;
    if (bp_status s = session_check(be->sess.get(), err); s != BP_OK) return s;
    pb::GraphRegisterRequest req;
    auto plan = std::make_unique<plan_obj>();
    if (bp_status s = register_graph(be, graph, &req, &plan->handle, err); s != BP_OK) return s;
    plan->nodes.assign(graph->nodes, graph->nodes + graph->n_nodes);
    *out_plan = plan.release();
    return BP_OK;
  });
}

void backend_plan_free(void *backend, void *plan) noexcept {
  auto *be = static_cast<backend_ctx *>(backend);
  auto *p = static_cast<plan_obj *>(plan);
  if (be && p) plugin_guard(nullptr, [&] { return free_graph(be, p->handle, nullptr); });
  delete p;
}

bp_status backend_plan_compute(void *backend, void *plan, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *be = static_cast<backend_ctx *>(backend);
    auto *p = static_cast<plan_obj *>(plan);
    if (!be || !p) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "graph_plan_compute needs a backend and a plan");
    if (bp_status s = session_check(be->sess.get(), err); s != BP_OK) return s;
    grpc::Status st;
    return run_graph(be, p->handle, p->nodes.data(), static_cast<uint32_t>(p->nodes.size()), &st) == BP_OK
               ? BP_OK
               : rpc_failed(be->sess.get(), st, "GraphCompute", err);
  });
}

int backend_supports_op(void *backend, const bp_tensor *op) noexcept {
  return plugin_guard_value(0, [&] {
    auto *be = static_cast<backend_ctx *>(backend);
    if (!be || !op) return 0;
    if (bp_op_is_view(op->op)) return 1;
    if (be->sess->lost.load()) return 0;
    pb::SupportsOpRequest req;
    describe_node(op, &req);
    std::string key = req.SerializeAsString();
    if (auto it = be->supported.find(key); it != be->supported.end()) return it->second ? 1 : 0;
    req.set_backend(be->handle);
    call c(be->sess.get(), be->opt.timeout_ms);
    pb::SupportsOpReply reply;
    const grpc::Status st = stub(be)->SupportsOp(c.ctx(), req, &reply);
    if (!st.ok()) {
      bp_error e{};
      rpc_failed(be->sess.get(), st, "SupportsOp", &e);
      bp_host_logf(be->dev->plugin->host, BP_LOG_DEBUG, "supports_op(%s): %s", op->name, e.message);
      return 0;
    }
    be->supported.emplace(std::move(key), reply.supported());
    return reply.supported() ? 1 : 0;
  });
}

int backend_supports_buft(void *backend, bp_buffer_type_ref buft) noexcept {
  auto *be = static_cast<backend_ctx *>(backend);
  // The server's backend computes on its own device's memory only.
  return be && buft.iface == &buffer_type_iface && buft.ctx == be->dev ? 1 : 0;
}

// ---- events: local, complete as soon as recorded (all work is synchronous)

struct event_obj {
  device_state *dev = nullptr;
  std::shared_ptr<session> sess;  // of the last record
};

// The plugin's parts of plugins::event_slots.
struct remote_events {
  using backend = backend_ctx;
  using event = event_obj;
  static bp_status alive(backend_ctx *be, bp_error *err) { return session_check(be->sess.get(), err); }
  static bp_status record(backend_ctx *be, event_obj *e, bp_error *) {
    e->sess = be->sess;
    return BP_OK;
  }
  static bp_status wait(backend_ctx *, event_obj *, bp_error *) { return BP_OK; }
  static bp_status synchronize(event_obj *e, bp_error *err) { return session_check(e->sess.get(), err); }
};

using events = plugins::event_slots<remote_events>;

const bp_backend_i backend_iface = {
    sizeof(bp_backend_i),
    backend_free,
    backend_buffer_type,
    async::set_async,
    async::get_async,
    nullptr,  // copy_tensor_async: the host's synchronous copy (buffer copy_tensor stays on the server)
    backend_synchronize,
    backend_plan_create,
    backend_plan_free,
    backend_plan_compute,
    backend_graph_compute,
    backend_supports_op,
    backend_supports_buft,
    nullptr,  // offload_op: copying host weights over the network is rarely worth it
    events::record,
    events::wait,
};

}  // namespace

bp_status backend_create(device_state *dev, const backend_options &opt, bp_backend_ref *out, bp_error *err) {
  auto be = std::make_unique<backend_ctx>();
  be->dev = dev;
  be->opt = opt;
  if (bp_status s = server_session(dev->server, true, &be->sess, err); s != BP_OK) return s;
  call c(be->sess.get(), opt.timeout_ms);
  pb::BackendOpenRequest req;
  req.set_device(dev->remote_index);
  pb::Handle reply;
  const grpc::Status st = dev->server->stub->BackendOpen(c.ctx(), req, &reply);
  if (!st.ok()) return rpc_failed(be->sess.get(), st, "BackendOpen", err);
  be->handle = reply.id();
  bp_host_logf(dev->plugin->host, BP_LOG_INFO, "backend on %s (session %s)", dev->name.c_str(),
               be->sess->id_text.c_str());
  out->iface = &backend_iface;
  out->ctx = be.release();
  return BP_OK;
}

bp_status event_create(device_state *dev, bp_event_ref *out, bp_error *err) {
  if (!dev || !out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "event_new needs a device and an out ref");
  auto *e = new event_obj();
  e->dev = dev;
  out->iface = &events::table;
  out->ctx = e;
  return BP_OK;
}

}  // namespace bp::remote_plugin
