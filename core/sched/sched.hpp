// sched.hpp: the multi-backend scheduler's state (core-internal).
//
// What it is: the object behind bp_sched and the passes it runs over a
// graph, one file per job: assign.cpp (which backend runs each node),
// split.cpp (runs of nodes per backend and the copies between them),
// alloc.cpp (memory through one graph allocator per buffer type, and the
// per-split node lists), compute.cpp (copies, events, eval callback),
// api.cpp (the public bp_sched_* calls). docs/scheduler.md states the rules.
// What it is not: a graph optimiser; node order is the caller's.
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/alloc/gallocr.hpp"
#include "core/liveness.hpp"

namespace bp::core {

// A tensor copied into another backend's memory for the splits running there.
struct sched_copy {
  bp_tensor *src = nullptr;                       // the user tensor read (may be a view)
  int backend = -1;                               // destination backend index
  int split = -1;                                 // the split that performs the copy
  int src_backend = -1;                           // where |src| lives (for ordering)
  bool user_data = false;                         // a leaf: written by the caller, copied synchronously
  bp_tensor *versions[BP_SCHED_MAX_COPIES] = {};  // one per pipeline slot
};

struct graph_plan_deleter {
  void operator()(bp_graph_plan *p) const { bp_graph_plan_free(p); }
};
using graph_plan_ptr = std::unique_ptr<bp_graph_plan, graph_plan_deleter>;

// A run of consecutive graph nodes on one backend.
struct sched_split {
  int backend = -1;
  int first = 0, end = 0;   // graph node range [first, end)
  std::vector<int> inputs;  // indices into bp_sched::copies made by this split
  uint64_t bytes = 0;       // copied per run
  // Per pipeline slot: the non-view nodes to run (shadows where a source was
  // replaced by a copy) and their positions in the graph.
  // A bp_graph each: a backend may read it until it synchronizes.
  std::vector<bp_graph> exec;
  std::vector<int> exec_pos;
  // Per pipeline slot: the backend's plan of exec[slot], made at its first
  // run (compute.cpp). Dropped with the split, i.e. whenever memory may move.
  std::vector<graph_plan_ptr> plans;
  bool plans_unsupported = false;  // the backend said UNIMPLEMENTED
};

struct gallocr_deleter {
  void operator()(bp_gallocr *ga) const { bp_gallocr_free(ga); }
};

}  // namespace bp::core

struct bp_sched {
  uint32_t tag = bp::core::TAG_SCHED;
  bp::core::live_mark live;
  std::vector<bp_backend *> backends;   // priority order; last is the CPU fallback
  std::vector<bp_buffer_type *> bufts;  // per backend
  std::vector<int> galloc_of;           // backend -> index in gallocs
  std::vector<std::unique_ptr<bp_gallocr, bp::core::gallocr_deleter>> gallocs;  // one per distinct buft
  std::vector<std::vector<bp_event *>> events;  // [backend][slot]; empty row without events
  size_t graph_size = 4096;
  int n_slots = 1;  // pipeline copies: BP_SCHED_MAX_COPIES with parallel, else 1
  int cur_slot = 0;

  std::unordered_map<const bp_tensor *, int> pinned;    // caller's choices
  std::unordered_map<const bp_tensor *, int> assigned;  // last assignment
  std::vector<bp::core::sched_split> splits;
  std::vector<bp::core::sched_copy> copies;
  // (node, src index) -> copy index, for nodes reading a copy.
  std::unordered_map<const bp_tensor *, std::vector<int>> remap;
  std::deque<bp_tensor> owned;  // copy tensors and shadow nodes

  // The graph last allocated, and its nodes then (to notice a rebuilt graph).
  const bp_graph *graph = nullptr;
  std::vector<bp_tensor *> graph_nodes;
  bool allocated = false;
  // Per allocator: backends whose queued transfers still read its memory
  // (synchronized before anything writes there again).
  std::vector<std::vector<int>> readers_of;

  bool use_plans = true;  // bp_sched_set_graph_plans
  bp_sched_eval_callback callback = nullptr;
  void *callback_data = nullptr;
};

namespace bp::core {

// assign.cpp: fills sched->assigned for every node, leaf and source of |g|.
bp_status sched_assign(bp_sched *s, const bp_graph *g);
// split.cpp: builds sched->splits, sched->copies and sched->remap.
bp_status sched_split_graph(bp_sched *s, const bp_graph *g);
// alloc.cpp: plans (reserve) or places (alloc) the memory of the split graph.
bp_status sched_reserve_memory(bp_sched *s, const bp_graph *g);
bp_status sched_alloc_memory(bp_sched *s, const bp_graph *g);
// compute.cpp: runs the allocated splits once, asynchronously.
bp_status sched_compute_splits(bp_sched *s);
bp_status sched_synchronize_all(bp_sched *s);
// Forgets the graph state (splits, copies, assignment), keeps pins and buffers.
void sched_forget_graph(bp_sched *s);

// Shared helpers (assign.cpp).
// Memory |t| reads from that the scheduler did not allocate: the buffer of
// t (or of its view source), else nullptr.
bp_buffer *sched_external_buffer(const bp_sched *s, const bp_tensor *t);
// Buffer type |t| has or will have: its external buffer's, else its
// assigned backend's; nullptr when unknown.
bp_buffer_type *sched_tensor_buft(const bp_sched *s, const bp_tensor *t);
// Backend index of |t| (assigned, or where its external memory lives), -1.
int sched_tensor_backend(const bp_sched *s, const bp_tensor *t);
bool sched_supports_buft(const bp_sched *s, int backend, const bp_buffer_type *buft);

}  // namespace bp::core
