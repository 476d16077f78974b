// gallocr.cpp: the graph allocator (bp_gallocr_*), on top of plan_memory().
#include "core/alloc/gallocr.hpp"

#include <new>
#include <string>

#include "core/objects.hpp"  // view_init

namespace bp::core {

bool gallocr_owns(const bp_gallocr *ga, const bp_tensor *t) {
  if (!t->buffer) return false;
  if (t->buffer == ga->buffer) return true;  // nobody else places into our buffer
  auto it = ga->placed.find(t);
  return it != ga->placed.end() && it->second.buffer == t->buffer;
}

bool gallocr_external(const bp_gallocr *ga, const bp_tensor *t) {
  return (t->data != nullptr || t->buffer != nullptr) && !gallocr_owns(ga, t);
}

namespace {

// Makes the buffer hold at least |size| bytes. The old buffer is released
// before a larger one is requested, so a failure leaves no buffer (and an
// allocator that can try again) rather than two.
bp_status ensure_buffer(bp_gallocr *ga, size_t size, const char *fn) {
  if (ga->buffer && bp_buffer_size(ga->buffer) >= size) return BP_OK;
  if (size == 0 && ga->buffer) return BP_OK;
  size_t max = bp_buffer_type_max_size(ga->buft);
  if (size > max)
    return set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
                      "%s: the graph needs %zu bytes of '%s' at its peak, more than the buffer type's max_size "
                      "(%zu bytes per buffer); split the graph or use a device with larger buffers",
                      fn, size, bp_buffer_type_name(ga->buft), max);
  if (ga->buffer) {
    bp_buffer_free(ga->buffer);
    ga->buffer = nullptr;
  }
  bp_buffer *buf = nullptr;
  bp_status st = bp_buffer_type_alloc(ga->buft, size, &buf);
  if (st != BP_OK) {
    std::string why = bp_last_error();
    return set_errorf(st, "%s: allocating the %zu-byte compute buffer of '%s': %s", fn, size,
                      bp_buffer_type_name(ga->buft), why.c_str());
  }
  bp_buffer_set_usage(buf, BP_BUFFER_USAGE_COMPUTE);
  ga->buffer = buf;
  return BP_OK;
}

// The plain request for a user graph: every root without memory (or with
// memory this allocator gave it) is ours.
alloc_request graph_request(const bp_gallocr *ga, const bp_graph *graph) {
  alloc_request req;
  req.steps.reserve(graph->nodes.size());
  for (bp_tensor *t : graph->nodes) {
    alloc_step s;
    s.t = t;
    if (t)
      for (int j = 0; j < BP_MAX_SRC; ++j) s.src[j] = t->src[j];
    req.steps.push_back(s);
  }
  req.leafs = graph->leafs;
  req.mine = [ga](const bp_tensor *t) { return !gallocr_external(ga, t); };
  return req;
}

bp_status check_args(const bp_gallocr *ga, const bp_graph *graph, const char *fn) {
  if (!handle_ok(ga, TAG_GALLOCR)) return bad_handle(fn, "galloc", ga, TAG_GALLOCR);
  if (!handle_ok(graph, TAG_GRAPH)) return bad_handle(fn, "graph", graph, TAG_GRAPH);
  return BP_OK;
}

}  // namespace

bp_status gallocr_reserve_request(bp_gallocr *ga, const alloc_request &req) {
  alloc_plan plan;
  bp_status st = plan_memory(req, ga->buft, &plan);
  if (st != BP_OK) return st;
  ga->last_plan_size = plan.size;
  ga->last_n_inplace = plan.n_inplace;
  return ensure_buffer(ga, plan.size, "bp_gallocr_reserve");
}

bp_status gallocr_alloc_request(bp_gallocr *ga, const alloc_request &req) {
  alloc_plan plan;
  bp_status st = plan_memory(req, ga->buft, &plan);
  if (st != BP_OK) return st;
  ga->last_plan_size = plan.size;
  ga->last_n_inplace = plan.n_inplace;
  if (!plan.placements.empty()) {
    st = ensure_buffer(ga, plan.size, "bp_gallocr_alloc_graph");
    if (st != BP_OK) return st;
  }
  // |placed| remembers tensors left in buffers this allocator freed, and
  // those of the last kKeptPlans plans in the current buffer (a kept graph
  // planned again after the buffer is replaced must still be recognised), so
  // it does not grow with every new graph.
  constexpr uint64_t kKeptPlans = 256;
  const uint64_t plan_id = ++ga->plans;
  std::unordered_map<const bp_tensor *, bp_gallocr::placement> placed;
  for (auto &[t, p] : ga->placed)
    if (p.buffer != ga->buffer || p.plan + kKeptPlans > plan_id) placed.emplace(t, p);
  for (auto &[t, offset] : plan.placements) placed[t] = {ga->buffer, plan_id};
  ga->placed.swap(placed);
  for (auto &[t, offset] : plan.placements) {
    st = bp_buffer_place_tensor(ga->buffer, t, offset);
    if (st != BP_OK) return st;
  }
  for (bp_tensor *v : plan.views) {
    st = view_init(v, "bp_gallocr_alloc_graph");
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

}  // namespace bp::core

using bp::core::api_guard;

extern "C" {

bp_gallocr *bp_gallocr_new(bp_buffer_type *buft) {
  return bp::core::api_guard_ptr<bp_gallocr>([&]() -> bp_gallocr * {
    if (!bp::core::handle_ok(buft, bp::core::TAG_BUFT)) {
      bp::core::bad_handle("bp_gallocr_new", "buft", buft, bp::core::TAG_BUFT);
      return nullptr;
    }
    auto *ga = new bp_gallocr;
    ga->buft = buft;
    return ga;
  });
}

void bp_gallocr_free(bp_gallocr *galloc) {
  BP_API_SCOPE();
  if (galloc == nullptr) return;
  if (!bp::core::free_check(galloc, bp::core::TAG_GALLOCR, "bp_gallocr_free", "galloc")) return;
  bp_buffer_free(galloc->buffer);
  bp::core::retire_handle(galloc);
}

bp_status bp_gallocr_reserve(bp_gallocr *galloc, const bp_graph *graph) {
  return api_guard([&] {
    bp_status st = bp::core::check_args(galloc, graph, "bp_gallocr_reserve");
    if (st != BP_OK) return st;
    return bp::core::gallocr_reserve_request(galloc, bp::core::graph_request(galloc, graph));
  });
}

bp_status bp_gallocr_alloc_graph(bp_gallocr *galloc, const bp_graph *graph) {
  return api_guard([&] {
    bp_status st = bp::core::check_args(galloc, graph, "bp_gallocr_alloc_graph");
    if (st != BP_OK) return st;
    return bp::core::gallocr_alloc_request(galloc, bp::core::graph_request(galloc, graph));
  });
}

size_t bp_gallocr_buffer_size(const bp_gallocr *galloc) {
  BP_API_SCOPE();
  if (!bp::core::handle_ok(galloc, bp::core::TAG_GALLOCR)) {
    bp::core::bad_handle("bp_gallocr_buffer_size", "galloc", galloc, bp::core::TAG_GALLOCR);
    return 0;
  }
  return galloc->buffer ? bp_buffer_size(galloc->buffer) : 0;
}

}  // extern "C"
