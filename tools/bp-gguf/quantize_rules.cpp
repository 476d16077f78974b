// quantize_rules.cpp: which type each tensor gets in each mix, the same
// choice llama.cpp's llama-quantize makes without an importance matrix
// (docs/tools.md says it in prose). In order:
//   1. Only weights are quantized: 2-D or more, a name ending in "weight", not
//      a norm, not an expert router, not a position or token-type table (and
//      a few small tensors of other architectures).
//   2. A mix with an unquantized base (F32, F16, BF16) gives that type to
//      every such tensor; --pure gives the base type; else the mix's rules
//      by the tensor's role (output, token_embd, attn_v, ffn_down,
//      attn_output) and its position among the layers.
//   3. A row length that is not a multiple of the chosen type's block falls
//      back to a type with 32-value blocks, then to f16.
#include <strings.h>
#include <cstdio>
#include <stdexcept>

#include "quantize.hpp"

namespace bp::gguf_tool {

namespace {

// llama_ftype values (general.file_type).
enum : uint32_t {
  FT_F32 = 0,
  FT_F16 = 1,
  FT_Q4_0 = 2,
  FT_Q4_1 = 3,
  FT_Q8_0 = 7,
  FT_Q5_0 = 8,
  FT_Q5_1 = 9,
  FT_Q2_K = 10,
  FT_Q3_K_S = 11,
  FT_Q3_K_M = 12,
  FT_Q3_K_L = 13,
  FT_Q4_K_S = 14,
  FT_Q4_K_M = 15,
  FT_Q5_K_S = 16,
  FT_Q5_K_M = 17,
  FT_Q6_K = 18,
  FT_IQ4_NL = 25,
  FT_IQ4_XS = 30,
  FT_BF16 = 32,
  FT_MXFP4_MOE = 38,
};

enum class role { output, token_embd, attn_v, attn_k, attn_q, attn_output, ffn_up, ffn_gate, ffn_down, other };

bool contains(const std::string &s, const char *part) { return s.find(part) != std::string::npos; }

// A tensor's role, from its name. A fused QKV and an MLA kv_b count as attn_v.
role role_of(const std::string &name) {
  if (name == "output.weight") return role::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return role::token_embd;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight")) {
    return role::attn_v;
  }
  if (contains(name, "attn_k.weight")) return role::attn_k;
  if (contains(name, "attn_q.weight")) return role::attn_q;
  if (contains(name, "attn_output.weight")) return role::attn_output;
  if (contains(name, "ffn_up")) return role::ffn_up;
  if (contains(name, "ffn_gate")) return role::ffn_gate;
  if (contains(name, "ffn_down")) return role::ffn_down;
  return role::other;
}

// Rule 1: would llama.cpp quantize this tensor at all.
bool quantizable(const rule_tensor &t) {
  if (t.n_dims < 2) return false;
  const std::string &n = t.name;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  if (n == "position_embd.weight" || n == "token_types.weight") return false;
  static const char *const kept[] = {"_norm.weight",
                                     "ffn_gate_inp.weight",
                                     "ffn_gate_tid2eid.weight",
                                     "altup",
                                     "laurel",
                                     "per_layer_model_proj",
                                     "ssm_conv1d",
                                     "shortconv.conv.weight",
                                     "indexer.k_proj.weight",
                                     "indexer.q_proj.weight",
                                     "time_mix_first.weight",
                                     "time_mix_w0.weight",
                                     "time_mix_w1.weight",
                                     "time_mix_w2.weight",
                                     "time_mix_v0.weight",
                                     "time_mix_v1.weight",
                                     "time_mix_v2.weight",
                                     "time_mix_a0.weight",
                                     "time_mix_a1.weight",
                                     "time_mix_a2.weight",
                                     "time_mix_g1.weight",
                                     "time_mix_g2.weight",
                                     "time_mix_decay_w1.weight",
                                     "time_mix_decay_w2.weight",
                                     "time_mix_lerp_fused.weight",
                                     "attn_rel_b.weight",
                                     ".position_embd",
                                     "sam.pos_embd",
                                     "sam.neck.",
                                     "sam.net_",
                                     ".rel_pos",
                                     ".patch_embd",
                                     ".patch_merger",
                                     "a.rvq.codebook",
                                     "mm.a.code_embd"};
  for (const char *k : kept) {
    if (contains(n, k)) return false;
  }
  return true;
}

bool has_blocks(bp_type t) { return bp_type_block_size(t) > 1; }

// The 8 layers of 8 at each end and every third one between get more bits.
bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// LLM_TYPE_70B as llama.cpp's loaders set it: the rule for attn_v reads it.
bool is_70b(const model_facts &f) {
  if (f.arch == "llama") return f.n_expert != 8 && f.n_layer == 80 && f.n_head != f.n_head_kv;
  if (f.arch == "qwen2" || f.arch == "olmo" || f.arch == "deci") return f.n_layer == 80;
  if (f.arch == "jais2") return f.n_layer == 68;
  return false;
}

// Walks the tensors in order, counting attn_v and ffn_down as llama.cpp does.
struct rule_state {
  const quant_mix &mix;
  const model_facts &facts;
  bool tied = true;
  int n_attn_v = 0, i_attn_v = 0, i_ffn_down = 0;

