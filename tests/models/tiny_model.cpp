// tiny_model.cpp: write_tiny_model and the double-precision reference forward.
#include "tiny_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backplane/gguf.h"

namespace bp::test {

std::string temp_dir() {
  char tmpl[] = "/tmp/bp-model-test-XXXXXX";
  const char *d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

namespace {

struct writer_holder {
  bp_gguf_writer *w = nullptr;
  std::vector<std::vector<uint8_t>> keep;  // tensor bytes borrowed until write
  ~writer_holder() { bp_gguf_writer_free(w); }
};

std::string add_tensor(writer_holder &wh, tiny_weights *out, const std::string &name, bp_type type,
                       std::vector<int64_t> ne, const std::vector<float> &vals) {
  const int64_t n_per_row = ne[0], rows = static_cast<int64_t>(vals.size()) / n_per_row;
  std::vector<uint8_t> bytes;
  std::vector<float> back(vals.size());
  if (type == BP_TYPE_F32) {
    bytes.resize(vals.size() * 4);
    std::memcpy(bytes.data(), vals.data(), bytes.size());
    back = vals;
  } else {
    bytes.resize(static_cast<size_t>(rows) * (n_per_row / bp_type_block_size(type)) * bp_type_size(type));
    size_t n = 0;
    if (bp_quantize_rows(type, vals.data(), bytes.data(), rows, n_per_row, &n) != BP_OK || n != bytes.size())
      return "bp_quantize_rows(" + name + "): " + bp_last_error();
    if (bp_dequantize(type, bytes.data(), back.data(), static_cast<int64_t>(vals.size())) != BP_OK)
      return std::string("bp_dequantize: ") + bp_last_error();
  }
  if (bp_gguf_writer_add_tensor_data(wh.w, name.c_str(), bp_gguf_file_type_of(type), static_cast<int>(ne.size()),
                                     ne.data(), bytes.data(), bytes.size()) != BP_OK)
    return "adding " + name + ": " + bp_last_error();
  wh.keep.push_back(std::move(bytes));
  out->values[name] = std::vector<double>(back.begin(), back.end());
  out->shapes[name] = ne;
  return "";
}

// The weights of a scripted model (tiny_config::script); |in| is the row
// length. The random draws are made anyway, so the other tensors do not move.
void script_matrix(const tiny_config &cfg, const std::string &name, int in, std::vector<float> *v) {
  const bool zero = name == "token_embd.weight" || name == "output.weight" ||
                    name.find("attn_output.weight") != std::string::npos ||
                    name.find("ffn_down.weight") != std::string::npos;
  if (zero) v->assign(v->size(), 0.0f);
  for (size_t k = 0; k < cfg.script.size(); ++k) {
    const auto [first, second] = cfg.script[k];
    if (name == "token_embd.weight") (*v)[static_cast<size_t>(first) * in + k] = 1.0f;
    if (name == "output.weight") (*v)[static_cast<size_t>(second) * in + k] += 1.0f;
  }
}

}  // namespace

std::string write_tiny_model(const tiny_config &cfg, const std::string &path, tiny_weights *out,
                             const std::string &skip, const std::vector<std::pair<std::string, std::string>> &extra) {
  writer_holder wh;
  if (bp_gguf_writer_new(&wh.w) != BP_OK) return bp_last_error();
  const std::string a = cfg.arch + ".";
  auto u32 = [&](const std::string &k, uint32_t v) { bp_gguf_writer_add_value(wh.w, k.c_str(), BP_GGUF_U32, &v); };
  auto f32 = [&](const std::string &k, float v) { bp_gguf_writer_add_value(wh.w, k.c_str(), BP_GGUF_F32, &v); };
  auto str = [&](const std::string &k, const std::string &v) {
    bp_gguf_writer_add_string(wh.w, k.c_str(), v.data(), v.size());
  };
  str("general.architecture", cfg.arch);
  str("general.name", "tiny-" + cfg.arch);
  u32(a + "context_length", cfg.n_ctx_train);
  u32(a + "embedding_length", cfg.n_embd);
  u32(a + "block_count", cfg.n_layer);
  u32(a + "feed_forward_length", cfg.n_ff);
  u32(a + "attention.head_count", cfg.n_head);
  u32(a + "attention.head_count_kv", cfg.n_head_kv);
  if (cfg.head_dim * cfg.n_head != cfg.n_embd) {
    u32(a + "attention.key_length", cfg.head_dim);
    u32(a + "attention.value_length", cfg.head_dim);
  }
  u32(a + "rope.dimension_count", cfg.head_dim);
  f32(a + "rope.freq_base", cfg.rope_base);
  f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  for (const auto &[k, v] : extra) str(k, v);

  // SentencePiece-style vocabulary: control tokens, byte tokens, pieces.
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  for (int i = 0; i < cfg.n_pieces; ++i) {
    std::string piece = "\xe2\x96\x81";  // U+2581
    piece += static_cast<char>('a' + i % 26);
    if (i >= 26) piece += static_cast<char>('a' + i / 26);
    tokens.push_back(piece);
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  std::vector<const char *> tok_ptrs;
  for (const std::string &t : tokens) tok_ptrs.push_back(t.c_str());
  str("tokenizer.ggml.model", "llama");
  bp_gguf_writer_add_array(wh.w, "tokenizer.ggml.tokens", BP_GGUF_STRING, tok_ptrs.data(), tok_ptrs.size());
  bp_gguf_writer_add_array(wh.w, "tokenizer.ggml.scores", BP_GGUF_F32, scores.data(), scores.size());
  bp_gguf_writer_add_array(wh.w, "tokenizer.ggml.token_type", BP_GGUF_I32, types.data(), types.size());
  u32("tokenizer.ggml.bos_token_id", 1);
  u32("tokenizer.ggml.eos_token_id", 2);
  u32("tokenizer.ggml.unknown_token_id", 0);

  std::mt19937_64 rng(cfg.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto randn = [&](size_t n, float scale, float mean = 0.0f) {
    std::vector<float> v(n);
    for (float &x : v) x = mean + scale * normal(rng);
    return v;
  };
  const int E = cfg.n_embd, Q = cfg.n_head * cfg.head_dim, KV = cfg.n_head_kv * cfg.head_dim, F = cfg.n_ff;
  const int V = cfg.n_vocab();
  std::string err;
  auto mat = [&](const std::string &name, int in, int outn, float gain = 1.0f, bp_type type = BP_TYPE_COUNT) {
    if (!err.empty() || name == skip) return;
    std::vector<float> v = randn(static_cast<size_t>(in) * outn, gain / std::sqrt(static_cast<float>(in)));
    if (!cfg.script.empty()) script_matrix(cfg, name, in, &v);
    err = add_tensor(wh, out, name, type == BP_TYPE_COUNT ? cfg.type : type, {in, outn}, v);
  };
  auto vec = [&](const std::string &name, int n, float scale, float mean) {
    if (!err.empty() || name == skip) return;
    std::vector<float> v = randn(n, scale, mean);
    if (!cfg.script.empty() && name == "output_norm.weight") v.assign(v.size(), 1.0f);
    err = add_tensor(wh, out, name, BP_TYPE_F32, {n}, v);
  };
  // Scales that keep activations near unit size and spread the logits out
  // (a clear top token, as a trained model has).
  mat("token_embd.weight", E, V, std::sqrt(static_cast<float>(E)));
  vec("output_norm.weight", E, 0.1f, 1.0f);
  if (!cfg.tied) mat("output.weight", E, V, 3.0f);
  if (cfg.rope_freqs && skip != "rope_freqs.weight") {
    std::vector<float> ff(cfg.head_dim / 2);
    for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(ff.size());
    if (err.empty()) err = add_tensor(wh, out, "rope_freqs.weight", BP_TYPE_F32, {cfg.head_dim / 2}, ff);
  }
  for (int il = 0; il < cfg.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    vec(p + "attn_norm.weight", E, 0.1f, 1.0f);
    mat(p + "attn_q.weight", E, Q);
    mat(p + "attn_k.weight", E, KV);
    mat(p + "attn_v.weight", E, KV);
    mat(p + "attn_output.weight", Q, E);
    if (cfg.arch == "qwen2") {
      vec(p + "attn_q.bias", Q, 0.5f, 0.0f);
      vec(p + "attn_k.bias", KV, 0.5f, 0.0f);
      vec(p + "attn_v.bias", KV, 0.5f, 0.0f);
    }
    if (cfg.arch == "qwen3") {
      vec(p + "attn_q_norm.weight", cfg.head_dim, 0.1f, 1.0f);
      vec(p + "attn_k_norm.weight", cfg.head_dim, 0.1f, 1.0f);
    }
    vec(p + "ffn_norm.weight", E, 0.1f, 1.0f);
    mat(p + "ffn_gate.weight", E, F);
    mat(p + "ffn_up.weight", E, F);
    mat(p + "ffn_down.weight", F, E);
  }
  if (!err.empty()) return err;
  if (bp_gguf_writer_write(wh.w, path.c_str()) != BP_OK) return bp_last_error();
  return "";
}

namespace {

using vec = std::vector<double>;

vec matvec(const vec &W, const vec &x, int in, int outn) {  // W is [in, out] in ne order: row o = W[o*in ..]
  vec y(outn, 0.0);
  for (int o = 0; o < outn; ++o) {
    double s = 0;
    for (int i = 0; i < in; ++i) s += W[static_cast<size_t>(o) * in + i] * x[i];
    y[o] = s;
  }
  return y;
}

vec rms_norm(const double *x, int n, const double *w, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / n + eps);
  vec y(n);
  for (int i = 0; i < n; ++i) y[i] = x[i] * r * w[i];
  return y;
}

void rope(double *x, int hd, int pos, bool neox, double base, const vec *ff) {
  for (int i = 0; i < hd / 2; ++i) {
    double theta = pos * std::pow(base, -2.0 * i / hd);
    if (ff) theta /= (*ff)[i];
    const double c = std::cos(theta), s = std::sin(theta);
    const int a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
    const double x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

}  // namespace

std::vector<double> reference_logits(const tiny_config &cfg, const tiny_weights &w,
                                     const std::vector<int32_t> &tokens) {
  const int E = cfg.n_embd, H = cfg.n_head, Hkv = cfg.n_head_kv, hd = cfg.head_dim, F = cfg.n_ff;
  const int V = cfg.n_vocab(), T = static_cast<int>(tokens.size());
  const bool neox = cfg.arch != "llama";
  const double eps = 1e-5;
  const vec *ff = w.has("rope_freqs.weight") ? &w.at("rope_freqs.weight") : nullptr;
  std::vector<vec> x(T);
  for (int t = 0; t < T; ++t) {
    const vec &emb = w.at("token_embd.weight");
    x[t].assign(emb.begin() + static_cast<size_t>(tokens[t]) * E, emb.begin() + static_cast<size_t>(tokens[t] + 1) * E);
  }
  for (int il = 0; il < cfg.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    std::vector<vec> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      vec h = rms_norm(x[t].data(), E, w.at(p + "attn_norm.weight").data(), eps);
      q[t] = matvec(w.at(p + "attn_q.weight"), h, E, H * hd);
      k[t] = matvec(w.at(p + "attn_k.weight"), h, E, Hkv * hd);
      v[t] = matvec(w.at(p + "attn_v.weight"), h, E, Hkv * hd);
      if (cfg.arch == "qwen2") {
        for (int i = 0; i < H * hd; ++i) q[t][i] += w.at(p + "attn_q.bias")[i];
        for (int i = 0; i < Hkv * hd; ++i) k[t][i] += w.at(p + "attn_k.bias")[i];
        for (int i = 0; i < Hkv * hd; ++i) v[t][i] += w.at(p + "attn_v.bias")[i];
      }
      for (int h2 = 0; h2 < H; ++h2) {
        if (cfg.arch == "qwen3") {
          vec n = rms_norm(&q[t][h2 * hd], hd, w.at(p + "attn_q_norm.weight").data(), eps);
          std::copy(n.begin(), n.end(), q[t].begin() + h2 * hd);
        }
        rope(&q[t][h2 * hd], hd, t, neox, cfg.rope_base, ff);
      }
      for (int h2 = 0; h2 < Hkv; ++h2) {
        if (cfg.arch == "qwen3") {
          vec n = rms_norm(&k[t][h2 * hd], hd, w.at(p + "attn_k_norm.weight").data(), eps);
          std::copy(n.begin(), n.end(), k[t].begin() + h2 * hd);
        }
        rope(&k[t][h2 * hd], hd, t, neox, cfg.rope_base, ff);
      }
    }
    for (int t = 0; t < T; ++t) {
      vec att(H * hd, 0.0);
      for (int h2 = 0; h2 < H; ++h2) {
        const int kh = h2 / (H / Hkv);
        vec s(t + 1);
        double mx = -1e300;
        for (int u = 0; u <= t; ++u) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[t][h2 * hd + i] * k[u][kh * hd + i];
          s[u] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[u]);
        }
        double sum = 0;
        for (double &e : s) sum += (e = std::exp(e - mx));
        for (int u = 0; u <= t; ++u)
          for (int i = 0; i < hd; ++i) att[h2 * hd + i] += s[u] / sum * v[u][kh * hd + i];
      }
      vec o = matvec(w.at(p + "attn_output.weight"), att, H * hd, E);
      for (int i = 0; i < E; ++i) x[t][i] += o[i];
      vec h = rms_norm(x[t].data(), E, w.at(p + "ffn_norm.weight").data(), eps);
      vec g = matvec(w.at(p + "ffn_gate.weight"), h, E, F), u = matvec(w.at(p + "ffn_up.weight"), h, E, F);
      for (int i = 0; i < F; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      vec d = matvec(w.at(p + "ffn_down.weight"), g, F, E);
      for (int i = 0; i < E; ++i) x[t][i] += d[i];
    }
  }
  std::vector<double> logits;
  const vec &out = w.has("output.weight") ? w.at("output.weight") : w.at("token_embd.weight");
  for (int t = 0; t < T; ++t) {
    vec h = rms_norm(x[t].data(), E, w.at("output_norm.weight").data(), eps);
    vec l = matvec(out, h, E, V);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

}  // namespace bp::test
