// model.cpp: builds bp-run's decoder graph and fills its weights and inputs.
#include "model.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/splitmix64.hpp"
#include "gguf_io.hpp"

namespace bp::run {
namespace {

constexpr float kNormEps = 1e-5f;
constexpr float kRopeBase = 10000.0f;

using rng = bp::tools::splitmix64;

bp_status fail(const std::string &step) {
  std::string why = bp_last_error();
  std::fprintf(stderr, "bp-run: building the model failed at %s: %s\n", step.c_str(),
               why.empty() ? "(no message)" : why.c_str());
  return BP_ERR_INVALID_ARGUMENT;
}

bp_tensor *named(bp_tensor *t, const std::string &name) { return t ? bp_tensor_set_name(t, name.c_str()) : nullptr; }

}  // namespace

model::~model() {
  bp_graph_free(graph);
  bp_context_free(graph_ctx);
  bp_context_free(weights_ctx);
}

std::string check_config(const model_config &c) {
  if (c.layers < 1) return "--layers must be >= 1";
  if (c.dim < 2) return "--dim must be >= 2";
  if (c.heads < 1) return "--heads must be >= 1";
  if (c.dim % c.heads != 0) return "--dim (" + std::to_string(c.dim) + ") must be a multiple of --heads (" +
                                   std::to_string(c.heads) + ")";
  if ((c.dim / c.heads) % 2 != 0) return "--dim / --heads (the head size) must be even for ROPE";
  if (c.ff < 1) return "--ff must be >= 1";
  if (c.vocab < 1) return "--vocab must be >= 1";
  if (c.tokens < 1) return "--tokens must be >= 1";
  const int64_t blk = bp_type_block_size(c.weights);
  if (c.dim % blk != 0 || c.ff % blk != 0)
    return std::string("--weights ") + bp_type_name(c.weights) + " stores rows in blocks of " + std::to_string(blk) +
           ": --dim and --ff must be multiples of " + std::to_string(blk);
  if (c.layers > 1024 || c.dim > 65536 || c.ff > 262144 || c.vocab > 1 << 20 || c.tokens > 65536)
    return "sizes too large for a demo model (layers <= 1024, dim <= 65536, ff <= 262144, vocab <= 2^20, tokens <= "
           "65536)";
  return "";
}

bp_status build_model(const model_config &cfg, model &m) {
  m.cfg = cfg;
  const int64_t D = cfg.dim, H = cfg.heads, hd = D / H, F = cfg.ff, V = cfg.vocab, T = cfg.tokens;
  m.weights_ctx = bp_context_new(0);
  m.graph_ctx = bp_context_new(0);
  const size_t max_nodes = 64 * static_cast<size_t>(cfg.layers) + 64;
  m.graph = bp_graph_new(m.graph_ctx, max_nodes);
  if (!m.weights_ctx || !m.graph_ctx || !m.graph) return fail("creating contexts");
  bp_context *w = m.weights_ctx, *g = m.graph_ctx;

  auto weight2 = [&](const std::string &name, int64_t ne0, int64_t ne1) {
    bp_tensor *t = named(bp_tensor_new_2d(w, cfg.weights, ne0, ne1), name);
    if (t) bp_tensor_set_flags(t, BP_TENSOR_FLAG_PARAM);
    m.weights.push_back(t);
    return t;
  };
  auto weight1 = [&](const std::string &name, int64_t ne0) {
    bp_tensor *t = named(bp_tensor_new_1d(w, BP_TYPE_F32, ne0), name);
    if (t) bp_tensor_set_flags(t, BP_TENSOR_FLAG_PARAM);
    m.weights.push_back(t);
    return t;
  };

  bp_tensor *tok_emb = weight2("tok_emb", D, V);
  m.ids = named(bp_tensor_new_1d(g, BP_TYPE_I32, T), "in.ids");
  m.pos = named(bp_tensor_new_1d(g, BP_TYPE_I32, T), "in.pos");
  m.mask = named(bp_tensor_new_2d(g, BP_TYPE_F32, T, T), "in.mask");
  for (bp_tensor *t : {m.ids, m.pos, m.mask})
    if (t) bp_tensor_set_flags(t, BP_TENSOR_FLAG_INPUT);

  bp_tensor *x = named(bp_get_rows(g, tok_emb, m.ids), "emb");
  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    bp_tensor *attn_norm = weight1(p + "attn_norm", D);
    bp_tensor *wq = weight2(p + "wq", D, D), *wk = weight2(p + "wk", D, D), *wv = weight2(p + "wv", D, D);
    bp_tensor *wo = weight2(p + "wo", D, D);
    bp_tensor *ffn_norm = weight1(p + "ffn_norm", D);
    bp_tensor *w_gate = weight2(p + "w_gate", D, F), *w_up = weight2(p + "w_up", D, F);
    bp_tensor *w_down = weight2(p + "w_down", F, D);

    // Attention.
    bp_tensor *h = named(bp_mul(g, named(bp_rms_norm(g, x, kNormEps), p + "attn_rms"), attn_norm), p + "attn_in");
    bp_tensor *q = named(bp_reshape_3d(g, bp_mul_mat(g, wq, h), hd, H, T), p + "q");
    bp_tensor *k = named(bp_reshape_3d(g, bp_mul_mat(g, wk, h), hd, H, T), p + "k");
    bp_tensor *v = named(bp_reshape_3d(g, bp_mul_mat(g, wv, h), hd, H, T), p + "v");
    q = named(bp_rope(g, q, m.pos, static_cast<int>(hd), BP_ROPE_NEOX, kRopeBase, 1.0f), p + "q_rope");
    k = named(bp_rope(g, k, m.pos, static_cast<int>(hd), BP_ROPE_NEOX, kRopeBase, 1.0f), p + "k_rope");
    bp_tensor *qh = bp_permute(g, q, 0, 2, 1, 3);                                  // [hd, T, H]
    bp_tensor *kh = bp_permute(g, k, 0, 2, 1, 3);                                  // [hd, T, H]
    bp_tensor *vt = named(bp_cont(g, bp_permute(g, v, 1, 2, 0, 3)), p + "v_t");    // [T, hd, H]
    bp_tensor *scores = named(bp_mul_mat(g, kh, qh), p + "scores");                // [T_k, T_q, H]
    bp_tensor *probs = named(bp_soft_max(g, scores, m.mask, kq_scale), p + "probs");
    bp_tensor *ctxv = named(bp_mul_mat(g, vt, probs), p + "attn_heads");          // [hd, T, H]
    bp_tensor *merged = bp_reshape_2d(g, bp_cont(g, bp_permute(g, ctxv, 0, 2, 1, 3)), D, T);
    bp_tensor *attn = named(bp_mul_mat(g, wo, named(merged, p + "attn_merged")), p + "attn_out");
    x = named(bp_add(g, x, attn), p + "resid1");

    // Feed-forward.
    h = named(bp_mul(g, named(bp_rms_norm(g, x, kNormEps), p + "ffn_rms"), ffn_norm), p + "ffn_in");
    bp_tensor *gate = named(bp_silu(g, named(bp_mul_mat(g, w_gate, h), p + "gate")), p + "gate_silu");
    bp_tensor *up = named(bp_mul_mat(g, w_up, h), p + "up");
    bp_tensor *down = named(bp_mul_mat(g, w_down, named(bp_mul(g, gate, up), p + "gate_up")), p + "down");
    x = named(bp_add(g, x, down), p + "resid2");
  }
  bp_tensor *out_norm = weight1("out_norm", D);
  bp_tensor *output = weight2("output", D, V);
  bp_tensor *h = named(bp_mul(g, named(bp_rms_norm(g, x, kNormEps), "out_rms"), out_norm), "out_in");
  m.logits = named(bp_mul_mat(g, output, h), "logits");
  if (!m.logits) return fail("building the graph");
  for (bp_tensor *t : m.weights)
    if (!t) return fail("creating the weights");
  bp_tensor_set_flags(m.logits, BP_TENSOR_FLAG_OUTPUT);
  if (bp_graph_build(m.graph, m.logits) != BP_OK) return fail("bp_graph_build");
  return BP_OK;
}

