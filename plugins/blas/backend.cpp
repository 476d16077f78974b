// backend.cpp: the BLAS backend table: what it accepts and how it runs a
// graph.
//
// supports_op is narrow on purpose: MUL_MAT with dense rows that is big
// enough (min_mnk) to beat a plain CPU kernel. Anything else returns 0 so the
// scheduler places it on the next backend of the list; graph_compute returns
// UNIMPLEMENTED for such a node instead of aborting.
#include <string>

#include "blas.hpp"
#include "op_family.hpp"

namespace bp::blas {
namespace {

backend_ctx *as_ctx(void *backend) { return static_cast<backend_ctx *>(backend); }

void be_free(void *backend) noexcept { delete as_ctx(backend); }

bp_buffer_type_ref be_buffer_type(void *) noexcept { return host_buffer_type(); }

bp_status be_graph_compute(void *backend, const bp_graph_desc *graph, bp_error *err) noexcept {
  return plugin_guard(err, [&]() -> bp_status {
    if (bp_status s = plugins::check_graph(backend, graph, err); s != BP_OK) return s;
    backend_ctx &ctx = *as_ctx(backend);
    // Asked once per graph: untraced, a node costs this one flag test.
    const bool tracing = bp_host_trace_enabled(ctx.host) != 0;
    for (uint32_t i = 0; i < graph->n_nodes; ++i) {
      const bp_tensor *node = graph->nodes[i];
      if (bp_op_is_view(node->op)) continue;
      if (node->op != BP_OP_MUL_MAT || !mul_mat_layout_ok(node)) {
        std::string msg = "node " + std::to_string(i) + " '" + node->name + "' (" + plugins::op_name(node->op) +
                          ") is not supported: this backend runs only MUL_MAT with f32/f16 a, f32 b and dense rows";
        return bp_error_set(err, BP_ERR_UNIMPLEMENTED, msg.c_str());
      }
      if (!tracing) {
        mul_mat_compute(node, ctx);
        continue;
      }
      const uint64_t begin = bp_host_trace_now(ctx.host);
      ctx.traced = node;
      mul_mat_compute(node, ctx);
      ctx.traced = nullptr;
      bp_host_trace_node(ctx.host, backend, node, BP_TRACE_WHOLE_NODE, begin, bp_host_trace_now(ctx.host));
    }
    // The nodes between this split and the next run on another backend:
    // workers that kept polling would take its cores.
    ctx.pool.rest();
    return BP_OK;
  });
}

int be_supports_op(void *backend, const bp_tensor *op) noexcept {
  return plugin_guard_value<int>(0, [&] {
    if (!op) return 0;
    if (bp_op_is_view(op->op)) return 1;           // views compute nothing anywhere
    if (plugins::touches_quantized(op)) return 0;  // no quantized kernels
    return mul_mat_layout_ok(op) && mul_mat_big_enough(op, as_ctx(backend)->min_mnk) ? 1 : 0;
  });
}

// Any host memory is fine: tensors are read and written through host
// pointers, so "blas;cpu" shares buffers without copies.
int be_supports_buft(void *, bp_buffer_type_ref buft) noexcept {
  return plugin_guard_value<int>(0, [&] { return plugins::is_host_buffer_type(buft) ? 1 : 0; });
}

// Work whose weights sit in another host backend's memory costs nothing to
// pull here (no copy), so the hint is the same as supports_op.
int be_offload_op(void *backend, const bp_tensor *op) noexcept {
  return plugin_guard_value<int>(0,
                                 [&] { return op && op->op == BP_OP_MUL_MAT && be_supports_op(backend, op) ? 1 : 0; });
}

}  // namespace

const bp_backend_i kBackendIface = {
    sizeof(bp_backend_i),
    be_free,
    be_buffer_type,
    nullptr,  // set_tensor_async: memory is host memory; sync is as fast
    nullptr,  // get_tensor_async
    nullptr,  // copy_tensor_async
    nullptr,  // synchronize: graph_compute finishes before it returns
    nullptr,  // graph_plan_create
    nullptr,  // graph_plan_free
    nullptr,  // graph_plan_compute
    be_graph_compute,
    be_supports_op,
    be_supports_buft,
    be_offload_op,
    nullptr,  // event_record
    nullptr,  // event_wait
};

}  // namespace bp::blas
