// api.cpp: the public bp_sched_* calls (backplane.h). Checks arguments,
// keeps the object's state consistent, and delegates each job to the other
// files of core/sched/.
#include <cstring>
#include <string>

#include "core/objects.hpp"  // handle_ok, bad_handle
#include "core/sched/sched.hpp"

namespace bp::core {

void sched_forget_graph(bp_sched *s) {
  s->splits.clear();
  s->copies.clear();
  s->remap.clear();
  s->assigned.clear();
  s->owned.clear();
  s->graph = nullptr;
  s->graph_nodes.clear();
  s->allocated = false;
}

namespace {

int backend_index(const bp_sched *s, const bp_backend *be) {
  for (size_t i = 0; i < s->backends.size(); ++i)
    if (s->backends[i] == be) return (int)i;
  return -1;
}

bp_status check_sched(const bp_sched *s, const char *fn) {
  return handle_ok(s, TAG_SCHED) ? BP_OK : bad_handle(fn, "sched", s, TAG_SCHED);
}

bp_status check_graph(const bp_sched *s, const bp_graph *g, const char *fn) {
  if (!handle_ok(g, TAG_GRAPH)) return bad_handle(fn, "graph", g, TAG_GRAPH);
  if (g->nodes.size() > s->graph_size)
    return set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
                      "%s: the graph has %zu nodes but the scheduler was created with graph_size=%zu; create it "
                      "with a larger graph_size",
                      fn, g->nodes.size(), s->graph_size);
  for (size_t i = 0; i < g->nodes.size(); ++i)
    if (!g->nodes[i]) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: graph node %zu is NULL", fn, i);
  return BP_OK;
}

// Assignment and splits of |g|, with the error annotated on failure.
bp_status plan(bp_sched *s, const bp_graph *g) {
  sched_forget_graph(s);
  bp_status st = sched_assign(s, g);
  if (st == BP_OK) st = sched_split_graph(s, g);
  return st;
}

bp_status alloc_graph(bp_sched *s, bp_graph *g) {
  bp_status st = sched_synchronize_all(s);  // memory may move: nothing may still run
  if (st != BP_OK) return st;
  st = plan(s, g);
  if (st == BP_OK) st = sched_alloc_memory(s, g);
  if (st != BP_OK) {
    sched_forget_graph(s);
    return st;
  }
  s->graph = g;
  s->graph_nodes = g->nodes;
  s->allocated = true;
  return BP_OK;
}

bool is_allocated_for(const bp_sched *s, const bp_graph *g) {
  return s->allocated && s->graph == g && s->graph_nodes == g->nodes;
}

bp_status compute_async(bp_sched *s, bp_graph *g, const char *fn) {
  bp_status st = check_sched(s, fn);
  if (st == BP_OK) st = check_graph(s, g, fn);
  if (st != BP_OK) return st;
  if (!is_allocated_for(s, g)) {
    st = alloc_graph(s, g);
    if (st != BP_OK) return st;
  }
  return sched_compute_splits(s);
}

bp_sched *sched_new(bp_backend **backends, bp_buffer_type **bufts, size_t n_backends, size_t graph_size,
                    bool parallel) {
  const char *fn = "bp_sched_new";
  if (n_backends < 1) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: n_backends = 0: needs at least one backend", fn);
    return nullptr;
  }
  if (!backends) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: backends is NULL but n_backends = %zu: pass an array of that many", fn,
               n_backends);
    return nullptr;
  }
  auto s = std::make_unique<bp_sched>();
  for (size_t i = 0; i < n_backends; ++i) {
    bp_backend *be = backends[i];
    if (!handle_ok(be, TAG_BACKEND)) {
      bad_handle(fn, ("backends[" + std::to_string(i) + "]").c_str(), be, TAG_BACKEND);
      return nullptr;
    }
    if (backend_index(s.get(), be) >= 0) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: backend '%s' is listed twice; create a second backend instead", fn,
                 bp_backend_name(be));
      return nullptr;
    }
    bp_buffer_type *buft = bufts && bufts[i] ? bufts[i] : bp_backend_buffer_type(be);
    if (!handle_ok(buft, TAG_BUFT)) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: backend '%s' has no usable buffer type", fn, bp_backend_name(be));
      return nullptr;
    }
    if (bufts && bufts[i] && !bp_backend_supports_buft(be, buft)) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: backend '%s' cannot use buffer type '%s' given for it", fn,
                 bp_backend_name(be), bp_buffer_type_name(buft));
      return nullptr;
    }
    s->backends.push_back(be);
    s->bufts.push_back(buft);
  }
  bp_backend *last = s->backends.back();
  if (!last->device || last->device->type != BP_DEVICE_TYPE_CPU) {
    set_errorf(BP_ERR_INVALID_ARGUMENT,
               "%s: the last backend must be a CPU backend (the fallback for every op), got '%s'; append \"cpu\" "
               "to the list",
               fn, bp_backend_name(last));
    return nullptr;
  }
  for (size_t i = 0; i < s->bufts.size(); ++i) {
    int found = -1;
    for (size_t k = 0; k < i; ++k)
      if (s->bufts[k] == s->bufts[i]) found = s->galloc_of[k];
    if (found < 0) {
      bp_gallocr *ga = bp_gallocr_new(s->bufts[i]);
      if (!ga) return nullptr;
      s->gallocs.emplace_back(ga);
      found = (int)s->gallocs.size() - 1;
    }
    s->galloc_of.push_back(found);
  }
  s->readers_of.assign(s->gallocs.size(), {});
  s->graph_size = graph_size == 0 ? 4096 : graph_size;
  s->n_slots = parallel ? BP_SCHED_MAX_COPIES : 1;
  s->events.assign(s->backends.size(), {});
  for (size_t i = 0; i < s->backends.size(); ++i) {
    bp_device *dev = s->backends[i]->device;
    if (!dev || !(dev->caps & BP_DEVICE_CAP_EVENTS)) continue;
    std::vector<bp_event *> row;
    for (int v = 0; v < s->n_slots; ++v) {
      bp_event *ev = nullptr;
      if (bp_event_new(dev, &ev) != BP_OK) break;
      row.push_back(ev);
    }
    if ((int)row.size() == s->n_slots) {
      s->events[i] = std::move(row);
    } else {  // no events after all: ordering falls back to synchronize
      for (bp_event *ev : row) bp_event_free(ev);
      bp_clear_error();
    }
  }
  return s.release();
}

}  // namespace
}  // namespace bp::core

