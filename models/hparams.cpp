// hparams.cpp: read_hparams.
#include "hparams.hpp"

#include <cmath>

#include "report.hpp"

namespace bp::model {

bp_status gguf_get_int(const bp_gguf *file, const std::string &key, int64_t *out) {
  size_t i = 0;
  if (bp_gguf_find_key(file, key.c_str(), &i) != BP_OK) return BP_ERR_NOT_FOUND;
  if (bp_gguf_kv_read_int(file, i, 0, out) != BP_OK)
    return fail(BP_ERR_INVALID_ARGUMENT, "the model file's key " + key + " is not an integer: " + bp_last_error());
  return BP_OK;
}

bp_status gguf_get_float(const bp_gguf *file, const std::string &key, double *out) {
  size_t i = 0;
  if (bp_gguf_find_key(file, key.c_str(), &i) != BP_OK) return BP_ERR_NOT_FOUND;
  if (bp_gguf_kv_read_float(file, i, 0, out) != BP_OK)
    return fail(BP_ERR_INVALID_ARGUMENT, "the model file's key " + key + " is not a number: " + bp_last_error());
  return BP_OK;
}

bp_status gguf_get_string(const bp_gguf *file, const std::string &key, std::string *out) {
  size_t i = 0;
  if (bp_gguf_find_key(file, key.c_str(), &i) != BP_OK) return BP_ERR_NOT_FOUND;
  const char *data = nullptr;
  uint64_t len = 0;
  if (bp_gguf_kv_read_string(file, i, 0, &data, &len) != BP_OK)
    return fail(BP_ERR_INVALID_ARGUMENT, "the model file's key " + key + " is not a string: " + bp_last_error());
  out->assign(data, len);
  return BP_OK;
}

namespace {

// A required positive integer no larger than |max|.
bp_status need_int(const bp_gguf *file, const std::string &key, int64_t max, int32_t *out) {
  int64_t v = 0;
  bp_status st = gguf_get_int(file, key, &v);
  if (st == BP_ERR_NOT_FOUND)
    return fail(BP_ERR_INVALID_ARGUMENT, "the model file has no " + key +
                                             ": it is required for this architecture (was the file written by "
                                             "llama.cpp's converter?)");
  if (st != BP_OK) return st;
  if (v < 1 || v > max)
    return failf(BP_ERR_INVALID_ARGUMENT, "the model file's %s is %lld: it must be 1..%lld", key.c_str(),
                 static_cast<long long>(v), static_cast<long long>(max));
  *out = static_cast<int32_t>(v);
  return BP_OK;
}

bp_status opt_int(const bp_gguf *file, const std::string &key, int64_t max, int32_t *inout) {
  int64_t v = 0;
  bp_status st = gguf_get_int(file, key, &v);
  if (st == BP_ERR_NOT_FOUND) return BP_OK;
  if (st != BP_OK) return st;
  if (v < 1 || v > max)
    return failf(BP_ERR_INVALID_ARGUMENT, "the model file's %s is %lld: it must be 1..%lld", key.c_str(),
                 static_cast<long long>(v), static_cast<long long>(max));
  *inout = static_cast<int32_t>(v);
  return BP_OK;
}

bp_status opt_float(const bp_gguf *file, const std::string &key, double lo, double hi, float *inout) {
  double v = 0;
  bp_status st = gguf_get_float(file, key, &v);
  if (st == BP_ERR_NOT_FOUND) return BP_OK;
  if (st != BP_OK) return st;
  if (!std::isfinite(v) || v < lo || v > hi)
    return failf(BP_ERR_INVALID_ARGUMENT, "the model file's %s is %g: it must be in [%g, %g]", key.c_str(), v, lo, hi);
  *inout = static_cast<float>(v);
  return BP_OK;
}

}  // namespace

bp_status read_hparams(const bp_gguf *file, hparams *out) {
  hparams h;
  bp_status st = gguf_get_string(file, "general.architecture", &h.arch_name);
  if (st == BP_ERR_NOT_FOUND)
    return fail(BP_ERR_INVALID_ARGUMENT,
                "the file has no general.architecture: it is not a model file (llama, qwen2 and qwen3 run)");
  if (st != BP_OK) return st;
  if (h.arch_name == "llama") {
    h.kind = arch::llama;
    h.rope_mode = 0;  // BP_ROPE_NORMAL: adjacent pairs, as the converter permutes Q and K
  } else if (h.arch_name == "qwen2") {
    h.kind = arch::qwen2;
    h.rope_mode = 2;  // BP_ROPE_NEOX: first and second half of each head
  } else if (h.arch_name == "qwen3") {
    h.kind = arch::qwen3;
    h.rope_mode = 2;
  } else {
    return fail(BP_ERR_UNIMPLEMENTED, "the model's architecture is '" + h.arch_name +
                                          "': Backplane runs llama (LLaMA, Mistral, SmolLM, TinyLlama), qwen2 and "
                                          "qwen3 (docs/models.md)");
  }
  gguf_get_string(file, "general.name", &h.name);
  const std::string a = h.arch_name + ".";
  constexpr int64_t k_max_width = 1 << 20, k_max_layers = 4096, k_max_heads = 4096;
  if ((st = need_int(file, a + "embedding_length", k_max_width, &h.n_embd)) ||
      (st = need_int(file, a + "block_count", k_max_layers, &h.n_layer)) ||
      (st = need_int(file, a + "feed_forward_length", k_max_width, &h.n_ff)) ||
      (st = need_int(file, a + "attention.head_count", k_max_heads, &h.n_head))) {
    return st;
  }
  h.n_head_kv = h.n_head;
  h.n_ctx_train = 4096;
  if ((st = opt_int(file, a + "attention.head_count_kv", k_max_heads, &h.n_head_kv)) ||
      (st = opt_int(file, a + "context_length", 1 << 24, &h.n_ctx_train))) {
    return st;
  }
  if (h.n_head % h.n_head_kv != 0)
    return failf(BP_ERR_INVALID_ARGUMENT,
                 "the model file's %sattention.head_count (%d) is not a multiple of head_count_kv (%d): grouped-query "
                 "attention shares each key/value head among a whole number of query heads",
                 a.c_str(), h.n_head, h.n_head_kv);
  h.head_dim = h.n_embd % h.n_head == 0 ? h.n_embd / h.n_head : 0;
  if ((st = opt_int(file, a + "attention.key_length", 1 << 16, &h.head_dim))) return st;
  int32_t v_len = h.head_dim;
  if ((st = opt_int(file, a + "attention.value_length", 1 << 16, &v_len))) return st;
  if (h.head_dim == 0)
    return failf(BP_ERR_INVALID_ARGUMENT,
                 "the model file's %sembedding_length (%d) is not a multiple of head_count (%d) and it has no "
                 "attention.key_length to say the head size",
                 a.c_str(), h.n_embd, h.n_head);
  if (v_len != h.head_dim)
    return failf(BP_ERR_UNIMPLEMENTED,
                 "the model's key length (%d) and value length (%d) differ: Backplane runs models whose heads have "
                 "one size",
                 h.head_dim, v_len);
  if (h.head_dim % 2 != 0)
    return failf(BP_ERR_INVALID_ARGUMENT, "the model's head size is %d: rotary embeddings need an even size",
                 h.head_dim);
  h.n_rot = h.head_dim;
  if ((st = opt_int(file, a + "rope.dimension_count", h.head_dim, &h.n_rot))) return st;
  if (h.n_rot % 2 != 0)
    return failf(BP_ERR_INVALID_ARGUMENT, "the model file's %srope.dimension_count is %d: it must be even", a.c_str(),
                 h.n_rot);
  if ((st = opt_float(file, a + "attention.layer_norm_rms_epsilon", 0.0, 1.0, &h.norm_eps)) ||
      (st = opt_float(file, a + "rope.freq_base", 1e-3, 1e12, &h.rope_base))) {
    return st;
  }
  // Linear position interpolation: positions are divided by the factor.
  std::string scaling;
  gguf_get_string(file, a + "rope.scaling.type", &scaling);
  float factor = 1.0f;
  if ((st = opt_float(file, a + "rope.scaling.factor", 0.0, 1e6, &factor))) return st;
  if (scaling.empty() || scaling == "none" || factor == 0.0f) factor = 1.0f;
  if (!scaling.empty() && scaling != "none" && scaling != "linear" && factor != 1.0f)
    return fail(BP_ERR_UNIMPLEMENTED, "the model's " + a + "rope.scaling.type is '" + scaling +
                                          "': Backplane applies linear rope scaling only (yarn and others are not "
                                          "implemented)");
  h.rope_scale = 1.0f / factor;
  h.n_vocab = 0;
  if ((st = opt_int(file, a + "vocab_size", 1 << 24, &h.n_vocab))) return st;
  *out = h;
  return BP_OK;
}

}  // namespace bp::model