  // The layer of an ffn_down: its position among them, or for a model with
  // experts (whose tensors need not come in layer order) its name's.
  int layer_of(const std::string &name, int counter) const {
    if (facts.n_expert <= 1) return counter;
    int layer = -1;
    if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) {
      throw std::runtime_error("cannot tell the layer of expert tensor " + name);
    }
    if (layer < 0 || layer >= facts.n_layer) {
      throw std::runtime_error("tensor " + name + " names layer " + std::to_string(layer) + " of " +
                               std::to_string(facts.n_layer));
    }
    return layer;
  }

  // Rule 2 for a quantized mix.
  bp_type by_role(const rule_tensor &t, role r, bp_type type) {
    const uint32_t ft = mix.file_type;
    const bool falcon = facts.arch == "falcon";
    const int gqa = facts.n_gqa();
    if (r == role::output || (tied && r == role::token_embd)) {
      if (ft == FT_MXFP4_MOE) return BP_TYPE_Q8_0;
      if (falcon || t.ne[0] % bp_type_block_size(type) != 0) return BP_TYPE_Q8_0;
      return type == BP_TYPE_Q8_0 ? type : BP_TYPE_Q6_K;
    }
    if (ft == FT_MXFP4_MOE) {
      const bool expert_role = r == role::ffn_up || r == role::ffn_gate || r == role::ffn_down;
      return t.ne[2] > 1 && (facts.arch != "bailingmoe3" || expert_role) ? BP_TYPE_MXFP4 : BP_TYPE_Q8_0;
    }
    if (r == role::attn_v) {
      const int i = i_attn_v++;
      if (ft == FT_Q2_K) {
        type = gqa >= 4 ? BP_TYPE_Q4_K : BP_TYPE_Q3_K;
      } else if (ft == FT_Q3_K_M) {
        type = i < 2 ? BP_TYPE_Q5_K : BP_TYPE_Q4_K;
      } else if (ft == FT_Q3_K_L) {
        type = BP_TYPE_Q5_K;
      } else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && gqa >= 4) {
        type = BP_TYPE_Q5_K;
      } else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && more_bits(i, n_attn_v)) {
        type = BP_TYPE_Q6_K;
      } else if (ft == FT_Q4_K_S && i < 4) {
        type = BP_TYPE_Q5_K;
      }
      if (is_70b(facts) && (type == BP_TYPE_Q3_K || type == BP_TYPE_Q4_K)) type = BP_TYPE_Q5_K;
      if (facts.n_expert == 8) type = BP_TYPE_Q8_0;
      return type;
    }
    if (r == role::attn_k) return facts.n_expert == 8 ? BP_TYPE_Q8_0 : type;
    if (r == role::ffn_down) {
      const int i = layer_of(t.name, i_ffn_down++), n = facts.n_layer;
      if (ft == FT_Q2_K) return BP_TYPE_Q3_K;
      if (ft == FT_Q3_K_M) {
        if (i < n / 16) return BP_TYPE_Q5_K;
        return !falcon || more_bits(i, n) ? BP_TYPE_Q4_K : BP_TYPE_Q3_K;
      }
      if (ft == FT_Q3_K_L) return falcon ? BP_TYPE_Q4_K : BP_TYPE_Q5_K;
      if (ft == FT_Q4_K_M) {
        if (falcon) return i < n / 16 ? BP_TYPE_Q6_K : more_bits(i, n) ? BP_TYPE_Q5_K : BP_TYPE_Q4_K;
        return more_bits(i, n) ? BP_TYPE_Q6_K : type;
      }
      if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS)) return BP_TYPE_Q5_K;
      if (ft == FT_Q5_K_M) return more_bits(i, n) ? BP_TYPE_Q6_K : type;
      if (ft == FT_Q4_K_S && !falcon && i < n / 8) return BP_TYPE_Q5_K;
      return type;
    }
    if (r == role::attn_output) {
      if (falcon) return ft == FT_Q3_K_L ? BP_TYPE_Q4_K : type;
      if (facts.n_expert == 8) {
        const bool bump = ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL || ft == FT_Q4_K_S ||
                          ft == FT_Q4_K_M || ft == FT_IQ4_XS;
        return bump ? BP_TYPE_Q5_K : type;
      }
      if (ft == FT_Q2_K) return BP_TYPE_Q3_K;
      if (ft == FT_Q3_K_M) return BP_TYPE_Q4_K;
      if (ft == FT_Q3_K_L) return BP_TYPE_Q5_K;
      return type;
    }
    return type;
  }
};

