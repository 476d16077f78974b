// backend.cpp: backends, the instances of a device that run graphs:
// backend_create (called by the registry after parsing a spec) and
// bp_backend_* (free, name, buffers, graph compute, queries, async transfers).
//
// bp_backend_graph_compute validates every node before the plugin sees the
// graph (docs/architecture.md: plugins stay simple and never need to abort): the
// op table's rules again, memory present, memory this backend can use, op
// supported. A backend holds one reference to its plugin until it is freed.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "abi/minor.hpp"
#include "abi/tables.hpp"
#include "core/objects.hpp"
#include "core/ops_internal.hpp"  // validate_node
#include "core/trace/recorder.hpp"
#include "core/trace/span.hpp"

namespace bp::core {

bp_status backend_create(bp_device *dev, const bp_param_value *params, uint32_t n_params, const std::string &name,
                         bp_backend **out) {
  const char *fn = "bp_backend_new";
  if (out == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_backend is NULL", fn);
  *out = nullptr;
  if (!handle_ok(dev, TAG_DEVICE)) return bad_handle(fn, "device", dev, TAG_DEVICE);
  if (bp_status st = check_not_lost(dev, fn); st != BP_OK) return st;
  if (!BP_HAS_SLOT(dev->ref.iface, bp_device_i, backend_init)) {
    return set_errorf(BP_ERR_INCOMPATIBLE, "%s: %s: device '%s' has no backend_init slot: the plugin is broken", fn,
                      plugin_name(dev).c_str(), device_label(dev).c_str());
  }
  bp_error err{};
  bp_backend_ref ref{};
  bp_status st = dev->ref.iface->backend_init(dev->ref.ctx, params, n_params, &ref, &err);
  if (st != BP_OK) return plugin_failed(dev, st, err, "creating backend '" + name + "'");
  const bp_backend_i *i = ref.iface;
  // Checked once, here, where the host first gets the table (PLG-5).
  std::string why = bp::abi::check_table(bp::abi::backend_table, i);
  if (!why.empty()) {
    if (BP_HAS_SLOT(i, bp_backend_i, free)) i->free(ref.ctx);
    return set_errorf(BP_ERR_INCOMPATIBLE, "%s: %s: backend '%s': %s", fn, plugin_name(dev).c_str(), name.c_str(),
                      why.c_str());
  }
  bp_buffer_type *buft = device_buft_for(dev, i->buffer_type(ref.ctx));
  if (buft == nullptr) {
    i->free(ref.ctx);
    return BP_ERR_INCOMPATIBLE;
  }
  auto backend = std::make_unique<bp_backend>();
  backend->device = dev;
  backend->ref = ref;
  backend->name = name;
  backend->buft = buft;
  plugin_retain(dev->plugin);
  trace::name_backend(ref.ctx, name);
  trace::start_from_env_once();
  *out = backend.release();
  return BP_OK;
}

}  // namespace bp::core

using namespace bp::core;

namespace {

bool backend_ok(const bp_backend *be, const char *fn) {
  if (handle_ok(be, TAG_BACKEND)) return true;
  bad_handle(fn, "backend", be, TAG_BACKEND);
  return false;
}

// Checks |be| and that its device is not lost.
bp_status usable_backend(const bp_backend *be, const char *fn) {
  if (!backend_ok(be, fn)) return BP_ERR_INVALID_ARGUMENT;
  return check_not_lost(be->device, fn);
}

bp_status call_synchronize(bp_backend *be) {
  if (!BP_HAS_SLOT(be->ref.iface, bp_backend_i, synchronize)) return BP_OK;
  trace::span span(be->ref.ctx, "sync", "synchronize");
  bp_error err{};
  bp_status st = be->ref.iface->synchronize(be->ref.ctx, &err);
  if (st != BP_OK) return plugin_failed(be->device, st, err, "synchronizing backend '" + be->name + "'");
  return BP_OK;
}

// Memory of |t| (a node or a source of node |node|) must exist and be usable
// by |be|. Caches supports_buft answers in |seen|.
bp_status check_tensor_memory(bp_backend *be, bp_tensor *t, const bp_tensor *node,
                              std::vector<std::pair<const bp_buffer_type *, bool>> &seen, const char *fn) {
  if (t->buffer == nullptr && t->view_src != nullptr && t->view_src->buffer != nullptr) {
    // A view made after its source was allocated elsewhere: give it memory now.
    if (bp_status st = view_init(t, fn); st != BP_OK) return st;
  }
  if (t->buffer == nullptr) {
    // The same code as bp_tensor_get/set for the same condition (docs/errors.md).
    return set_errorf(BP_ERR_FAILED_PRECONDITION,
                      "%s: tensor %s (%s node %s) has no memory: allocate the graph with bp_context_alloc_tensors, a "
                      "graph allocator or the scheduler",
                      fn, describe(t).c_str(), t == node ? "the" : "a source of", describe(node).c_str());
  }
  if (!handle_ok(t->buffer, TAG_BUFFER)) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: tensor %s points to a freed buffer: allocate it again", fn,
                      describe(t).c_str());
  }
  const bp_buffer_type *buft = t->buffer->buft;
  auto it = std::find_if(seen.begin(), seen.end(), [&](const auto &p) { return p.first == buft; });
  bool ok;
  if (it != seen.end()) {
    ok = it->second;
  } else {
    ok = be->ref.iface->supports_buft(be->ref.ctx, buft->ref) != 0;
    seen.emplace_back(buft, ok);
  }
  if (!ok) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT,
                      "%s: tensor %s lives in a buffer of '%s' (device '%s'), which backend '%s' cannot use: "
                      "copy it into a buffer of this backend or use the scheduler",
                      fn, describe(t).c_str(), buft->name.c_str(), device_label(buft->device).c_str(),
                      be->name.c_str());
  }
  return BP_OK;
}

