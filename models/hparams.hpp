// hparams.hpp: a model's hyper-parameters as its GGUF metadata states them
// (the `<arch>.` keys llama.cpp writes), checked before anything is loaded.
#pragma once

#include <cstdint>
#include <string>

#include "backplane/gguf.h"

namespace bp::model {

enum class arch { llama, qwen2, qwen3 };

struct hparams {
  arch kind = arch::llama;
  std::string arch_name;  // "llama", "qwen2", "qwen3"
  std::string name;       // general.name
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_ff = 0;
  int32_t head_dim = 0;  // key/value length per head
  int32_t n_rot = 0;     // rope dimensions (<= head_dim)
  float norm_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;  // freq_scale = 1 / linear factor
  int rope_mode = 0;        // BP_ROPE_NORMAL or BP_ROPE_NEOX

  int32_t n_embd_q() const { return n_head * head_dim; }
  int32_t n_embd_kv() const { return n_head_kv * head_dim; }
};

// Reads and checks the hyper-parameters of |file|. UNIMPLEMENTED for an
// architecture this library does not run; INVALID_ARGUMENT naming the key
// for a missing or impossible value. n_vocab comes from the tokenizer's
// token list when the file has no `<arch>.vocab_size`.
bp_status read_hparams(const bp_gguf *file, hparams *out);

// Metadata helpers shared by the loaders: NOT_FOUND (unrecorded) when the key
// is absent, INVALID_ARGUMENT (recorded, naming the key) for a wrong kind.
bp_status gguf_get_int(const bp_gguf *file, const std::string &key, int64_t *out);
bp_status gguf_get_float(const bp_gguf *file, const std::string &key, double *out);
bp_status gguf_get_string(const bp_gguf *file, const std::string &key, std::string *out);

}  // namespace bp::model
