// plan.hpp: liveness planning of a graph's memory inside one buffer.
//
// What it is: the pure planning half of the graph allocator. Given the steps
// of a graph in execution order (what each step produces and reads), it
// decides an offset for every tensor the buffer must hold, reusing a dying
// source in place where the op table allows and freeing each tensor after
// its last reader. The scheduler feeds it steps of its own (copies between
// backends, remapped sources); bp_gallocr feeds it a plain graph.
// What it is not: allocation of real memory (gallocr.cpp places tensors).
#pragma once

#include <cstddef>
#include <functional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backplane/backplane.h"

namespace bp::core {

// One step: |t| is produced, |src| are read (usually t->src; the scheduler
// substitutes its copies). Views produce no memory: they alias their root.
struct alloc_step {
  bp_tensor *t = nullptr;
  bp_tensor *src[BP_MAX_SRC] = {};
  bool allow_inplace = true;
};

struct alloc_request {
  std::vector<alloc_step> steps;  // execution order
  std::vector<bp_tensor *> leafs;  // graph leafs: allocated even if unread
  // True for a root tensor (no view_src) whose memory this buffer must
  // provide. Tensors for which it is false are left alone.
  std::function<bool(const bp_tensor *)> mine;
  // Never freed or overwritten, in addition to leafs, INPUT and OUTPUT
  // tensors (the scheduler keeps its pipelined copies here).
  std::unordered_set<const bp_tensor *> keep;
};

struct alloc_plan {
  std::vector<std::pair<bp_tensor *, size_t>> placements;  // roots, in placement order
  std::vector<bp_tensor *> views;                           // views to point at their root, in order
  size_t size = 0;                                          // peak bytes
  int n_inplace = 0;                                        // sources reused in place
};

// The tensor whose memory |t| uses: itself, or the root of its view chain.
inline bp_tensor *alloc_root(bp_tensor *t) {
  while (t && t->view_src) t = t->view_src;
  return t;
}

// Plans |req| for a buffer of |buft| (alignment and per-tensor sizes come
// from it). Never fails on a valid request; returns INVALID_ARGUMENT naming
// the tensor for a malformed one (a NULL step).
bp_status plan_memory(const alloc_request &req, const bp_buffer_type *buft, alloc_plan *out);

}  // namespace bp::core
