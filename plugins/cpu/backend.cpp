// backend.cpp: a cpu backend: a thread pool plus graph compute, op and
// buffer-type support queries, and (trivial) events. Compute is synchronous:
// graph_compute returns when every node is done.
#include <algorithm>
#include <memory>

#include "backplane/plugin_guard.hpp"
#include "cpu.hpp"
#include "fusion.hpp"
#include "kernels.hpp"
#include "op_family.hpp"
#include "plugin_common.hpp"
#include "repack.hpp"
#include "tensor_bytes.hpp"
#include "threadpool.hpp"

namespace bp::cpu {
namespace {

// Below this much work (elements, or multiply-adds for MUL_MAT) waking the
// workers costs more than it saves.
constexpr int64_t kParallelWork = 16384;

// Computing nodes a pair may fuse across (plugins::may_run_before, tensor_bytes.hpp).
constexpr int kMaxFuseSkip = 2;

using plugins::thread_pool;

struct backend_ctx {
  plugin_state *plugin;
  thread_pool pool;
  bool fuse;  // the fuse parameter: run node pairs as one task (fusion.hpp)
  backend_ctx(plugin_state *p, int threads, bool f) : plugin(p), pool(threads), fuse(f) {}
};

struct node_task {
  const bp_tensor *node;
  const op_kernel *kernel;
  void operator()(int ith, int nth) const { kernel->run(node, ith, nth); }
};

// node_task while a trace records: each thread reports its own part, so the
// trace shows how evenly the work was split and when each worker woke.
struct traced_node_task {
  const bp_tensor *node;
  const op_kernel *kernel;
  const bp_host_api *host;
  void *backend;
  void operator()(int ith, int nth) const {
    const uint64_t begin = bp_host_trace_now(host);
    kernel->run(node, ith, nth);
    bp_host_trace_node(host, backend, node, ith, begin, bp_host_trace_now(host));
  }
};

void backend_free(void *backend) noexcept { delete static_cast<backend_ctx *>(backend); }

bp_buffer_type_ref backend_buffer_type(void *) noexcept { return buffer_type_ref(); }

bool has_memory(const bp_tensor *t) { return t->data != nullptr; }

// The checks every node passes before it runs, then the kernel's prepare.
bp_status ready_node(const bp_tensor *node, const op_kernel **kernel, bp_error *err) {
  if (!node_supported(node))
    return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "node '%s' (%s, %s) is not supported by the cpu backend",
                         node->name, plugins::op_name(node->op), bp_type_name(node->type));
  if (!has_memory(node))
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "node '%s' has no memory; allocate the graph first", node->name);
  for (int i = 0; i < BP_MAX_SRC; ++i) {
    const bp_tensor *s = node->src[i];
    if (s && !has_memory(s))
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "source %d ('%s') of node '%s' has no memory", i, s->name,
                           node->name);
  }
  const op_kernel *k = find_kernel(node->op);
  if (k->prepare) {
    bp_status s = k->prepare(node, err);
    if (s != BP_OK) return s;
  }
  *kernel = k;
  return BP_OK;
}

int64_t work_of(const op_kernel *k, const bp_tensor *node) {
  return k->work ? k->work(node) : bp_tensor_nelements(node);
}

bp_status compute_node(backend_ctx *ctx, const bp_tensor *node, bool tracing, bp_error *err) {
  if (bp_tensor_nelements(node) == 0) return BP_OK;  // nothing to write
  const uint64_t begin = tracing ? bp_host_trace_now(ctx->plugin->host) : 0;
  const op_kernel *k = nullptr;
  if (bp_status s = ready_node(node, &k, err); s != BP_OK) return s;
  const int nth = work_of(k, node) >= kParallelWork ? ctx->pool.size() : 1;
  std::string error;
  if (!tracing) {
    node_task task{node, k};
    error = ctx->pool.run(nth, task);
  } else {
    const bp_host_api *host = ctx->plugin->host;
    traced_node_task task{node, k, host, ctx};
    error = ctx->pool.run(nth, task);
    bp_host_trace_node(host, ctx, node, BP_TRACE_WHOLE_NODE, begin, bp_host_trace_now(host));
  }
  if (!error.empty()) return bp_error_setf(err, BP_ERR_INTERNAL, "node '%s' failed: %s", node->name, error.c_str());
  return BP_OK;
}

