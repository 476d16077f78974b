// split.cpp: runs of consecutive nodes on one backend, and the copies that
// feed each run from other backends.
//
// A split starts at every non-view node whose backend differs from the
// previous one (views never start a split: they compute nothing). Inside a
// split, a source whose memory the split's backend cannot use directly
// (bp_backend_supports_buft says no) is copied into that backend's memory
// at the start of the split. One copy per (tensor, backend) serves every
// later split on that backend. Host-memory backends that accept each other's
// buffer types therefore share data without copies.
#include <cstdio>
#include <cstring>
#include <string>

#include <utility>

#include "core/errors.hpp"
#include "core/handles.hpp"
#include "core/sched/sched.hpp"

namespace bp::core {
namespace {

bp_tensor *new_copy_tensor(bp_sched *s, const bp_tensor *src, int backend, int slot) {
  bp_tensor &c = s->owned.emplace_back();
  std::memset(&c, 0, sizeof c);
  c.struct_size = sizeof(bp_tensor);
  c.type = src->type;
  for (int d = 0; d < BP_MAX_DIMS; ++d) c.ne[d] = src->ne[d], c.nb[d] = src->nb[d];  // same layout: a byte copy
  c.op = BP_OP_NONE;
  // "<src>#<backend>#<slot>", cut to fit: names are for reading plans only.
  std::string name = std::string(src->name[0] ? src->name : "?") + "#" +
                     bp_backend_name(s->backends[(size_t)backend]) + "#" + std::to_string(slot);
  std::snprintf(c.name, sizeof c.name, "%s", name.c_str());
  s->assigned[&c] = backend;
  return &c;
}

}  // namespace

bp_status sched_split_graph(bp_sched *s, const bp_graph *g) {
  s->splits.clear();
  s->copies.clear();
  s->remap.clear();
  std::unordered_map<const bp_tensor *, std::vector<int>> copy_of;  // src -> copy index per backend
  const int n = (int)s->backends.size();
  for (int i = 0; i < (int)g->nodes.size(); ++i) {
    bp_tensor *t = g->nodes[(size_t)i];
    int b = sched_tensor_backend(s, t);
    if (b < 0) return set_errorf(BP_ERR_INTERNAL, "scheduler: node %d has no backend after assignment", i);
    bool view = bp_op_is_view(t->op);
    if (s->splits.empty() || (!view && s->splits.back().backend != b)) {
      // A split made only of views so far takes the backend of the first real node.
      if (!s->splits.empty() && s->splits.back().exec_pos.empty() && s->splits.back().inputs.empty()) {
        s->splits.back().backend = b;
      } else {
        sched_split sp;
        sp.backend = b;
        sp.first = i;
        s->splits.push_back(std::move(sp));
      }
    }
    sched_split &sp = s->splits.back();
    sp.end = i + 1;
    if (view) continue;
    sp.exec_pos.push_back(i);
    for (int j = 0; j < BP_MAX_SRC; ++j) {
      bp_tensor *src = t->src[j];
      if (!src) continue;
      bp_buffer_type *buft = sched_tensor_buft(s, src);
      if (sched_tensor_backend(s, src) == b || sched_supports_buft(s, b, buft)) continue;
      auto &row = copy_of[src];
      if (row.empty()) row.assign((size_t)n, -1);
      if (row[(size_t)b] < 0) {
        sched_copy c;
        c.src = src;
        c.backend = b;
        c.split = (int)s->splits.size() - 1;
        c.src_backend = sched_tensor_backend(s, src);
        c.user_data = alloc_root(src)->op == BP_OP_NONE;
        for (int v = 0; v < s->n_slots; ++v) c.versions[v] = new_copy_tensor(s, src, b, v);
        row[(size_t)b] = (int)s->copies.size();
        sp.inputs.push_back((int)s->copies.size());
        sp.bytes += bp_tensor_nbytes(src);
        s->copies.push_back(c);
      }
      auto &r = s->remap[t];
      if (r.empty()) r.assign(BP_MAX_SRC, -1);
      r[(size_t)j] = row[(size_t)b];
    }
  }
  return BP_OK;
}

}  // namespace bp::core
