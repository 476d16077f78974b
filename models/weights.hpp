// weights.hpp: a model's tensors by llama.cpp's names, checked against the
// hyper-parameters before anything is allocated, then loaded layer by layer
// onto the backends of the device list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backplane/gguf.h"
#include "hparams.hpp"

namespace bp::model {

struct layer_weights {
  bp_tensor *attn_norm = nullptr, *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
  bp_tensor *bq = nullptr, *bk = nullptr, *bv = nullptr;  // qwen2
  bp_tensor *q_norm = nullptr, *k_norm = nullptr;         // qwen3
  bp_tensor *ffn_norm = nullptr, *w_gate = nullptr, *w_up = nullptr, *w_down = nullptr;
  size_t backend = 0;  // index in the model's backend list
};

struct model_weights {
  bp_tensor *tok_embd = nullptr, *output_norm = nullptr, *output = nullptr;  // output = tok_embd when tied
  bp_tensor *rope_freqs = nullptr;                                           // LLaMA 3.1+, optional
  std::vector<layer_weights> layers;
};

// One backend's share of the weights.
struct backend_share {
  bp_context *ctx = nullptr;  // the tensors loaded onto it
  std::vector<bp_gguf_weights *> loads;
  int32_t layers = 0;
  uint64_t bytes = 0;
  bool mapped = true;
};

// Checks that |file| holds every tensor the architecture needs, each with a
// type Backplane holds and the shape |hp| implies (INVALID_ARGUMENT naming the
// tensor and the expected shape; UNIMPLEMENTED naming an unsupported type).
// Sets *n_params and *layer_bytes (the bytes of each layer).
bp_status check_tensors(const bp_gguf *file, const hparams &hp, uint64_t *n_params, std::vector<uint64_t> *layer_bytes,
                        uint64_t *other_bytes);

// Loads the weights: layers [0, n_first) onto backend 0, the rest onto the
// last backend; the token table onto the last backend (GET_ROWS runs there),
// the output norm and matrix beside the last layer. Fills |shares| (one per
// backend) and |w|. With |weight_buffers|, the layers' quantized matrices
// and a quantized output matrix go to each device's weight buffer type
// where it has one. On failure everything loaded is freed.
bp_status load_weights(const bp_gguf *file, const hparams &hp, const std::vector<bp_backend *> &backends,
                       int32_t n_first, bool weight_buffers, std::vector<backend_share> *shares, model_weights *w);

void free_weights(std::vector<backend_share> *shares);

}  // namespace bp::model