bp_status load_weights(const model &m) {
  if (!m.cfg.weights_file.empty()) return load_gguf_weights(m);
  for (size_t i = 0; i < m.weights.size(); ++i) {
    bp_tensor *t = m.weights[i];
    rng r{m.cfg.seed * 0x100000001b3ull + i};
    std::vector<float> v(static_cast<size_t>(bp_tensor_nelements(t)));
    const std::string name = t->name;
    const bool norm = name.find("norm") != std::string::npos;
    const bool emb = name == "tok_emb";
    // Unit-variance outputs: uniform(-a, a) with a = sqrt(3 / fan_in).
    const float a = std::sqrt(3.0f / static_cast<float>(t->ne[0]));
    for (float &x : v) x = norm ? 1.0f + 0.1f * r.uniform() : emb ? r.uniform() : a * r.uniform();
    if (bp_type_is_quantized(t->type)) {  // the same values, quantized by the core's reference
      std::vector<unsigned char> q(bp_type_row_size(t->type, t->ne[0]) * static_cast<size_t>(bp_tensor_nrows(t)));
      if (bp_status st = bp_quantize_rows(t->type, v.data(), q.data(), bp_tensor_nrows(t), t->ne[0], nullptr);
          st != BP_OK)
        return st;
      if (bp_status st = bp_tensor_set(t, q.data(), 0, q.size()); st != BP_OK) return st;
      continue;
    }
    bp_status st = bp_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

bp_status set_inputs(const model &m) {
  const int64_t T = m.cfg.tokens;
  std::vector<int32_t> ids(static_cast<size_t>(T)), pos(static_cast<size_t>(T));
  rng r{m.cfg.seed ^ 0x5eedull};
  for (int64_t i = 0; i < T; ++i) {
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(r.next() % static_cast<uint64_t>(m.cfg.vocab));
    pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  }
  // mask[q][k]: 0 where key k may be seen from query q (k <= q), -inf after.
  std::vector<float> mask(static_cast<size_t>(T * T));
  for (int64_t q = 0; q < T; ++q)
    for (int64_t k = 0; k < T; ++k) mask[static_cast<size_t>(q * T + k)] = k <= q ? 0.0f : -INFINITY;
  bp_status st = bp_tensor_set(m.ids, ids.data(), 0, ids.size() * sizeof(int32_t));
  if (st == BP_OK) st = bp_tensor_set(m.pos, pos.data(), 0, pos.size() * sizeof(int32_t));
  if (st == BP_OK) st = bp_tensor_set(m.mask, mask.data(), 0, mask.size() * sizeof(float));
  return st;
}

size_t weights_bytes(const model &m) {
  size_t n = 0;
  for (const bp_tensor *t : m.weights) n += bp_tensor_nbytes(t);
  return n;
}

}  // namespace bp::run
