// weights.cpp: check_tensors, load_weights.
#include "weights.hpp"

#include <string>

#include "report.hpp"

namespace bp::model {
namespace {

std::string shape_text(const int64_t *ne, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

struct expected {
  std::string name;
  int64_t ne0, ne1;  // ne1 = 0 for a vector
  bool required;
  bool f32_only;  // norms, biases and rope factors are read by elementwise ops
};

std::vector<expected> expected_tensors(const hparams &hp, bool *tied) {
  std::vector<expected> out;
  const int64_t E = hp.n_embd, Q = hp.n_embd_q(), KV = hp.n_embd_kv(), F = hp.n_ff, V = hp.n_vocab;
  out.push_back({"token_embd.weight", E, V, true, false});
  out.push_back({"output_norm.weight", E, 0, true, true});
  out.push_back({"output.weight", E, V, !*tied, false});
  out.push_back({"rope_freqs.weight", hp.n_rot / 2, 0, false, true});
  for (int il = 0; il < hp.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    out.push_back({p + "attn_norm.weight", E, 0, true, true});
    out.push_back({p + "attn_q.weight", E, Q, true, false});
    out.push_back({p + "attn_k.weight", E, KV, true, false});
    out.push_back({p + "attn_v.weight", E, KV, true, false});
    out.push_back({p + "attn_output.weight", Q, E, true, false});
    if (hp.kind == arch::qwen2) {
      out.push_back({p + "attn_q.bias", Q, 0, true, true});
      out.push_back({p + "attn_k.bias", KV, 0, true, true});
      out.push_back({p + "attn_v.bias", KV, 0, true, true});
    }
    if (hp.kind == arch::qwen3) {
      out.push_back({p + "attn_q_norm.weight", hp.head_dim, 0, true, true});
      out.push_back({p + "attn_k_norm.weight", hp.head_dim, 0, true, true});
    }
    out.push_back({p + "ffn_norm.weight", E, 0, true, true});
    out.push_back({p + "ffn_gate.weight", E, F, true, false});
    out.push_back({p + "ffn_up.weight", E, F, true, false});
    out.push_back({p + "ffn_down.weight", F, E, true, false});
  }
  return out;
}

int layer_of(const std::string &name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

}  // namespace

bp_status check_tensors(const bp_gguf *file, const hparams &hp, uint64_t *n_params, std::vector<uint64_t> *layer_bytes,
                        uint64_t *other_bytes) {
  size_t idx = 0;
  bool tied = bp_gguf_find_tensor(file, "output.weight", &idx) != BP_OK;
  *n_params = 0;
  *other_bytes = 0;
  layer_bytes->assign(hp.n_layer, 0);
  for (const expected &e : expected_tensors(hp, &tied)) {
    const int64_t want[2] = {e.ne0, e.ne1 ? e.ne1 : 1};
    if (bp_gguf_find_tensor(file, e.name.c_str(), &idx) != BP_OK) {
      if (!e.required) continue;
      return fail(BP_ERR_INVALID_ARGUMENT, "the model file has no tensor " + e.name + " (a " + hp.arch_name +
                                               " model needs it, shaped " + shape_text(want, e.ne1 ? 2 : 1) + ")");
    }
    bp_gguf_tensor_info info{};
    info.struct_size = sizeof info;
    if (bp_gguf_tensor_describe(file, idx, &info) != BP_OK) return bp_last_status();
    bool ok = info.ne[0] == want[0] && info.ne[1] == want[1];
    for (int d = 2; d < BP_MAX_DIMS; ++d) ok = ok && info.ne[d] == 1;
    if (!ok)
      return fail(BP_ERR_INVALID_ARGUMENT, "the model file's tensor " + e.name + " is shaped " +
                                               shape_text(info.ne, static_cast<int>(info.n_dims)) + " but the " +
                                               "hyper-parameters make it " + shape_text(want, e.ne1 ? 2 : 1));
    if (!info.supported)
      return fail(BP_ERR_UNIMPLEMENTED, "the model file's tensor " + e.name + " has type " + info.type_name +
                                            ", which Backplane does not hold (it runs f32, f16, bf16, q8_0, q4_0, "
                                            "q5_0, q4_1, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, "
                                            "mxfp4; docs/models.md)");
    if (e.f32_only && info.type != BP_TYPE_F32)
      return fail(BP_ERR_UNIMPLEMENTED, "the model file's tensor " + e.name + " has type " + info.type_name +
                                            ": norms, biases and rope factors must be f32");
    *n_params += static_cast<uint64_t>(want[0] * want[1]);
    const int il = layer_of(e.name);
    (il >= 0 ? (*layer_bytes)[il] : *other_bytes) += info.nbytes;
  }
  return BP_OK;
}

namespace {

// |weights|: into the device's weight buffer type when it has one (the
// matrices that MUL_MAT reads; the token table stays plain for GET_ROWS).
bp_status load_into(const bp_gguf *file, backend_share &share, bp_backend *be, const std::string &filter,
                    bool weights = false) {
  bp_gguf_load_options opt{};
  opt.struct_size = sizeof opt;
  opt.mode = BP_GGUF_LOAD_AUTO;
  opt.name_filter = filter.c_str();
  if (weights) {
    opt.buffer_type = bp_device_weight_buffer_type(bp_backend_device(be));
    if (!opt.buffer_type) bp_clear_error();  // none: the default type
  }
  bp_gguf_weights *w = nullptr;
  if (bp_gguf_load(file, share.ctx, bp_backend_device(be), &opt, &w) != BP_OK)
    return fail(bp_last_status(),
                std::string("loading ") + filter + " onto " + bp_backend_name(be) + ": " + bp_last_error());
  share.loads.push_back(w);
  share.bytes += bp_gguf_weights_bytes(w);
  share.mapped = share.mapped && bp_gguf_weights_mapped(w);
  return BP_OK;
}

// Whether tensor |name| goes to a weight buffer type: a quantized matrix.
// Float tensors gain nothing there that mapping does not give them (no
// device repacks them), so they stay the file's mapped pages.
bool weight_buffer_suits(const bp_gguf *file, const std::string &name) {
  size_t idx = 0;
  bp_gguf_tensor_info info{};
  info.struct_size = sizeof info;
  if (bp_gguf_find_tensor(file, name.c_str(), &idx) != BP_OK || bp_gguf_tensor_describe(file, idx, &info) != BP_OK) {
    bp_clear_error();
    return false;
  }
  return info.supported && bp_type_is_quantized(info.type) && info.ne[1] > 1;
}

// The layer's tensors (names starting with |prefix|) onto |be|, each on its
// own: the quantized matrices into the weight buffer type when
// |weight_buffers|, the rest as the device takes them.
bp_status load_layer(const bp_gguf *file, backend_share &share, bp_backend *be, const std::string &prefix,
                     bool weight_buffers) {
  for (size_t i = 0; i < bp_gguf_tensor_count(file); ++i) {
    bp_gguf_tensor_info info{};
    info.struct_size = sizeof info;
    if (bp_gguf_tensor_describe(file, i, &info) != BP_OK) return bp_last_status();
    const std::string name = info.name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (bp_status st = load_into(file, share, be, name, weight_buffers && weight_buffer_suits(file, name)); st != BP_OK)
      return st;
  }
  return BP_OK;
}

// The tensor called |name|, or NULL (some are optional: a NOT_FOUND is not
// left as the thread's last error).
bp_tensor *find(const backend_share &s, const std::string &name) {
  bp_tensor *t = nullptr;
  if (bp_context_find_tensor(s.ctx, name.c_str(), &t) == BP_ERR_NOT_FOUND) bp_clear_error();
  return t;
}

// Whether |be| runs the token table's ops: GET_ROWS of it and, where the
// table is also the output matrix (|tied|), the output product. Asked of
// nodes of the table's type and shape that hold no data.
bool runs_token_table(const bp_gguf *file, const hparams &hp, bp_backend *be, bool tied) {
  size_t idx = 0;
  bp_gguf_tensor_info info{};
  info.struct_size = sizeof info;
  if (bp_gguf_find_tensor(file, "token_embd.weight", &idx) != BP_OK ||
      bp_gguf_tensor_describe(file, idx, &info) != BP_OK || !info.supported) {
    bp_clear_error();
    return false;
  }
  bp_context *ctx = bp_context_new(0);
  if (!ctx) {
    bp_clear_error();
    return false;
  }
  bp_tensor *table = bp_tensor_new_2d(ctx, info.type, info.ne[0], info.ne[1]);
  bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, 1);
  bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, hp.n_embd, 1);
  bp_tensor *rows = table && ids ? bp_get_rows(ctx, table, ids) : nullptr;
  bp_tensor *logits = table && x ? bp_mul_mat(ctx, table, x) : nullptr;
  const bool runs = rows && logits && bp_backend_supports_op(be, rows) && (!tied || bp_backend_supports_op(be, logits));
  bp_context_free(ctx);
  bp_clear_error();
  return runs;
}

}  // namespace

void free_weights(std::vector<backend_share> *shares) {
  for (backend_share &s : *shares) {
    for (bp_gguf_weights *w : s.loads) bp_gguf_weights_free(w);
    bp_context_free(s.ctx);
  }
  shares->clear();
}

bp_status load_weights(const bp_gguf *file, const hparams &hp, const std::vector<bp_backend *> &backends,
                       int32_t n_first, bool weight_buffers, std::vector<backend_share> *shares, model_weights *w) {
  const size_t last = backends.size() - 1;
  shares->assign(backends.size(), backend_share{});
  for (backend_share &s : *shares) {
    s.ctx = bp_context_new(0);
    if (!s.ctx) {
      free_weights(shares);
      return fail(BP_ERR_OUT_OF_HOST_MEMORY, "creating a tensor context for the weights");
    }
  }
  auto backend_of_layer = [&](int il) { return il < n_first ? size_t{0} : last; };
  const size_t out_be = hp.n_layer > 0 ? backend_of_layer(hp.n_layer - 1) : last;
  size_t idx = 0;
  const bool tied = bp_gguf_find_tensor(file, "output.weight", &idx) != BP_OK;
  const bool has_freqs = bp_gguf_find_tensor(file, "rope_freqs.weight", &idx) == BP_OK;
  // The token table, and the rope factors every layer reads, go to the
  // first device when it holds every layer and runs the table's ops: a
  // step is then one graph there, without a round trip to the host for the
  // embeddings (or, tied, the output product on the host). Otherwise to the
  // last device of the list, which runs any op.
  const bool all_on_first = last > 0 && n_first >= hp.n_layer;
  const size_t table_be = all_on_first && runs_token_table(file, hp, backends[0], tied) ? 0 : last;
  const size_t freqs_be = all_on_first ? 0 : last;
  bp_status st = BP_OK;
  if ((st = load_into(file, (*shares)[table_be], backends[table_be], "token_embd.weight")) ||
      (st = load_into(file, (*shares)[out_be], backends[out_be], "output_norm.weight")) ||
      (!tied && (st = load_into(file, (*shares)[out_be], backends[out_be], "output.weight",
                                weight_buffers && weight_buffer_suits(file, "output.weight")))) ||
      (has_freqs && (st = load_into(file, (*shares)[freqs_be], backends[freqs_be], "rope_freqs.weight")))) {
    return fail_after(st, [&] { free_weights(shares); });
  }
  w->tok_embd = find((*shares)[table_be], "token_embd.weight");
  w->output_norm = find((*shares)[out_be], "output_norm.weight");
  w->output = tied ? w->tok_embd : find((*shares)[out_be], "output.weight");
  w->rope_freqs = has_freqs ? find((*shares)[freqs_be], "rope_freqs.weight") : nullptr;
  w->layers.assign(hp.n_layer, layer_weights{});
  for (int il = 0; il < hp.n_layer; ++il) {
    const size_t b = backend_of_layer(il);
    backend_share &s = (*shares)[b];
    const std::string p = "blk." + std::to_string(il) + ".";
    if ((st = load_layer(file, s, backends[b], p, weight_buffers)) != BP_OK) {
      return fail_after(st, [&] { free_weights(shares); });
    }
    ++s.layers;
    layer_weights &L = w->layers[il];
    L.backend = b;
    L.attn_norm = find(s, p + "attn_norm.weight");
    L.wq = find(s, p + "attn_q.weight");
    L.wk = find(s, p + "attn_k.weight");
    L.wv = find(s, p + "attn_v.weight");
    L.wo = find(s, p + "attn_output.weight");
    L.bq = find(s, p + "attn_q.bias");
    L.bk = find(s, p + "attn_k.bias");
    L.bv = find(s, p + "attn_v.bias");
    L.q_norm = find(s, p + "attn_q_norm.weight");
    L.k_norm = find(s, p + "attn_k_norm.weight");
    L.ffn_norm = find(s, p + "ffn_norm.weight");
    L.w_gate = find(s, p + "ffn_gate.weight");
    L.w_up = find(s, p + "ffn_up.weight");
    L.w_down = find(s, p + "ffn_down.weight");
  }
  return BP_OK;
}

}  // namespace bp::model