// Whether the plugin was built to know what |node| means (abi/minor.hpp):
// a ROPE with frequency factors is never shown to a plugin of ABI 1.1,
// which would check only its first two sources and ignore the factors.
bool plugin_may_see(const bp_backend *be, const bp_tensor *node) {
  const bp::core::plugin_core *plugin = be->device ? be->device->plugin : nullptr;
  return plugin == nullptr || bp::abi::plugin_may_see(plugin->abi_minor, node);
}

// supports_op as the host asks it: "no" without asking the plugin for a
// node it predates, else the plugin's answer.
bool plugin_supports_op(const bp_backend *be, const bp_tensor *node) {
  return plugin_may_see(be, node) && be->ref.iface->supports_op(be->ref.ctx, node) != 0;
}

// Everything the plugin relies on before it sees |graph|.
bp_status validate_graph(bp_backend *be, const bp_graph *graph, const char *fn) {
  std::vector<std::pair<const bp_buffer_type *, bool>> seen;
  for (bp_tensor *node : graph->nodes) {
    if (bp_status st = validate_node(node); st != BP_OK) return st;
    if (bp_op_is_view(node->op)) {
      // Views compute nothing, but their memory must follow their source.
      if (node->view_src != nullptr && node->buffer == nullptr && node->view_src->buffer != nullptr) {
        if (bp_status st = view_init(node, fn); st != BP_OK) return st;
      }
      continue;
    }
    if (bp_status st = check_tensor_memory(be, node, node, seen, fn); st != BP_OK) return st;
    for (bp_tensor *src : node->src) {
      if (src == nullptr) continue;
      if (bp_status st = check_tensor_memory(be, src, node, seen, fn); st != BP_OK) return st;
    }
    if (!plugin_supports_op(be, node)) {
      const std::string why = plugin_may_see(be, node)
                                  ? std::string()
                                  : " (its plugin was built for ABI " + std::to_string(BP_PLUGIN_ABI_VERSION) + "." +
                                        std::to_string(be->device->plugin->abi_minor) +
                                        ", which predates this form of the op: ABI " +
                                        std::to_string(BP_PLUGIN_ABI_VERSION) + "." +
                                        std::to_string(bp::abi::op_min_minor(node)) + " added it)";
      return set_errorf(BP_ERR_UNIMPLEMENTED,
                        "%s: backend '%s' cannot run %s for node %s%s: use another backend or the scheduler, which "
                        "falls back to the next backend",
                        fn, be->name.c_str(), bp_op_name(node->op), describe(node).c_str(), why.c_str());
    }
  }
  return BP_OK;
}