using namespace bp::core;

extern "C" {

bp_sched *bp_sched_new(bp_backend **backends, bp_buffer_type **bufts, size_t n_backends, size_t graph_size,
                       bool parallel) {
  return api_guard_ptr<bp_sched>([&] { return sched_new(backends, bufts, n_backends, graph_size, parallel); });
}

void bp_sched_free(bp_sched *sched) {
  BP_API_SCOPE();
  if (sched == nullptr) return;
  if (!free_check(sched, TAG_SCHED, "bp_sched_free", "sched")) return;
  sched_synchronize_all(sched);
  for (auto &row : sched->events)
    for (bp_event *ev : row) bp_event_free(ev);
  retire_handle(sched);
}

bp_status bp_sched_set_graph_plans(bp_sched *sched, bool enable) {
  return api_guard([&]() -> bp_status {
    bp_status st = check_sched(sched, "bp_sched_set_graph_plans");
    if (st != BP_OK) return st;
    if (sched->use_plans != enable) {
      st = sched_synchronize_all(sched);  // a plan may still run
      for (auto &sp : sched->splits) sp.plans.clear();
      sched->use_plans = enable;
    }
    return st;
  });
}

bp_status bp_sched_reserve(bp_sched *sched, bp_graph *measure_graph) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_sched_reserve";
    bp_status st = check_sched(sched, fn);
    if (st != BP_OK) return st;  // nothing of a bad handle may be touched below
    st = check_graph(sched, measure_graph, fn);
    if (st == BP_OK) st = sched_synchronize_all(sched);
    if (st == BP_OK) st = plan(sched, measure_graph);
    if (st == BP_OK) st = sched_reserve_memory(sched, measure_graph);
    sched_forget_graph(sched);  // the measure graph is not the one that runs
    return st;
  });
}

size_t bp_sched_backend_count(const bp_sched *sched) {
  BP_API_SCOPE();
  if (check_sched(sched, "bp_sched_backend_count") != BP_OK) return 0;
  return sched->backends.size();
}

bp_backend *bp_sched_backend(const bp_sched *sched, size_t i) {
  BP_API_SCOPE();
  if (check_sched(sched, "bp_sched_backend") != BP_OK) return nullptr;
  if (i >= sched->backends.size()) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_sched_backend: i = %zu is outside 0..%zu", i, sched->backends.size() - 1);
    return nullptr;
  }
  return sched->backends[i];
}

size_t bp_sched_split_count(const bp_sched *sched) {
  BP_API_SCOPE();
  if (check_sched(sched, "bp_sched_split_count") != BP_OK) return 0;
  return sched->splits.size();
}

size_t bp_sched_copy_count(const bp_sched *sched) {
  BP_API_SCOPE();
  if (check_sched(sched, "bp_sched_copy_count") != BP_OK) return 0;
  return sched->copies.size();
}

size_t bp_sched_buffer_size(const bp_sched *sched, bp_backend *backend) {
  BP_API_SCOPE();
  if (!handle_ok(sched, TAG_SCHED)) {
    bad_handle("bp_sched_buffer_size", "sched", sched, TAG_SCHED);
    return 0;
  }
  int b = backend_index(sched, backend);
  if (b < 0) {
    set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_sched_buffer_size: backend is not one of the scheduler's");
    return 0;
  }
  return bp_gallocr_buffer_size(sched->gallocs[(size_t)sched->galloc_of[(size_t)b]].get());
}

