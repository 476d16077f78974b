// model_api.cpp: the loading and tokenizer entry points of model.h.
#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "model.hpp"
#include "report.hpp"

using bp::model::fail;
using bp::model::failf;

namespace bp::model {

bp_status check_model(const bp_model *m, const char *fn) {
  if (!m) return failf(BP_ERR_INVALID_ARGUMENT, "%s: model is NULL", fn);
  if (m->magic != k_model_magic)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: %p is not a live bp_model (freed, or another object)", fn,
                 static_cast<const void *>(m));
  return BP_OK;
}

namespace {

void destroy(bp_model *m) {
  free_weights(&m->shares);
  for (bp_backend *b : m->backends) bp_backend_free(b);
  m->magic = 0;
  delete m;
}

bp_status open_backends(const char *devices, bp_model *m) {
  const std::string list = devices && *devices ? devices : "cpu";
  bp_backend *buf[17] = {};  // 16 from the list, and room for an appended cpu
  size_t n = 0;
  if (bp_backend_new_list(list.c_str(), buf, 16, &n) != BP_OK)
    return fail(bp_last_status(), "opening the devices \"" + list + "\": " + bp_last_error());
  if (n == 0) return fail(BP_ERR_INVALID_ARGUMENT, "the device list \"" + list + "\" names no backend");
  // The scheduler needs a CPU backend last, the fallback for any op the
  // other devices decline: a list that ends on a GPU ("vulkan") gets "cpu"
  // appended, as a user naming one GPU expects it to just run.
  std::string used = list;
  const bp_device *last = bp_backend_device(buf[n - 1]);
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (!last || bp_device_describe(last, &info) != BP_OK || info.type != BP_DEVICE_TYPE_CPU) {
    if (bp_backend_new("cpu", &buf[n]) != BP_OK) {
      const std::string why = bp_last_error();
      const bp_status st = bp_last_status();
      for (size_t i = 0; i < n; ++i) bp_backend_free(buf[i]);
      return fail(st, "the device list \"" + list +
                          "\" does not end on a CPU device and opening \"cpu\" for it failed: " + why);
    }
    ++n;
    used += ";cpu";
  }
  m->devices = used;
  m->backends.assign(buf, buf + n);
  for (bp_backend *b : m->backends) m->backend_names.push_back(bp_backend_name(b));
  return BP_OK;
}

// Layers the first backend takes by default: all of them, unless the device
// says how much memory is free and that is less (a 10% margin stays free for
// the KV cache and compute buffers).
int32_t default_offload(const bp_model *m, const std::vector<uint64_t> &layer_bytes, uint64_t other_bytes) {
  const int32_t n_layer = m->hp.n_layer;
  if (m->backends.size() < 2) return n_layer;
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (bp_device_describe(bp_backend_device(m->backends[0]), &info) != BP_OK || info.memory_free == 0)
    return n_layer;
  uint64_t budget = info.memory_free / 10 * 9;
  budget = budget > other_bytes ? budget - other_bytes : 0;
  int32_t n = 0;
  for (uint64_t b : layer_bytes) {
    if (b > budget) break;
    budget -= b;
    ++n;
  }
  return n;
}

}  // namespace
}  // namespace bp::model