bp_status compute_async(bp_backend *be, const bp_graph *graph, const char *fn) {
  if (bp_status st = usable_backend(be, fn); st != BP_OK) return st;
  if (!handle_ok(graph, TAG_GRAPH)) return bad_handle(fn, "graph", graph, TAG_GRAPH);
  // Validation included: it is host time every submission pays.
  trace::span span(be->ref.ctx, "submit", "submit");
  if (span.active()) span.args() = "\"nodes\":" + std::to_string(graph->nodes.size());
  if (bp_status st = validate_graph(be, graph, fn); st != BP_OK) return st;
  if (graph->nodes.empty()) return BP_OK;
  bp_graph_desc desc{};
  desc.struct_size = sizeof desc;
  desc.n_nodes = static_cast<uint32_t>(graph->nodes.size());
  desc.nodes = graph->nodes.data();
  bp_error err{};
  bp_status st = be->ref.iface->graph_compute(be->ref.ctx, &desc, &err);
  if (st != BP_OK) {
    return plugin_failed(be->device, st, err,
                         "computing a graph of " + std::to_string(desc.n_nodes) + " nodes on '" + be->name + "'");
  }
  return BP_OK;
}

// Whether the plugin's async transfer may see |t|: its memory must belong
// to the backend's own plugin (the plugin reads t->buffer_ctx).
bool async_ok(const bp_backend *be, const bp_tensor *t) {
  return t->buffer != nullptr && handle_ok(t->buffer, TAG_BUFFER) &&
         t->buffer->buft->device->plugin == be->device->plugin;
}

}  // namespace

