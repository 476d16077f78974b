// context.hpp: what a context holds (the bp_model_context handle of model.h):
// the KV cache on the backends that hold each layer and which sequence each
// of its cells holds, a scheduler, and the forward graphs built so far, one
// per batch shape, reused.
#pragma once

#include <vector>

#include "graph.hpp"
#include "kv_cells.hpp"
#include "model.hpp"

struct bp_model_context {
  uint32_t magic = 0;  // k_context_magic while alive
  bp_model *model = nullptr;
  uint32_t n_batch = 0;
  // Backends of its own on the model's devices (a backend is one stream of
  // work: contexts on different threads must not share one); the weights'
  // buffers belong to the devices, so every backend of a device reads them.
  std::vector<bp_backend *> backends;
  bp::model::kv_cache kv;
  std::vector<bp_context *> kv_ctx;  // one per backend (NULL where no layer lives)
  std::vector<bp_buffer *> kv_buf;
  bp_sched *sched = nullptr;
  std::vector<bp::model::forward_graph> graphs;  // most recently used last
  // The graph the scheduler holds, by its bp_graph: the forward_graph
  // entries move inside |graphs| as they are reordered, the bp_graph does not.
  const bp_graph *allocated = nullptr;
  bp::model::kv_cells cells;                   // the sequences and positions in the cache
  uint64_t graph_builds = 0, graph_plans = 0;  // bp_model_context_graph_stats
  std::vector<float> logits;                   // the kept rows of the last eval, in batch order
  size_t logit_rows = 0;
  std::vector<int32_t> logit_row;  // per token of the last eval's batch: its row in |logits|, or -1
  std::vector<int32_t> host_cells, host_out;
  std::vector<float> host_mask;
};

namespace bp::model {

// Positions the attention of a batch ending at |end| reads: |end| rounded up
// to k_kv_pad (capped at n_ctx), so decoding reuses one graph for
// k_kv_pad positions; the padding is masked out.
constexpr uint32_t k_kv_pad = 128;

// INVALID_ARGUMENT (recorded) for NULL or a handle that is not a live context.
bp_status check_context(const bp_model_context *c, const char *fn);

bp_status context_create(bp_model *m, const bp_model_context_options &opt, bp_model_context **out);
void context_destroy(bp_model_context *c);
// bp_model_context_eval: |n| tokens of sequence 0 at its next positions.
bp_status context_eval(bp_model_context *c, const int32_t *tokens, size_t n, bool all_logits);
// bp_model_context_eval_batch (|b|'s struct_size checked by the caller).
bp_status context_eval_batch(bp_model_context *c, const bp_model_batch &b);
// Drops the last eval's logits (bp_model_context_logits is NULL after).
void forget_logits(bp_model_context *c);

// Sequence |seq| forgets its positions from |position| on (the sequence
// entry points of model.h, sequences.cpp). INVALID_ARGUMENT, naming |fn|,
// for a sequence out of range or a position past the sequence's length.
bp_status seq_rewind(bp_model_context *c, const char *fn, uint32_t seq, uint32_t position);

}  // namespace bp::model
