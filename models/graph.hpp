// graph.hpp: the forward graph of a llama-family decoder for one batch of
// tokens at consecutive positions, reading and extending a KV cache.
#pragma once

#include <cstdint>
#include <vector>

#include "hparams.hpp"
#include "weights.hpp"

namespace bp::model {

// The KV cache of one context: per layer a key and a value tensor of
// n_ctx x n_embd_kv values, position-major (one position's heads together).
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

struct batch_shape {
  uint32_t n_tokens = 0;  // T
  uint32_t n_kv = 0;      // cache positions attention reads (p0 + T, padded)
  uint32_t p0 = 0;        // first position written (0 with a fused cache: positions are inp.pos)
  bool all_logits = false;
};

struct forward_graph {
  bp_context *ctx = nullptr;
  bp_graph *graph = nullptr;
  bp_tensor *ids = nullptr;     // i32 [T]
  bp_tensor *pos = nullptr;     // i32 [T]
  bp_tensor *mask = nullptr;    // f32 [n_kv, T]: 0 where a token may attend, -inf elsewhere
  bp_tensor *logits = nullptr;  // f32 [n_vocab, T or 1]
  batch_shape shape;
};

// Nodes a graph of |hp| needs at most.
size_t graph_capacity(const hparams &hp);

// Builds the graph in a new context (caller frees g->ctx and g->graph).
bp_status build_forward(const hparams &hp, const model_weights &w, const kv_cache &kv, const batch_shape &shape,
                        forward_graph *g);

void free_forward(forward_graph *g);

}  // namespace bp::model