extern "C" {

BP_API void bp_backend_free(bp_backend *backend) {
  BP_API_SCOPE();
  if (backend == nullptr) return;
  if (!free_check(backend, TAG_BACKEND, "bp_backend_free", "backend")) return;
  bp::core::plugin_core *plugin = backend->device->plugin;
  trace::forget_backend(backend->ref.ctx);
  trace::capture_drop(backend->ref.ctx);
  backend->ref.iface->free(backend->ref.ctx);
  retire_handle(backend);
  plugin_release(plugin);
}

BP_API const char *bp_backend_name(const bp_backend *backend) {
  BP_API_SCOPE();
  if (!backend_ok(backend, "bp_backend_name")) return nullptr;
  return backend->name.c_str();
}

BP_API bp_device *bp_backend_device(const bp_backend *backend) {
  BP_API_SCOPE();
  if (!backend_ok(backend, "bp_backend_device")) return nullptr;
  return backend->device;
}

BP_API bp_buffer_type *bp_backend_buffer_type(bp_backend *backend) {
  BP_API_SCOPE();
  if (!backend_ok(backend, "bp_backend_buffer_type")) return nullptr;
  return backend->buft;
}

BP_API bp_status bp_backend_alloc_buffer(bp_backend *backend, size_t size, bp_buffer **out_buffer) {
  BP_API_SCOPE();
  if (out_buffer != nullptr) *out_buffer = nullptr;
  if (!backend_ok(backend, "bp_backend_alloc_buffer")) return BP_ERR_INVALID_ARGUMENT;
  return bp_buffer_type_alloc(backend->buft, size, out_buffer);
}

BP_API size_t bp_backend_alignment(bp_backend *backend) {
  BP_API_SCOPE();
  if (!backend_ok(backend, "bp_backend_alignment")) return 0;
  return backend->buft->alignment;
}

BP_API bp_status bp_backend_graph_compute_async(bp_backend *backend, const bp_graph *graph) {
  return api_guard([&] { return compute_async(backend, graph, "bp_backend_graph_compute_async"); });
}

BP_API bp_status bp_backend_graph_compute(bp_backend *backend, const bp_graph *graph) {
  return api_guard([&]() -> bp_status {
    if (bp_status st = compute_async(backend, graph, "bp_backend_graph_compute"); st != BP_OK) return st;
    return call_synchronize(backend);
  });
}

BP_API bp_status bp_backend_synchronize(bp_backend *backend) {
  return api_guard([&]() -> bp_status {
    if (bp_status st = usable_backend(backend, "bp_backend_synchronize"); st != BP_OK) return st;
    return call_synchronize(backend);
  });
}

BP_API bool bp_backend_supports_op(bp_backend *backend, const bp_tensor *op) {
  BP_API_SCOPE();
  if (usable_backend(backend, "bp_backend_supports_op") != BP_OK) return false;
  if (op == nullptr) return set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_supports_op: op is NULL"), false;
  if (bp_op_is_view(op->op)) return true;  // nothing to compute
  return plugin_supports_op(backend, op);
}

BP_API bool bp_backend_supports_buft(bp_backend *backend, const bp_buffer_type *buft) {
  BP_API_SCOPE();
  if (usable_backend(backend, "bp_backend_supports_buft") != BP_OK) return false;
  if (!handle_ok(buft, TAG_BUFT)) {
    bad_handle("bp_backend_supports_buft", "buffer type", buft, TAG_BUFT);
    return false;
  }
  return backend->ref.iface->supports_buft(backend->ref.ctx, buft->ref) != 0;
}

BP_API bool bp_backend_offload_op(bp_backend *backend, const bp_tensor *op) {
  BP_API_SCOPE();
  if (usable_backend(backend, "bp_backend_offload_op") != BP_OK) return false;
  if (op == nullptr) return set_error(BP_ERR_INVALID_ARGUMENT, "bp_backend_offload_op: op is NULL"), false;
  if (!BP_HAS_SLOT(backend->ref.iface, bp_backend_i, offload_op)) return false;
  return backend->ref.iface->offload_op(backend->ref.ctx, op) != 0;
}

BP_API bp_status bp_backend_tensor_set_async(bp_backend *backend, bp_tensor *t, const void *data, size_t offset,
                                             size_t size) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_backend_tensor_set_async";
    if (bp_status st = usable_backend(backend, fn); st != BP_OK) return st;
    if (t == nullptr || !async_ok(backend, t) || !BP_HAS_SLOT(backend->ref.iface, bp_backend_i, set_tensor_async)) {
      // Fallback: finish queued work, then a synchronous write (which also
      // reports a tensor without memory or a bad range).
      if (bp_status st = call_synchronize(backend); st != BP_OK) return st;
      return bp_tensor_set(t, data, offset, size);
    }
    if (data == nullptr && size != 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    if (bp_status st = check_range(t, offset, size, fn); st != BP_OK) return st;
    if (size == 0) return BP_OK;
    bp_error err{};
    bp_status st = backend->ref.iface->set_tensor_async(backend->ref.ctx, t, data, offset, size, &err);
    if (st != BP_OK) return plugin_failed(backend->device, st, err, "queueing a write of " + describe(t));
    return BP_OK;
  });
}

BP_API bp_status bp_backend_tensor_get_async(bp_backend *backend, const bp_tensor *t, void *data, size_t offset,
                                             size_t size) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_backend_tensor_get_async";
    if (bp_status st = usable_backend(backend, fn); st != BP_OK) return st;
    if (t == nullptr || !async_ok(backend, t) || !BP_HAS_SLOT(backend->ref.iface, bp_backend_i, get_tensor_async)) {
      if (bp_status st = call_synchronize(backend); st != BP_OK) return st;
      return bp_tensor_get(t, data, offset, size);
    }
    if (data == nullptr && size != 0) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
    if (bp_status st = check_range(t, offset, size, fn); st != BP_OK) return st;
    if (size == 0) return BP_OK;
    bp_error err{};
    bp_status st = backend->ref.iface->get_tensor_async(backend->ref.ctx, t, data, offset, size, &err);
    if (st != BP_OK) return plugin_failed(backend->device, st, err, "queueing a read of " + describe(t));
    return BP_OK;
  });
}

}  // extern "C"

// ---- graph plans ---------------------------------------------------------

struct bp_graph_plan {
  uint32_t tag = bp::core::TAG_PLAN;
  bp::core::live_mark live;
  bp_backend *backend = nullptr;
  void *plan = nullptr;  // the plugin's
  uint32_t n_nodes = 0;
};