// Two nodes in one task (fusion.hpp): each thread does chunk c of its rows
// of |first|, then the same rows of |second|; virtual part ith * chunks + c
// of nth * chunks gives both kernels the same rows.
struct pair_task {
  const bp_tensor *first, *second;
  const op_kernel *k1, *k2;
  int chunks;
  void operator()(int ith, int nth) const {
    for (int c = 0; c < chunks; ++c) {
      k1->run(first, ith * chunks + c, nth * chunks);
      k2->run(second, ith * chunks + c, nth * chunks);
    }
  }
};

// pair_task while a trace records: each thread reports its time in each
// node (its chunks' times laid end to end), and the caller's (thread 0's)
// share of the first node splits the pair's whole-node span.
struct traced_pair_task {
  pair_task pair;
  const bp_tensor *first, *second;  // as the graph has them (pair's may be reshaped copies)
  const bp_host_api *host;
  void *backend;
  uint64_t *caller_first_ns;
  void operator()(int ith, int nth) const {
    const uint64_t begin = bp_host_trace_now(host);
    uint64_t in_first = 0, in_second = 0;
    for (int c = 0; c < pair.chunks; ++c) {
      const uint64_t t0 = bp_host_trace_now(host);
      pair.k1->run(pair.first, ith * pair.chunks + c, nth * pair.chunks);
      const uint64_t t1 = bp_host_trace_now(host);
      pair.k2->run(pair.second, ith * pair.chunks + c, nth * pair.chunks);
      in_first += t1 - t0;
      in_second += bp_host_trace_now(host) - t1;
    }
    bp_host_trace_node(host, backend, first, ith, begin, begin + in_first);
    bp_host_trace_node(host, backend, second, ith, begin + in_first, begin + in_first + in_second);
    if (ith == 0) *caller_first_ns = in_first;
  }
};

bp_status compute_pair(backend_ctx *ctx, const bp_tensor *first, const bp_tensor *second, bool tracing, bp_error *err) {
  const uint64_t begin = tracing ? bp_host_trace_now(ctx->plugin->host) : 0;
  const op_kernel *k1 = nullptr, *k2 = nullptr;
  if (bp_status s = ready_node(first, &k1, err); s != BP_OK) return s;
  if (bp_status s = ready_node(second, &k2, err); s != BP_OK) return s;
  flat_pair flat;
  const bool flattened = flatten_pair(first, second, &flat);
  const bp_tensor *a = flattened ? &flat.first : first, *b = flattened ? &flat.second : second;
  const int64_t rows = bp_tensor_nrows(a);
  // As many threads as the larger node would take alone: a pair of nodes
  // that each run on the caller alone stays there (waking a worker for a
  // decode step's SILU·MUL [8192] cost more than it saved: the worker, asleep
  // or yielding, joined 15-20 us late, for a pair that takes ~8 us).
  const int64_t work = std::max(work_of(k1, first), work_of(k2, second));
  int nth = work >= kParallelWork ? ctx->pool.size() : 1;
  if (nth > rows) nth = static_cast<int>(rows);  // a thread without rows would only wake
  const pair_task pair{a, b, k1, k2, fused_chunks(a, rows, nth)};
  std::string error;
  if (!tracing) {
    pair_task task = pair;
    error = ctx->pool.run(nth, task);
  } else {
    const bp_host_api *host = ctx->plugin->host;
    uint64_t caller_first_ns = 0;
    traced_pair_task task{pair, first, second, host, ctx, &caller_first_ns};
    error = ctx->pool.run(nth, task);
    const uint64_t end = bp_host_trace_now(host), mid = begin + caller_first_ns < end ? begin + caller_first_ns : end;
    bp_host_trace_node(host, ctx, first, BP_TRACE_WHOLE_NODE, begin, mid);
    bp_host_trace_node(host, ctx, second, BP_TRACE_WHOLE_NODE, mid, end);
  }
  if (!error.empty())
    return bp_error_setf(err, BP_ERR_INTERNAL, "nodes '%s' and '%s' (fused) failed: %s", first->name, second->name,
                         error.c_str());
  return BP_OK;
}

// The node that node |i| fuses with (fusion.hpp), or 0: the next computing
// node, or one up to kMaxFuseSkip computing nodes further when those may run
// before node |i|.
uint32_t fuse_partner(const bp_graph_desc *graph, uint32_t i) {
  const bp_tensor *first = graph->nodes[i];
  if (bp_tensor_nelements(first) == 0) return 0;
  int skipped = 0;
  for (uint32_t j = i + 1; j < graph->n_nodes; ++j) {
    const bp_tensor *t = graph->nodes[j];
    if (bp_op_is_view(t->op)) continue;
    if (can_fuse(first, t)) return j;
    if (skipped++ == kMaxFuseSkip || !plugins::may_run_before(t, first)) return 0;
  }
  return 0;
}