extern "C" {

BP_API bp_status bp_model_load(const char *path, const bp_model_options *options, bp_model **out_model) {
  using namespace bp::model;
  begin_call();
  if (!out_model) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_load: out_model is NULL");
  *out_model = nullptr;
  if (!path) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_load: path is NULL");
  bp_model_options opt{};
  opt.struct_size = sizeof opt;
  opt.offload_layers = -1;
  if (options) {
    if (options->struct_size < sizeof(uint32_t) || options->struct_size > sizeof opt)
      return failf(BP_ERR_INVALID_ARGUMENT,
                   "bp_model_load: options->struct_size = %u: set it to sizeof(bp_model_options)",
                   options->struct_size);
    std::memcpy(&opt, options, options->struct_size);
  }
  bp_gguf *file = nullptr;
  if (bp_gguf_open(path, &file) != BP_OK) return fail(bp_last_status(), bp_last_error());
  auto *m = new (std::nothrow) bp_model;
  if (!m) {
    bp_gguf_close(file);
    return fail(BP_ERR_OUT_OF_HOST_MEMORY, "bp_model_load: allocating the model");
  }
  m->magic = k_model_magic;
  m->path = path;
  std::vector<uint64_t> layer_bytes;
  uint64_t other_bytes = 0;
  bp_status st = read_hparams(file, &m->hp);
  if (st == BP_OK) st = tokenizer::from_gguf(file, &m->tok);
  if (st == BP_OK) {
    if (m->hp.n_vocab == 0) m->hp.n_vocab = m->tok->n_vocab();
    if (m->hp.n_vocab != m->tok->n_vocab())
      st = failf(BP_ERR_INVALID_ARGUMENT, "the model file's %s.vocab_size (%d) differs from its token list (%d)",
                 m->hp.arch_name.c_str(), m->hp.n_vocab, m->tok->n_vocab());
  }
  if (st == BP_OK) st = check_tensors(file, m->hp, &m->n_params, &layer_bytes, &other_bytes);
  if (st == BP_OK) st = open_backends(opt.devices, m);
  if (st == BP_OK) {
    int32_t n_first = opt.offload_layers < 0 ? default_offload(m, layer_bytes, other_bytes)
                                             : std::min(opt.offload_layers, m->hp.n_layer);
    if (m->backends.size() == 1) n_first = m->hp.n_layer;
    st = load_weights(file, m->hp, m->backends, n_first, !opt.plain_weights, &m->shares, &m->w);
  }
  // Closing and freeing are Backplane calls, which reset the thread's error.
  const std::string why = st != BP_OK ? bp_last_error() : "";
  bp_gguf_close(file);
  if (st != BP_OK) {
    destroy(m);
    return fail(st, why);
  }
  *out_model = m;
  return BP_OK;
}

BP_API bp_status bp_model_free(bp_model *model) {
  using namespace bp::model;
  begin_call();
  if (!model) return BP_OK;
  if (bp_status st = check_model(model, "bp_model_free")) return st;
  if (model->n_contexts.load() > 0)
    return failf(BP_ERR_FAILED_PRECONDITION, "bp_model_free: %d context(s) of this model are alive: free them first",
                 model->n_contexts.load());
  destroy(model);
  return BP_OK;
}

BP_API bp_status bp_model_describe(const bp_model *model, bp_model_info *out) {
  using namespace bp::model;
  begin_call();
  if (bp_status st = check_model(model, "bp_model_describe")) return st;
  if (!out || out->struct_size < sizeof(bp_model_info))
    return fail(BP_ERR_INVALID_ARGUMENT,
                "bp_model_describe: out is NULL or out->struct_size is not sizeof(bp_model_info)");
  const hparams &hp = model->hp;
  out->arch = hp.arch_name.c_str();
  out->name = hp.name.c_str();
  out->tokenizer = model->tok->kind();
  out->n_vocab = hp.n_vocab;
  out->n_ctx_train = hp.n_ctx_train;
  out->n_embd = hp.n_embd;
  out->n_layer = hp.n_layer;
  out->n_head = hp.n_head;
  out->n_head_kv = hp.n_head_kv;
  out->n_ff = hp.n_ff;
  out->head_dim = hp.head_dim;
  out->n_params = model->n_params;
  out->weight_bytes = 0;
  for (const backend_share &s : model->shares) out->weight_bytes += s.bytes;
  out->bos = model->tok->bos();
  out->eos = model->tok->eos();
  out->add_bos = model->tok->add_bos();
  return BP_OK;
}

BP_API size_t bp_model_backend_count(const bp_model *model) {
  using namespace bp::model;
  begin_call();
  return check_model(model, "bp_model_backend_count") ? 0 : model->backends.size();
}

BP_API bp_status bp_model_backend_describe(const bp_model *model, size_t i, bp_model_backend_info *out) {
  using namespace bp::model;
  begin_call();
  if (bp_status st = check_model(model, "bp_model_backend_describe")) return st;
  if (!out || out->struct_size < sizeof(bp_model_backend_info))
    return fail(BP_ERR_INVALID_ARGUMENT,
                "bp_model_backend_describe: out is NULL or out->struct_size is not sizeof(bp_model_backend_info)");
  if (i >= model->backends.size())
    return failf(BP_ERR_INVALID_ARGUMENT, "bp_model_backend_describe: i = %zu but the model has %zu backends", i,
                 model->backends.size());
  out->backend = model->backend_names[i].c_str();
  out->layers = model->shares[i].layers;
  out->weight_bytes = model->shares[i].bytes;
  out->mapped = model->shares[i].mapped && !model->shares[i].loads.empty();
  return BP_OK;
}

BP_API bp_status bp_model_tokenize(const bp_model *model, const char *text, size_t len, bool add_bos,
                                   bool parse_special, bp_token *out, size_t capacity, size_t *out_count) {
  using namespace bp::model;
  begin_call();
  if (bp_status st = check_model(model, "bp_model_tokenize")) return st;
  if (!text && len) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_tokenize: text is NULL but len > 0");
  if (!out_count) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_tokenize: out_count is NULL");
  if (!out && capacity) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_tokenize: out is NULL but capacity > 0");
  std::vector<int32_t> ids;
  if (bp_status st = model->tok->tokenize(std::string_view(text ? text : "", len), add_bos, parse_special, &ids))
    return st;
  *out_count = ids.size();
  if (ids.size() > capacity)
    return failf(BP_ERR_RESOURCE_EXHAUSTED,
                 "bp_model_tokenize: the text needs %zu tokens but out holds %zu: call again with a larger array",
                 ids.size(), capacity);
  std::copy(ids.begin(), ids.end(), out);
  return BP_OK;
}

static bp_status token_string(const bp_model *model, bp_token token, bool piece, const char **out_data, size_t *out_len,
                              const char *fn) {
  using namespace bp::model;
  begin_call();
  if (bp_status st = check_model(model, fn)) return st;
  if (!out_data || !out_len) return failf(BP_ERR_INVALID_ARGUMENT, "%s: out_data or out_len is NULL", fn);
  if (token < 0 || token >= model->tok->n_vocab())
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: token %d is not in the vocabulary (0..%d)", fn, token,
                 model->tok->n_vocab() - 1);
  const std::string &s = piece ? model->tok->token_piece(token) : model->tok->token_text(token);
  *out_data = s.data();
  *out_len = s.size();
  return BP_OK;
}

