// graph.hpp: the forward graph of a llama-family decoder for one batch of
// tokens, each with its own position and cache cell (the tokens of several
// sequences go in one graph), reading and extending a KV cache.
#pragma once

#include <cstdint>
#include <vector>

#include "hparams.hpp"
#include "weights.hpp"

namespace bp::model {

// The KV cache of one context: per layer a key and a value tensor of
// n_ctx cells x n_embd_kv values, cell-major (one cell's heads together).
// Which sequence and position a cell holds is kv_cells' business; the graph
// only writes the cells it is given and reads the first n_kv through a mask.
struct kv_cache {
  std::vector<bp_tensor *> k, v;
  uint32_t n_ctx = 0;
  bp_type type = BP_TYPE_F16;
  // Attention is one ATTENTION node per layer, and V is stored like K
  // (position-major). Else attention is two products around SOFT_MAX, and V
  // is stored transposed (each channel's positions together), so the second
  // product reads dense rows.
  bool fused = false;
};

// What a graph depends on; batches of the same shape reuse one graph.
struct batch_shape {
  uint32_t n_tokens = 0;  // T
  uint32_t n_kv = 0;      // cache cells attention reads (the cells in use, padded)
  uint32_t c0 = 0;        // first cell written (0 with a fused cache: the cells are inp.cells)
  // Rows of logits: all T (n_out = T), the last token's (n_out = 1), or,
  // when |picked|, the n_out tokens inp.out_ids names.
  uint32_t n_out = 0;
  bool picked = false;
  bool operator==(const batch_shape &o) const {
    return n_tokens == o.n_tokens && n_kv == o.n_kv && c0 == o.c0 && n_out == o.n_out && picked == o.picked;
  }
};

struct forward_graph {
  bp_context *ctx = nullptr;
  bp_graph *graph = nullptr;
  bp_tensor *ids = nullptr;      // i32 [T]
  bp_tensor *pos = nullptr;      // i32 [T]: each token's position in its sequence (rope)
  bp_tensor *cells = nullptr;    // i32 [T]: the cache cell each token is written to (fused cache only)
  bp_tensor *mask = nullptr;     // f32 [n_kv, T]: 0 where a token may attend, -inf elsewhere
  bp_tensor *out_ids = nullptr;  // i32 [n_out]: the tokens whose logits are computed (picked only)
  bp_tensor *logits = nullptr;   // f32 [n_vocab, n_out]
  batch_shape shape;
};

// Nodes a graph of |hp| needs at most.
size_t graph_capacity(const hparams &hp);

// Builds the graph in a new context (caller frees g->ctx and g->graph).
bp_status build_forward(const hparams &hp, const model_weights &w, const kv_cache &kv, const batch_shape &shape,
                        forward_graph *g);

void free_forward(forward_graph *g);

}  // namespace bp::model