// Rule 3: the type a row of |ne0| values can hold instead of |type|.
bp_type fallback(bp_type type, int64_t ne0) {
  if (ne0 % bp_type_block_size(type) == 0) return type;
  bp_type to = type;
  switch (type) {
    case BP_TYPE_IQ4_XS:
      to = BP_TYPE_IQ4_NL;
      break;
    case BP_TYPE_Q2_K:
    case BP_TYPE_Q3_K:
      to = BP_TYPE_Q4_0;
      break;
    case BP_TYPE_Q4_K:
      to = BP_TYPE_Q5_0;
      break;
    case BP_TYPE_Q5_K:
      to = BP_TYPE_Q5_1;
      break;
    case BP_TYPE_Q6_K:
      to = BP_TYPE_Q8_0;
      break;
    default:
      break;  // a 32-value block already
  }
  return ne0 % bp_type_block_size(to) == 0 ? to : BP_TYPE_F16;
}

int layer_number(const std::string &name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}

}  // namespace

const std::vector<quant_mix> &quant_mixes() {
  static const std::vector<quant_mix> mixes = {
      {"Q4_0", FT_Q4_0, BP_TYPE_Q4_0},
      {"Q4_1", FT_Q4_1, BP_TYPE_Q4_1},
      {"MXFP4_MOE", FT_MXFP4_MOE, BP_TYPE_MXFP4},
      {"Q5_0", FT_Q5_0, BP_TYPE_Q5_0},
      {"Q5_1", FT_Q5_1, BP_TYPE_Q5_1},
      {"Q2_K", FT_Q2_K, BP_TYPE_Q2_K},
      {"Q3_K_S", FT_Q3_K_S, BP_TYPE_Q3_K},
      {"Q3_K_M", FT_Q3_K_M, BP_TYPE_Q3_K},
      {"Q3_K_L", FT_Q3_K_L, BP_TYPE_Q3_K},
      {"IQ4_NL", FT_IQ4_NL, BP_TYPE_IQ4_NL},
      {"IQ4_XS", FT_IQ4_XS, BP_TYPE_IQ4_XS},
      {"Q4_K_S", FT_Q4_K_S, BP_TYPE_Q4_K},
      {"Q4_K_M", FT_Q4_K_M, BP_TYPE_Q4_K},
      {"Q5_K_S", FT_Q5_K_S, BP_TYPE_Q5_K},
      {"Q5_K_M", FT_Q5_K_M, BP_TYPE_Q5_K},
      {"Q6_K", FT_Q6_K, BP_TYPE_Q6_K},
      {"Q8_0", FT_Q8_0, BP_TYPE_Q8_0},
      {"F16", FT_F16, BP_TYPE_F16},
      {"BF16", FT_BF16, BP_TYPE_BF16},
      {"F32", FT_F32, BP_TYPE_F32},
  };
  return mixes;
}

const quant_mix *find_mix(const std::string &name) {
  static const char *const aliases[][2] = {{"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"}};
  std::string want = name;
  for (const auto &a : aliases) {
    if (strcasecmp(name.c_str(), a[0]) == 0) want = a[1];
  }
  for (const quant_mix &m : quant_mixes()) {
    if (strcasecmp(want.c_str(), m.name) == 0) return &m;
  }
  return nullptr;
}

bool llama_order(const std::string &a, const std::string &b) {
  const int la = layer_number(a), lb = layer_number(b);
  return la != lb ? la < lb : a < b;
}

std::vector<rule_choice> choose_types(const quant_mix &mix, bool pure, const model_facts &facts,
                                      const std::vector<rule_tensor> &tensors) {
  rule_state state{mix, facts};
  for (const rule_tensor &t : tensors) {
    const role r = role_of(t.name);
    if (r == role::output) state.tied = false;
    if (r == role::attn_v) ++state.n_attn_v;
  }
  std::vector<rule_choice> out;
  out.reserve(tensors.size());
  for (const rule_tensor &t : tensors) {
    rule_choice c;
    c.quantizable = quantizable(t);
    c.type = c.wanted = c.quantizable ? mix.base : t.type;
    if (c.quantizable && has_blocks(mix.base)) {
      if (!pure) c.wanted = state.by_role(t, role_of(t.name), mix.base);
      c.type = fallback(c.wanted, t.ne[0]);
      c.fell_back = c.type != c.wanted;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace bp::gguf_tool