bp_status backend_graph_compute(void *backend, const bp_graph_desc *graph, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    auto *ctx = static_cast<backend_ctx *>(backend);
    if (bp_status s = plugins::check_graph(ctx, graph, err); s != BP_OK) return s;
    // Asked once per graph: untraced, a node costs this one flag test.
    const bool tracing = bp_host_trace_enabled(ctx->plugin->host) != 0;
    for (uint32_t i = 0; i < graph->n_nodes; ++i) {
      const bp_tensor *node = graph->nodes[i];
      if (bp_op_is_view(node->op)) continue;
      bp_status s = BP_OK;
      if (const uint32_t j = ctx->fuse ? fuse_partner(graph, i) : 0; j != 0) {
        // The nodes between the pair first (they neither read nor write
        // what the first node touches), then the pair.
        for (uint32_t k = i + 1; k < j && s == BP_OK; ++k)
          if (!bp_op_is_view(graph->nodes[k]->op)) s = compute_node(ctx, graph->nodes[k], tracing, err);
        if (s == BP_OK) s = compute_pair(ctx, node, graph->nodes[j], tracing, err);
        i = j;
      } else {
        s = compute_node(ctx, node, tracing, err);
      }
      if (s != BP_OK) {
        ctx->pool.rest();
        return s;
      }
    }
    ctx->pool.rest();  // the next work is likely another backend's split
    return BP_OK;
  });
}

int backend_supports_op(void *, const bp_tensor *op) noexcept {
  return plugin_guard_value(0, [&] {
    if (!op) return 0;
    if (bp_op_is_view(op->op)) return 1;
    return node_supported(op) ? 1 : 0;
  });
}

int backend_supports_buft(void *, bp_buffer_type_ref buft) noexcept {
  return plugin_guard_value(0,
                            [&] { return plugins::is_host_buffer_type(buft) || is_weight_buffer_type(buft) ? 1 : 0; });
}

// ---- events: trivial, work is finished when graph_compute returns

struct cpu_event {
  int unused = 0;
};

struct cpu_events {
  using backend = backend_ctx;
  using event = cpu_event;
  static bp_status alive(backend_ctx *, bp_error *) { return BP_OK; }
  static bp_status record(backend_ctx *, cpu_event *, bp_error *) { return BP_OK; }
  static bp_status wait(backend_ctx *, cpu_event *, bp_error *) { return BP_OK; }
  static bp_status synchronize(cpu_event *, bp_error *) { return BP_OK; }
};

using events = plugins::event_slots<cpu_events>;

const bp_backend_i backend_iface = {
    sizeof(bp_backend_i),
    backend_free,
    backend_buffer_type,
    nullptr,  // set_tensor_async: the host's sync path is already optimal
    nullptr,  // get_tensor_async
    nullptr,  // copy_tensor_async
    nullptr,  // synchronize: compute is synchronous
    nullptr,  // graph_plan_create
    nullptr,  // graph_plan_free
    nullptr,  // graph_plan_compute
    backend_graph_compute,
    backend_supports_op,
    backend_supports_buft,
    nullptr,  // offload_op
    events::record,
    events::wait,
};

}  // namespace

bp_status backend_create(plugin_state *plugin, int64_t threads, bool fuse, bp_backend_ref *out, bp_error *err) {
  out->iface = nullptr;
  out->ctx = nullptr;
  const int n = threads > 0 ? static_cast<int>(threads) : static_cast<int>(plugin->n_cores);
  std::unique_ptr<backend_ctx> ctx;
  try {
    ctx = std::make_unique<backend_ctx>(plugin, n, fuse);
  } catch (const std::system_error &e) {
    return bp_error_setf(err, BP_ERR_RESOURCE_EXHAUSTED, "cannot start %d threads (%s); ask for fewer with threads=N",
                         n, e.what());
  }
  bp_host_logf(plugin->host, BP_LOG_INFO, "%d threads%s", n, fuse ? "" : ", fusion off");  // the host prefixes "cpu"
  out->iface = &backend_iface;
  out->ctx = ctx.release();
  return BP_OK;
}

bp_status event_create(bp_event_ref *out, bp_error *err) {
  if (!out) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "event_new needs an out ref");
  out->iface = &events::table;
  out->ctx = new cpu_event();
  return BP_OK;
}

}  // namespace bp::cpu