bp_status bp_sched_set_tensor_backend(bp_sched *sched, bp_tensor *node, bp_backend *backend) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_sched_set_tensor_backend";
    bp_status st = check_sched(sched, fn);
    if (st != BP_OK) return st;
    if (!node) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: node is NULL", fn);
    int b = backend_index(sched, backend);
    if (b < 0)
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: backend '%s' is not one of the scheduler's backends", fn,
                        handle_ok(backend, TAG_BACKEND) ? bp_backend_name(backend) : "(invalid handle)");
    auto it = sched->pinned.find(node);
    if (it == sched->pinned.end() || it->second != b) {
      sched->pinned[node] = b;
      sched->allocated = false;  // the next compute assigns again
    }
    return BP_OK;
  });
}

bp_backend *bp_sched_get_tensor_backend(const bp_sched *sched, const bp_tensor *node) {
  BP_API_SCOPE();
  if (check_sched(sched, "bp_sched_get_tensor_backend") != BP_OK) return nullptr;
  if (!node) {
    set_error(BP_ERR_INVALID_ARGUMENT, "bp_sched_get_tensor_backend: node is NULL");
    return nullptr;
  }
  int b = sched_tensor_backend(sched, node);
  if (b < 0) {
    auto it = sched->pinned.find(node);
    if (it != sched->pinned.end()) b = it->second;
  }
  return b < 0 ? nullptr : sched->backends[(size_t)b];
}

bp_status bp_sched_alloc_graph(bp_sched *sched, bp_graph *graph) {
  return api_guard([&]() -> bp_status {
    const char *fn = "bp_sched_alloc_graph";
    bp_status st = check_sched(sched, fn);
    if (st == BP_OK) st = check_graph(sched, graph, fn);
    return st != BP_OK ? st : alloc_graph(sched, graph);
  });
}

bp_status bp_sched_graph_compute_async(bp_sched *sched, bp_graph *graph) {
  return api_guard([&]() -> bp_status { return compute_async(sched, graph, "bp_sched_graph_compute_async"); });
}

bp_status bp_sched_graph_compute(bp_sched *sched, bp_graph *graph) {
  return api_guard([&]() -> bp_status {
    bp_status st = compute_async(sched, graph, "bp_sched_graph_compute");
    bp_status sync = handle_ok(sched, TAG_SCHED) ? sched_synchronize_all(sched) : BP_OK;
    return st != BP_OK ? st : sync;
  });
}

bp_status bp_sched_synchronize(bp_sched *sched) {
  return api_guard([&]() -> bp_status {
    bp_status st = check_sched(sched, "bp_sched_synchronize");
    return st != BP_OK ? st : sched_synchronize_all(sched);
  });
}

void bp_sched_reset(bp_sched *sched) {
  BP_API_SCOPE();
  if (check_sched(sched, "bp_sched_reset") != BP_OK) return;
  sched_synchronize_all(sched);
  sched_forget_graph(sched);
  sched->pinned.clear();
  sched->cur_slot = 0;
}

void bp_sched_set_eval_callback(bp_sched *sched, bp_sched_eval_callback callback, void *user_data) {
  BP_API_SCOPE();
  if (check_sched(sched, "bp_sched_set_eval_callback") != BP_OK) return;
  sched->callback = callback;
  sched->callback_data = user_data;
}

bp_status bp_sched_split_describe(const bp_sched *sched, size_t i, bp_sched_split_info *out) {
  BP_API_SCOPE();
  const char *fn = "bp_sched_split_describe";
  if (!handle_ok(sched, TAG_SCHED)) return bad_handle(fn, "sched", sched, TAG_SCHED);
  if (!out) return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  if (i >= sched->splits.size())
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: split %zu out of range (the last graph has %zu splits)", fn, i,
                      sched->splits.size());
  if (out->struct_size < sizeof(uint32_t))
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: set out->struct_size = sizeof(bp_sched_split_info)", fn);
  const sched_split &sp = sched->splits[i];
  bp_sched_split_info info{};
  info.struct_size = out->struct_size;
  info.backend = sched->backends[(size_t)sp.backend];
  info.first_node = (size_t)sp.first;
  info.n_nodes = (size_t)(sp.end - sp.first);
  info.n_inputs = sp.inputs.size();
  info.bytes_copied = sp.bytes;
  for (const auto &plan : sp.plans) info.n_plans += plan ? 1 : 0;
  // Only the fields the caller's struct holds (it may be an older, shorter one).
  std::memcpy(out, &info, out->struct_size < sizeof info ? out->struct_size : sizeof info);
  return BP_OK;
}

}  // extern "C"
