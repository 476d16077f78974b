// synth.cpp: bp-gguf synth: checks the options, then writes the metadata as
// llama.cpp's converter does and the tensors under llama.cpp's names, in
// GGUF's shape order (ne0, the fastest-moving dimension, first).
//
// Scales, so the logits come out spread like a trained model's rather than
// all equal (value = mean + std * N(0,1)-ish, synth_weights.cpp):
//   matrices (attn_q/k/v/output, ffn_gate/up/down)  std 1/sqrt(fan_in), fan_in = ne0:
//                                                    each projection keeps unit variance
//   norm weights (attn/ffn/output norm, qwen3 q/k norm)  mean 1, std 0.05
//   qwen2 q/k/v biases                               std 0.1
//   token_embd                                        std 1 (the residual stream starts at unit rms)
//   output.weight                                     std 4/sqrt(embd): after the final RMS norm
//                                                    (rms 1) each logit has std about 4, so the
//                                                    top token stands well clear of the rest
//   token_embd with --tied                           std 4/sqrt(embd), for the same logits
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "gguf_tool.hpp"
#include "synth.hpp"

namespace bp::gguf_tool {

namespace {

struct type_entry {
  const char *name;
  bp_type type;
  uint32_t ftype;  // llama.cpp's general.file_type for a file mostly of this type
};
// The K types name the _M mixes (output.weight in q6_K).
const type_entry kTypes[] = {
    {"f32", BP_TYPE_F32, 0},     {"f16", BP_TYPE_F16, 1},        {"bf16", BP_TYPE_BF16, 32},
    {"q8_0", BP_TYPE_Q8_0, 7},   {"q4_0", BP_TYPE_Q4_0, 2},      {"q5_0", BP_TYPE_Q5_0, 8},
    {"q4_1", BP_TYPE_Q4_1, 3},   {"q5_1", BP_TYPE_Q5_1, 9},      {"q2_k", BP_TYPE_Q2_K, 10},
    {"q3_k", BP_TYPE_Q3_K, 12},  {"q4_k", BP_TYPE_Q4_K, 15},     {"q5_k", BP_TYPE_Q5_K, 17},
    {"q6_k", BP_TYPE_Q6_K, 18},  {"iq4_nl", BP_TYPE_IQ4_NL, 25}, {"iq4_xs", BP_TYPE_IQ4_XS, 30},
    {"mxfp4", BP_TYPE_MXFP4, 38}};

const type_entry *find_type(std::string name) {
  for (auto &c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto &t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

bool is_k_quant(bp_type t) {
  return t == BP_TYPE_Q2_K || t == BP_TYPE_Q3_K || t == BP_TYPE_Q4_K || t == BP_TYPE_Q5_K || t == BP_TYPE_Q6_K;
}

int usage(const std::string &msg) {
  std::fprintf(stderr, "bp-gguf synth: %s\n", msg.c_str());
  return 2;
}

// The shape after the options are checked.
struct plan {
  std::string arch;
  const type_entry *type = nullptr;
  bp_type output_type = BP_TYPE_F32;
  int64_t head_dim = 0;
  double rope_base = 0;
  float rms_eps = 0;
};

// Checks |o|; the message for a bad option in |err|.
bool check(const synth_options &o, plan &p, std::string &err) {
  if (o.arch != "llama" && o.arch != "qwen2" && o.arch != "qwen3")
    return err = "--arch " + o.arch + ": expected llama, qwen2 or qwen3", false;
  p.arch = o.arch;
  if (!(p.type = find_type(o.type)))
    return err = "--type " + o.type +
                 ": expected f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, "
                 "iq4_nl, iq4_xs or mxfp4",
           false;
  if (o.output_type.empty()) {
    p.output_type = is_k_quant(p.type->type) ? BP_TYPE_Q6_K : p.type->type;
  } else {
    const type_entry *t = find_type(o.output_type);
    if (!t) return err = "--output-type " + o.output_type + ": expected one of the --type names", false;
    p.output_type = t->type;
  }
  if (o.vocab != "spm" && o.vocab != "bpe") return err = "--vocab " + o.vocab + ": expected spm or bpe", false;
  const std::pair<const char *, int64_t> positive[] = {
      {"--n-vocab", o.n_vocab},   {"--embd", o.embd}, {"--layers", o.layers}, {"--heads", o.heads},
      {"--kv-heads", o.kv_heads}, {"--ff", o.ff},     {"--ctx", o.ctx}};
  for (const auto &[flag, v] : positive)
    if (v <= 0 || v > (int64_t{1} << 31))
      return err = std::string(flag) + " " + std::to_string(v) + ": out of range", false;
  if (o.heads % o.kv_heads)
    return err =
               "--heads " + std::to_string(o.heads) + " is not a multiple of --kv-heads " + std::to_string(o.kv_heads),
           false;
  if (o.head_dim < 0) return err = "--head-dim " + std::to_string(o.head_dim) + ": out of range", false;
  if (o.head_dim == 0 && o.embd % o.heads)
    return err = "--embd " + std::to_string(o.embd) + " is not a multiple of --heads " + std::to_string(o.heads) +
                 " (give --head-dim)",
           false;
  p.head_dim = o.head_dim ? o.head_dim : o.embd / o.heads;
  if (p.head_dim % 2) return err = "--head-dim " + std::to_string(p.head_dim) + " is odd: rope needs pairs", false;
  if (o.arch == "qwen2" && p.head_dim * o.heads != o.embd)
    return err = "--head-dim: qwen2 needs heads x head-dim == embd (llama.cpp's qwen2 has no key_length)", false;
  if (o.rope_freqs && o.arch != "llama") return err = "--rope-freqs: only llama reads rope_freqs.weight", false;
  p.rope_base = o.rope_base > 0 ? o.rope_base : (o.arch == "llama" ? 10000.0 : 1000000.0);
  if (o.rope_base < 0) return err = "--rope-base: must be positive", false;
  p.rms_eps = o.arch == "llama" ? 1e-5f : 1e-6f;
  // Every matrix's rows must be whole blocks of its type.
  auto blocks = [&](bp_type t, const std::string &flag, int64_t ne0) {
    const int64_t b = bp_type_block_size(t);
    if (ne0 % b == 0) return true;
    err = flag + " = " + std::to_string(ne0) + " is not a multiple of " + std::to_string(b) + ", the block size of " +
          bp_type_name(t);
    return false;
  };
  const bp_type t = p.type->type;
  return blocks(t, "--embd", o.embd) && blocks(t, "--heads x --head-dim", o.heads * p.head_dim) &&
         blocks(t, "--ff", o.ff) && (o.tied || blocks(p.output_type, "--embd (output.weight)", o.embd));
}

// Makes each tensor's bytes in |scratch|, where they stay until the file is
// written (the writer borrows them).
class tensor_sink {
 public:
  tensor_sink(bp_gguf_writer *w, synth_scratch &scratch, uint64_t seed) : w_(w), scratch_(scratch), seed_(seed) {}
  bool add(const std::string &name, bp_type type, std::vector<int64_t> ne, synth_fill fill) {
    const int64_t rows = ne.size() > 1 ? ne[1] : 1;
    const size_t n = bp_type_row_size(type, ne[0]) * static_cast<size_t>(rows);
    uint8_t *d = scratch_.alloc(n);
    return synth_tensor_bytes(seed_, name, fill, type, ne[0], rows, d) && add_bytes(name, type, ne, d, n);
  }
  bool add_f32(const std::string &name, const std::vector<float> &values) {
    uint8_t *d = scratch_.alloc(values.size() * 4);
    std::memcpy(d, values.data(), values.size() * 4);
    return add_bytes(name, BP_TYPE_F32, {static_cast<int64_t>(values.size())}, d, values.size() * 4);
  }
  uint64_t bytes() const { return bytes_; }
  size_t count() const { return count_; }

 private:
  bool add_bytes(const std::string &name, bp_type type, const std::vector<int64_t> &ne, const uint8_t *d, size_t n) {
    ++count_, bytes_ += n;
    return bp_gguf_writer_add_tensor_data(w_, name.c_str(), bp_gguf_file_type_of(type), static_cast<int>(ne.size()),
                                          ne.data(), d, n) == BP_OK;
  }
  bp_gguf_writer *w_;
  synth_scratch &scratch_;
  uint64_t seed_;
  size_t count_ = 0;
  uint64_t bytes_ = 0;
};

bool put_u32(bp_gguf_writer *w, const std::string &key, uint32_t v) {
  return bp_gguf_writer_add_value(w, key.c_str(), BP_GGUF_U32, &v) == BP_OK;
}
bool put_f32(bp_gguf_writer *w, const std::string &key, float v) {
  return bp_gguf_writer_add_value(w, key.c_str(), BP_GGUF_F32, &v) == BP_OK;
}
bool put_bool(bp_gguf_writer *w, const std::string &key, bool v) {
  const uint8_t b = v ? 1 : 0;
  return bp_gguf_writer_add_value(w, key.c_str(), BP_GGUF_BOOL, &b) == BP_OK;
}
bool put_str(bp_gguf_writer *w, const std::string &key, const std::string &v) {
  return bp_gguf_writer_add_string(w, key.c_str(), v.data(), v.size()) == BP_OK;
}
bool put_strings(bp_gguf_writer *w, const std::string &key, const std::vector<std::string> &v) {
  std::vector<const char *> p;
  for (const auto &s : v) p.push_back(s.c_str());
  return bp_gguf_writer_add_array(w, key.c_str(), BP_GGUF_STRING, p.data(), p.size()) == BP_OK;
}

bool write_metadata(bp_gguf_writer *w, const synth_options &o, const plan &p, const synth_vocab &v) {
  const std::string a = p.arch + ".";
  const std::string name = "synth-" + p.arch + "-" + bp_type_name(p.type->type) + "-seed" + std::to_string(o.seed);
  bool ok = put_str(w, "general.architecture", p.arch) && put_str(w, "general.name", name) &&
            put_u32(w, a + "context_length", static_cast<uint32_t>(o.ctx)) &&
            put_u32(w, a + "embedding_length", static_cast<uint32_t>(o.embd)) &&
            put_u32(w, a + "block_count", static_cast<uint32_t>(o.layers)) &&
            put_u32(w, a + "feed_forward_length", static_cast<uint32_t>(o.ff)) &&
            put_u32(w, a + "attention.head_count", static_cast<uint32_t>(o.heads)) &&
            put_u32(w, a + "attention.head_count_kv", static_cast<uint32_t>(o.kv_heads)) &&
            put_f32(w, a + "rope.freq_base", static_cast<float>(p.rope_base)) &&
            put_f32(w, a + "attention.layer_norm_rms_epsilon", p.rms_eps) &&
            put_u32(w, a + "rope.dimension_count", static_cast<uint32_t>(p.head_dim)) &&
            put_u32(w, a + "vocab_size", static_cast<uint32_t>(o.n_vocab));
  if (ok && p.head_dim * o.heads != o.embd)
    ok = put_u32(w, a + "attention.key_length", static_cast<uint32_t>(p.head_dim)) &&
         put_u32(w, a + "attention.value_length", static_cast<uint32_t>(p.head_dim));
  ok = ok && put_u32(w, "general.file_type", p.type->ftype);
  if (ok && bp_type_block_size(p.type->type) > 1) ok = put_u32(w, "general.quantization_version", 2);
  ok = ok && put_str(w, "tokenizer.ggml.model", v.model);
  if (ok && !v.pre.empty()) ok = put_str(w, "tokenizer.ggml.pre", v.pre);
  ok = ok && put_strings(w, "tokenizer.ggml.tokens", v.tokens);
  if (ok && !v.scores.empty())
    ok = bp_gguf_writer_add_array(w, "tokenizer.ggml.scores", BP_GGUF_F32, v.scores.data(), v.scores.size()) == BP_OK;
  ok = ok &&
       bp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, v.types.data(), v.types.size()) == BP_OK;
  if (ok && !v.merges.empty()) ok = put_strings(w, "tokenizer.ggml.merges", v.merges);
  ok = ok && put_u32(w, "tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos)) &&
       put_u32(w, "tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (ok && v.unk >= 0) ok = put_u32(w, "tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  return ok && put_bool(w, "tokenizer.ggml.add_bos_token", v.add_bos) &&
         put_bool(w, "tokenizer.ggml.add_eos_token", false);
}

bool write_tensors(tensor_sink &s, const synth_options &o, const plan &p) {
  const bp_type t = p.type->type;
  const int64_t q_dim = o.heads * p.head_dim, kv_dim = o.kv_heads * p.head_dim;
  auto sd = [](int64_t fan_in) { return synth_fill{0.0f, 1.0f / std::sqrt(static_cast<float>(fan_in))}; };
  const synth_fill norm{1.0f, 0.05f};
  const synth_fill logits{0.0f, 4.0f / std::sqrt(static_cast<float>(o.embd))};
  if (!s.add("token_embd.weight", t, {o.embd, o.n_vocab}, o.tied ? logits : synth_fill{0.0f, 1.0f})) return false;
  if (o.rope_freqs && !s.add_f32("rope_freqs.weight", synth_rope_factors(p.head_dim, p.rope_base))) return false;
  for (int64_t i = 0; i < o.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    bool ok = s.add(b + "attn_norm.weight", BP_TYPE_F32, {o.embd}, norm) &&
              s.add(b + "attn_q.weight", t, {o.embd, q_dim}, sd(o.embd)) &&
              s.add(b + "attn_k.weight", t, {o.embd, kv_dim}, sd(o.embd)) &&
              s.add(b + "attn_v.weight", t, {o.embd, kv_dim}, sd(o.embd));
    if (ok && p.arch == "qwen2")
      ok = s.add(b + "attn_q.bias", BP_TYPE_F32, {q_dim}, {0.0f, 0.1f}) &&
           s.add(b + "attn_k.bias", BP_TYPE_F32, {kv_dim}, {0.0f, 0.1f}) &&
           s.add(b + "attn_v.bias", BP_TYPE_F32, {kv_dim}, {0.0f, 0.1f});
    if (ok && p.arch == "qwen3")
      ok = s.add(b + "attn_q_norm.weight", BP_TYPE_F32, {p.head_dim}, norm) &&
           s.add(b + "attn_k_norm.weight", BP_TYPE_F32, {p.head_dim}, norm);
    ok = ok && s.add(b + "attn_output.weight", t, {q_dim, o.embd}, sd(q_dim)) &&
         s.add(b + "ffn_norm.weight", BP_TYPE_F32, {o.embd}, norm) &&
         s.add(b + "ffn_gate.weight", t, {o.embd, o.ff}, sd(o.embd)) &&
         s.add(b + "ffn_up.weight", t, {o.embd, o.ff}, sd(o.embd)) &&
         s.add(b + "ffn_down.weight", t, {o.ff, o.embd}, sd(o.ff));
    if (!ok) return false;
  }
  if (!s.add("output_norm.weight", BP_TYPE_F32, {o.embd}, norm)) return false;
  return o.tied || s.add("output.weight", p.output_type, {o.embd, o.n_vocab}, logits);
}

}  // namespace

int synth(const synth_options &o) {
  plan p;
  std::string err;
  if (!check(o, p, err)) return usage(err);
  const synth_vocab vocab = synth_make_vocab(o.vocab, o.arch, o.n_vocab, err);
  if (!err.empty()) return usage(err);
  bp_gguf_writer *w = nullptr;
  if (bp_gguf_writer_new(&w) != BP_OK) return fail("synth: a writer");
  synth_scratch scratch(o.out);
  tensor_sink sink(w, scratch, o.seed);
  int rc = 0;
  if (!write_metadata(w, o, p, vocab)) {
    rc = fail("synth: metadata");
  } else if (!write_tensors(sink, o, p)) {
    rc = fail("synth: tensor " + std::to_string(sink.count()));
  } else if (bp_gguf_writer_write(w, o.out.c_str()) != BP_OK) {
    rc = fail("synth: " + o.out);
  } else {
    std::printf("%s: %s %s, %zu tensors, %.1f MiB of weights, %s vocabulary of %zu tokens\n", o.out.c_str(),
                p.arch.c_str(), bp_type_name(p.type->type), sink.count(), sink.bytes() / 1048576.0, o.vocab.c_str(),
                vocab.tokens.size());
  }
  bp_gguf_writer_free(w);
  return rc;
}

}  // namespace bp::gguf_tool