namespace {

bool has_plans(const bp_backend *be) {
  const bp_backend_i *i = be->ref.iface;
  return BP_HAS_SLOT(i, bp_backend_i, graph_plan_create) && BP_HAS_SLOT(i, bp_backend_i, graph_plan_free) &&
         BP_HAS_SLOT(i, bp_backend_i, graph_plan_compute) && i->graph_plan_create && i->graph_plan_free &&
         i->graph_plan_compute;
}

bp_status plan_create(bp_backend *be, const bp_graph *graph, bp_graph_plan **out, const char *fn) {
  if (out == nullptr) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out_plan is NULL", fn);
  *out = nullptr;
  if (bp_status st = usable_backend(be, fn); st != BP_OK) return st;
  if (!handle_ok(graph, TAG_GRAPH)) return bad_handle(fn, "graph", graph, TAG_GRAPH);
  if (!has_plans(be))
    return set_errorf(BP_ERR_UNIMPLEMENTED,
                      "%s: backend '%s' has no graph plans; run the graph with "
                      "bp_backend_graph_compute",
                      fn, be->name.c_str());
  trace::span span(be->ref.ctx, "plan", "plan build");
  if (span.active()) span.args() = "\"nodes\":" + std::to_string(graph->nodes.size());
  if (bp_status st = validate_graph(be, graph, fn); st != BP_OK) return st;
  // Views compute nothing: the plugin gets the nodes that run.
  std::vector<bp_tensor *> nodes;
  for (bp_tensor *n : graph->nodes)
    if (!bp_op_is_view(n->op)) nodes.push_back(n);
  bp_graph_desc desc{};
  desc.struct_size = sizeof desc;
  desc.n_nodes = static_cast<uint32_t>(nodes.size());
  desc.nodes = nodes.data();
  auto plan = std::make_unique<bp_graph_plan>();
  plan->backend = be;
  plan->n_nodes = desc.n_nodes;
  bp_error err{};
  bp_status st = be->ref.iface->graph_plan_create(be->ref.ctx, &desc, &plan->plan, &err);
  if (st != BP_OK)
    return plugin_failed(be->device, st, err,
                         "making a plan of " + std::to_string(desc.n_nodes) + " nodes on '" + be->name + "'");
  *out = plan.release();
  return BP_OK;
}

}  // namespace

extern "C" {

BP_API bp_status bp_graph_plan_new(bp_backend *backend, const bp_graph *graph, bp_graph_plan **out_plan) {
  return api_guard([&] { return plan_create(backend, graph, out_plan, "bp_graph_plan_new"); });
}

BP_API bp_status bp_graph_plan_compute_async(bp_graph_plan *plan) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_graph_plan_compute_async";
    if (!handle_ok(plan, TAG_PLAN)) return bad_handle(fn, "graph plan", plan, TAG_PLAN);
    bp_backend *be = plan->backend;
    if (bp_status st = usable_backend(be, fn); st != BP_OK) return st;
    trace::span span(be->ref.ctx, "submit", "plan submit");
    if (span.active()) span.args() = "\"nodes\":" + std::to_string(plan->n_nodes);
    bp_error err{};
    bp_status st = be->ref.iface->graph_plan_compute(be->ref.ctx, plan->plan, &err);
    if (st != BP_OK)
      return plugin_failed(be->device, st, err,
                           "running a plan of " + std::to_string(plan->n_nodes) + " nodes on '" + be->name + "'");
    return BP_OK;
  });
}

BP_API void bp_graph_plan_free(bp_graph_plan *plan) {
  BP_API_SCOPE();
  if (plan == nullptr) return;
  if (!free_check(plan, TAG_PLAN, "bp_graph_plan_free", "graph plan")) return;
  bp_backend *be = plan->backend;
  // The plugin may still be running the plan: nothing it reads may go.
  if (handle_ok(be, TAG_BACKEND)) {
    call_synchronize(be);
    be->ref.iface->graph_plan_free(be->ref.ctx, plan->plan);
  }
  retire_handle(plan);
}

}  // extern "C"
