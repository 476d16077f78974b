// model.hpp: the small transformer decoder that bp-run builds with the public
// API, and its weights.
//
// What it is: token embedding (GET_ROWS); per layer RMS_NORM, Q/K/V
// projections, NeoX ROPE on Q and K, causal masked SOFT_MAX attention,
// output projection, residual, RMS_NORM, SILU-gated feed-forward, residual;
// a final RMS_NORM and the projection to vocabulary logits. The weights come
// from a fixed seed, so two builds of the same config hold the same numbers.
// What it is not: a trained model (the logits mean nothing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace bp::run {

struct model_config {
  int layers = 2;
  int dim = 256;
  int heads = 4;
  int ff = 512;
  int vocab = 1000;
  int tokens = 32;
  uint64_t seed = 42;
  std::string weights_file;  // --load: the weights come from this GGUF file, not the seed
  // The type of the 2-D weights (the embedding and every projection):
  // f32, or a quantized type filled through bp_quantize_rows (--weights).
  bp_type weights = BP_TYPE_F32;
};

// Checks sizes (positive, dim divisible by heads, even head size); returns
// "" or a message naming the flag to change.
std::string check_config(const model_config &cfg);

// One build: tensors in two contexts (weights, graph) plus the graph itself.
struct model {
  model_config cfg;
  bp_context *weights_ctx = nullptr;  // weights only (allocated in one buffer)
  bp_context *graph_ctx = nullptr;    // inputs and every intermediate
  bp_graph *graph = nullptr;
  bp_tensor *ids = nullptr, *pos = nullptr, *mask = nullptr;  // inputs
  bp_tensor *logits = nullptr;                                // [vocab, tokens]
  std::vector<bp_tensor *> weights;                           // creation order
  model() = default;
  model(const model &) = delete;
  model &operator=(const model &) = delete;
  ~model();
};

// Builds the tensors and the graph. On failure returns a status with
// bp_last_error() naming the step.
bp_status build_model(const model_config &cfg, model &out);

// Writes the seeded values into every weight (which must have memory).
bp_status load_weights(const model &m);

// Writes token ids, positions and the causal mask into the inputs.
bp_status set_inputs(const model &m);

// Total bytes of all weights.
size_t weights_bytes(const model &m);

}  // namespace bp::run
