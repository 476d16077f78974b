// alloc.cpp: memory for a split graph, through one graph allocator per
// buffer type, and the node lists each split hands to its backend.
//
// Every allocator plans over the whole split graph in execution order (the
// copies of split k come right before its nodes), so a tensor read by a copy
// on another backend stays alive until that copy ran. Each allocator only
// places the tensors assigned to a backend of its buffer type. With several
// pipeline slots, copies are never freed: the slot used by the previous run
// may still be in flight.
#include <algorithm>

#include "core/errors.hpp"
#include "core/handles.hpp"
#include "core/sched/sched.hpp"

namespace bp::core {
namespace {

alloc_request build_request(bp_sched *s, const bp_graph *g, int galloc) {
  alloc_request req;
  for (const sched_split &sp : s->splits) {
    for (int ci : sp.inputs) {
      const sched_copy &c = s->copies[(size_t)ci];
      for (int v = 0; v < s->n_slots; ++v) {
        alloc_step st;
        st.t = c.versions[v];
        st.src[0] = c.src;
        st.allow_inplace = false;
        req.steps.push_back(st);
        if (s->n_slots > 1) req.keep.insert(c.versions[v]);
      }
    }
    for (int i = sp.first; i < sp.end; ++i) {
      bp_tensor *t = g->nodes[(size_t)i];
      alloc_step st;
      st.t = t;
      auto r = s->remap.find(t);
      for (int j = 0; j < BP_MAX_SRC; ++j) {
        int ci = r == s->remap.end() ? -1 : r->second[(size_t)j];
        st.src[j] = ci < 0 ? t->src[j] : s->copies[(size_t)ci].versions[0];
      }
      req.steps.push_back(st);
    }
  }
  req.leafs = g->leafs;
  req.mine = [s, galloc](const bp_tensor *t) {
    int b = sched_tensor_backend(s, t);
    if (b < 0 || s->galloc_of[(size_t)b] != galloc) return false;
    if (!t->buffer && !t->data) return true;
    for (const auto &ga : s->gallocs)
      if (gallocr_owns(ga.get(), t)) return true;
    return false;
  };
  return req;
}

void build_exec_lists(bp_sched *s, const bp_graph *g) {
  for (sched_split &sp : s->splits) {
    sp.exec.assign((size_t)s->n_slots, bp_graph{});
    for (int v = 0; v < s->n_slots; ++v) {
      for (int pos : sp.exec_pos) {
        bp_tensor *t = g->nodes[(size_t)pos];
        auto r = s->remap.find(t);
        if (r == s->remap.end()) {
          sp.exec[(size_t)v].nodes.push_back(t);
          continue;
        }
        // A shadow: the node as the user built it (same memory, same
        // parameters), reading this slot's copies instead of remote sources.
        bp_tensor &shadow = s->owned.emplace_back(*t);
        for (int j = 0; j < BP_MAX_SRC; ++j)
          if (r->second[(size_t)j] >= 0) shadow.src[j] = s->copies[(size_t)r->second[(size_t)j]].versions[v];
        sp.exec[(size_t)v].nodes.push_back(&shadow);
      }
      sp.exec[(size_t)v].max_nodes = std::max<size_t>(sp.exec[(size_t)v].nodes.size(), 1);
    }
  }
}

}  // namespace

bp_status sched_reserve_memory(bp_sched *s, const bp_graph *g) {
  for (int k = 0; k < (int)s->gallocs.size(); ++k) {
    bp_status st = gallocr_reserve_request(s->gallocs[(size_t)k].get(), build_request(s, g, k));
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

bp_status sched_alloc_memory(bp_sched *s, const bp_graph *g) {
  for (int k = 0; k < (int)s->gallocs.size(); ++k) {
    bp_status st = gallocr_alloc_request(s->gallocs[(size_t)k].get(), build_request(s, g, k));
    if (st != BP_OK) return st;
  }
  build_exec_lists(s, g);
  return BP_OK;
}

}  // namespace bp::core
