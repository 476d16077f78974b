// assign.cpp: which backend runs each node (rules in docs/scheduler.md).
//
//  1. pinned by the caller (bp_sched_set_tensor_backend);
//  2. the node (or its view source) already has memory in a backend's
//     buffer: the highest-priority backend that can use that buffer type
//     and run the op;
//  3. an INPUT leaf without memory: the last backend (the CPU), since the
//     caller writes it from host memory;
//  4. a source lives in a WEIGHTS buffer: the highest-priority backend that
//     can use that buffer and run the op, unless a backend of higher priority
//     still asks for it through offload_op;
//  5. expansion from assigned neighbours: non-CPU backends spread down then
//     up the node order, then every backend does, as long as it supports
//     the op; nodes whose backend shares its buffer type with a
//     higher-priority backend move up when that one can run them;
//  6. anything left: the backend that supports the op and can read the most
//     of its sources directly (ties: higher priority);
//  7. views follow their view source; leafs without memory live where their
//     first reader runs (the CPU when nothing reads them).
#include <algorithm>
#include <string>

#include "core/sched/sched.hpp"
#include "core/tensor_util.hpp"  // describe()

namespace bp::core {

bp_buffer *sched_external_buffer(const bp_sched *s, const bp_tensor *t) {
  const bp_tensor *root = alloc_root(const_cast<bp_tensor *>(t));
  if (!root || !root->buffer) return nullptr;
  for (const auto &ga : s->gallocs)
    if (gallocr_owns(ga.get(), root)) return nullptr;
  return root->buffer;
}

bool sched_supports_buft(const bp_sched *s, int backend, const bp_buffer_type *buft) {
  if (!buft) return false;
  if (s->bufts[(size_t)backend] == buft) return true;
  return bp_backend_supports_buft(s->backends[(size_t)backend], buft);
}

bp_buffer_type *sched_tensor_buft(const bp_sched *s, const bp_tensor *t) {
  if (bp_buffer *buf = sched_external_buffer(s, t)) return bp_buffer_buffer_type(buf);
  int b = sched_tensor_backend(s, t);
  return b < 0 ? nullptr : s->bufts[(size_t)b];
}

int sched_tensor_backend(const bp_sched *s, const bp_tensor *t) {
  auto it = s->assigned.find(t);
  if (it != s->assigned.end()) return it->second;
  if (t->view_src) {
    auto root = s->assigned.find(alloc_root(const_cast<bp_tensor *>(t)));
    if (root != s->assigned.end()) return root->second;
  }
  return -1;
}

namespace {

struct assigner {
  bp_sched *s;
  const bp_graph *g;
  int n;  // backends
  std::unordered_map<const bp_tensor *, std::vector<int8_t>> op_cache;  // -1 unknown, 0/1

  bool supports(int b, const bp_tensor *t) {
    if (bp_op_is_view(t->op)) return true;
    auto &row = op_cache[t];
    if (row.empty()) row.assign((size_t)n, -1);
    if (row[(size_t)b] < 0) row[(size_t)b] = bp_backend_supports_op(s->backends[(size_t)b], t) ? 1 : 0;
    return row[(size_t)b] == 1;
  }

  int get(const bp_tensor *t) const {
    auto it = s->assigned.find(t);
    return it == s->assigned.end() ? -1 : it->second;
  }

  // Highest-priority backend that can use |buft| directly and run |op|.
  int backend_for_buft(const bp_buffer_type *buft, const bp_tensor *op) {
    for (int b = 0; b < n; ++b)
      if (sched_supports_buft(s, b, buft) && supports(b, op)) return b;
    return -1;
  }

  // Rules 2-4 for one tensor; -1 when none applies. Sets an error and
  // returns -2 when the tensor's own memory is unusable by every backend.
  int from_memory_or_weights(bp_tensor *t) {
    if (bp_buffer *buf = sched_external_buffer(s, t)) {
      bp_buffer_type *buft = bp_buffer_buffer_type(buf);
      int b = backend_for_buft(buft, t);
      if (b >= 0) return b;
      set_errorf(BP_ERR_UNIMPLEMENTED,
                 "scheduler: %s (op %s) already has memory in a '%s' buffer, but no backend of the scheduler can "
                 "both use that buffer type and run the op; allocate it elsewhere or add a backend that can",
                 describe(t).c_str(), bp_op_name(t->op), bp_buffer_type_name(buft));
      return -2;
    }
    if (t->op == BP_OP_NONE) return (t->flags & BP_TENSOR_FLAG_INPUT) ? n - 1 : -1;
    if (bp_op_is_view(t->op)) return -1;
    for (bp_tensor *src : t->src) {
      if (!src) continue;
      bp_buffer *buf = sched_external_buffer(s, src);
      if (!buf || bp_buffer_get_usage(buf) != BP_BUFFER_USAGE_WEIGHTS) continue;
      int b = backend_for_buft(bp_buffer_buffer_type(buf), t);
      if (b < 0) continue;
      for (int hi = 0; hi < b; ++hi)
        if (supports(hi, t) && bp_backend_offload_op(s->backends[(size_t)hi], t)) return hi;
      return b;
    }
    return -1;
  }

  // Rule 5: one pass of expansion over the non-view nodes.
  void expand(bool forward, bool skip_cpu) {
    int cur = -1;
    size_t count = g->nodes.size();
    for (size_t k = 0; k < count; ++k) {
      bp_tensor *t = g->nodes[forward ? k : count - 1 - k];
      if (bp_op_is_view(t->op)) continue;
      int b = get(t);
      if (b >= 0) {
        cur = (skip_cpu && b == n - 1) ? -1 : b;
      } else if (cur >= 0 && supports(cur, t)) {
        s->assigned[t] = cur;
      }
    }
  }