BP_API bp_status bp_model_token_text(const bp_model *model, bp_token token, const char **out_data, size_t *out_len) {
  return token_string(model, token, false, out_data, out_len, "bp_model_token_text");
}

BP_API bp_status bp_model_token_piece(const bp_model *model, bp_token token, const char **out_data, size_t *out_len) {
  return token_string(model, token, true, out_data, out_len, "bp_model_token_piece");
}

BP_API bp_status bp_model_detokenize(const bp_model *model, const bp_token *tokens, size_t n, bool strip_leading_space,
                                     char *out, size_t capacity, size_t *out_len) {
  using namespace bp::model;
  begin_call();
  if (bp_status st = check_model(model, "bp_model_detokenize")) return st;
  if ((!tokens && n) || !out_len || (!out && capacity))
    return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_detokenize: tokens, out or out_len is NULL");
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= model->tok->n_vocab())
      return failf(BP_ERR_INVALID_ARGUMENT, "bp_model_detokenize: tokens[%zu] = %d is not in the vocabulary (0..%d)", i,
                   tokens[i], model->tok->n_vocab() - 1);
  }
  const std::string text = model->tok->detokenize(tokens, n, strip_leading_space);
  *out_len = text.size();
  if (text.size() > capacity)
    return failf(BP_ERR_RESOURCE_EXHAUSTED,
                 "bp_model_detokenize: the text is %zu bytes but out holds %zu: call again with a larger buffer",
                 text.size(), capacity);
  if (!text.empty()) std::memcpy(out, text.data(), text.size());
  return BP_OK;
}

BP_API bool bp_model_token_is_end(const bp_model *model, bp_token token) {
  using namespace bp::model;
  begin_call();
  if (check_model(model, "bp_model_token_is_end")) return false;
  return token >= 0 && token < model->tok->n_vocab() && model->tok->is_end(token);
}

}  // extern "C"
