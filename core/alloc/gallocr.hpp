// gallocr.hpp: the graph allocator's object and the entry points the
// scheduler uses (core-internal; the public API is in backplane.h).
//
// What it is: one buffer of one buffer type that holds the intermediate
// tensors of a graph, planned by plan_memory(). It remembers which tensors
// it placed, so that planning the same graph again re-plans them instead of
// treating them as memory someone else owns. What it is not: the linear
// allocator (bp_tallocr, core/tallocr.cpp).
#pragma once

#include <unordered_map>

#include "core/alloc/plan.hpp"
#include "core/liveness.hpp"

struct bp_gallocr {
  uint32_t tag = bp::core::TAG_GALLOCR;
  bp::core::live_mark live;
  bp_buffer_type *buft = nullptr;
  bp_buffer *buffer = nullptr;  // owned; null until the first reserve/alloc
  // Tensors this allocator placed, with the buffer and the plan (a count of
  // placements) that placed them. A tensor still in the buffer recorded here
  // is ours to re-plan. Entries of replaced buffers are kept; entries of the
  // current buffer are kept for the last kKeptPlans plans, so that a graph
  // kept aside (a model context's graph cache) and planned again after the
  // buffer grew is still recognised; older ones are dropped so the map does
  // not grow with every new graph.
  struct placement {
    const bp_buffer *buffer;
    uint64_t plan;
  };
  std::unordered_map<const bp_tensor *, placement> placed;
  uint64_t plans = 0;
  size_t last_plan_size = 0;
  int last_n_inplace = 0;
};

namespace bp::core {

// True when |t| (a root) has memory that this allocator did not give it.
bool gallocr_external(const bp_gallocr *ga, const bp_tensor *t);
// True when this allocator placed |t| (into the current or a replaced buffer).
bool gallocr_owns(const bp_gallocr *ga, const bp_tensor *t);

// Plans |req| and makes the buffer at least that large (keeping it when big
// enough). OUT_OF_*_MEMORY / RESOURCE_EXHAUSTED leave the allocator usable.
bp_status gallocr_reserve_request(bp_gallocr *ga, const alloc_request &req);
// Plans |req|, grows the buffer if needed, places every planned tensor and
// points the planned views at their roots.
bp_status gallocr_alloc_request(bp_gallocr *ga, const alloc_request &req);

}  // namespace bp::core