  // Sources of |t| that backend |b| could read without a copy.
  int usable_srcs(const bp_tensor *t, int b) {
    int count = 0;
    for (bp_tensor *src : t->src)
      if (src && sched_supports_buft(s, b, sched_tensor_buft(s, src))) ++count;
    return count;
  }

  bp_status unsupported(const bp_tensor *t) {
    std::string names;
    for (int b = 0; b < n; ++b) names += std::string(b ? ", " : "") + bp_backend_name(s->backends[(size_t)b]);
    // Whether the last backend is the shipped cpu plugin is not known here
    // (a plugin on BP_PLUGIN_PATH may take its name), so name its file.
    const bp_backend *last = s->backends[(size_t)n - 1];
    const std::string file = last->device && last->device->plugin ? last->device->plugin->path : "?";
    return set_errorf(BP_ERR_UNIMPLEMENTED,
                      "scheduler: no backend supports node %s (op %s, type %s); backends: %s. The last one, '%s', "
                      "comes from %s; add a backend that runs the op (Backplane's own cpu plugin runs every op; "
                      "bp-devices shows which file provides each plugin)",
                      describe(t).c_str(), bp_op_name(t->op), bp_type_name(t->type), names.c_str(),
                      bp_backend_name(last), file.c_str());
  }

  bp_status run() {
    s->assigned.clear();
    // Rule 1, with a check: a pin to a backend that cannot run the op would
    // only fail later, inside the backend.
    std::vector<bp_tensor *> all(g->leafs);
    all.insert(all.end(), g->nodes.begin(), g->nodes.end());
    for (bp_tensor *t : all) {
      auto it = s->pinned.find(t);
      if (it == s->pinned.end()) continue;
      if (!supports(it->second, t))
        return set_errorf(BP_ERR_INVALID_ARGUMENT,
                          "scheduler: node %s (op %s) is pinned to backend '%s', which does not support it; pin it "
                          "to another backend",
                          describe(t).c_str(), bp_op_name(t->op), bp_backend_name(s->backends[(size_t)it->second]));
      s->assigned[t] = it->second;
    }
    for (bp_tensor *t : g->leafs) {
      if (get(t) >= 0) continue;
      int b = from_memory_or_weights(t);
      if (b == -2) return BP_ERR_UNIMPLEMENTED;
      if (b >= 0) s->assigned[t] = b;
    }
    for (bp_tensor *t : g->nodes) {
      if (get(t) >= 0) continue;
      int b = from_memory_or_weights(t);
      if (b == -2) return BP_ERR_UNIMPLEMENTED;
      if (b >= 0) s->assigned[t] = b;
    }
    // Rule 5.
    expand(true, true);
    expand(false, true);
    expand(true, false);
    expand(false, false);
    // Rules 5 (moving up within a buffer type) and 6.
    for (bp_tensor *t : g->nodes) {
      if (bp_op_is_view(t->op)) continue;
      int cur = get(t);
      if (cur < 0) {
        int best = -1, best_usable = -1;
        for (int b = 0; b < n; ++b) {
          if (!supports(b, t)) continue;
          int u = usable_srcs(t, b);
          if (u > best_usable) best = b, best_usable = u;
        }
        if (best < 0) return unsupported(t);
        s->assigned[t] = best;
      } else if (!s->pinned.count(t)) {
        for (int b = 0; b < cur; ++b) {
          if (s->bufts[(size_t)b] != s->bufts[(size_t)cur] || !supports(b, t)) continue;
          if (usable_srcs(t, b) != usable_srcs(t, cur)) continue;
          s->assigned[t] = b;
          break;
        }
      }
    }
    // Rule 7: unplaced roots live with their first reader.
    for (bp_tensor *t : g->nodes) {
      if (bp_op_is_view(t->op)) continue;
      int b = get(t);
      for (bp_tensor *src : t->src) {
        if (!src) continue;
        bp_tensor *root = alloc_root(src);
        if (get(root) < 0 && !sched_external_buffer(s, root)) s->assigned[root] = b;
      }
    }
    auto place_view = [&](bp_tensor *v) {
      bp_tensor *root = alloc_root(v);
      int b = get(root);
      if (b < 0) {
        if (bp_buffer *buf = sched_external_buffer(s, root)) b = backend_for_buft(bp_buffer_buffer_type(buf), root);
        if (b < 0) b = n - 1;
        s->assigned[root] = b;
      }
      s->assigned[v] = b;
    };
    for (bp_tensor *t : g->nodes) {
      if (t->view_src && bp_op_is_view(t->op)) place_view(t);  // CPY aliases too, but computes
      for (bp_tensor *src : t->src)
        if (src && src->view_src && get(src) < 0) place_view(src);
    }
    for (bp_tensor *t : g->leafs)
      if (get(t) < 0) s->assigned[t] = n - 1;
    for (bp_tensor *t : g->nodes)
      for (bp_tensor *src : t->src)
        if (src && get(src) < 0) s->assigned[src] = n - 1;
    return BP_OK;
  }
};

}  // namespace

bp_status sched_assign(bp_sched *s, const bp_graph *g) {
  assigner a{s, g, (int)s->backends.size(), {}};
  return a.run();
}

}  // namespace bp::core
