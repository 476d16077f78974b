// vocab.cpp: reads tokenizer.ggml.* through the public GGUF reader and derives
// what llama.cpp derives at load time (defaults per model, end-of-generation
// tokens recognised by their text), since token ids depend on all of it.
#include "vocab.hpp"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <initializer_list>

#include "report.hpp"

namespace bp::model::tok {
namespace {

constexpr const char *kModelKey = "tokenizer.ggml.model";
constexpr const char *kPreKey = "tokenizer.ggml.pre";
constexpr const char *kTokensKey = "tokenizer.ggml.tokens";
constexpr const char *kScoresKey = "tokenizer.ggml.scores";
constexpr const char *kTypesKey = "tokenizer.ggml.token_type";
constexpr const char *kMergesKey = "tokenizer.ggml.merges";

// What a file declares with tokenizer.ggml.token_type.
enum file_token_type { kTypeNormal = 1, kTypeUnknown, kTypeControl, kTypeUserDefined, kTypeUnused, kTypeByte };

struct reader {
  const bp_gguf *file;

  bool find(const char *key, size_t *index) const { return bp_gguf_find_key(file, key, index) == BP_OK; }

  bp_status info(const char *key, size_t index, bp_gguf_value_info *out) const {
    *out = {};
    out->struct_size = sizeof *out;
    if (bp_gguf_kv_describe(file, index, out) != BP_OK) return failf(BP_ERR_INVALID_ARGUMENT, "%s: unreadable", key);
    return BP_OK;
  }

  // A string array |key| at |index|, its element count in *count.
  bp_status string_array(const char *key, size_t index, uint64_t *count) const {
    bp_gguf_value_info vi;
    if (bp_status st = info(key, index, &vi)) return st;
    if (vi.kind != BP_GGUF_ARRAY || vi.elem_kind != BP_GGUF_STRING)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: expected an array of strings, found %s", key,
                   bp_gguf_kind_name(vi.kind == BP_GGUF_ARRAY ? vi.elem_kind : vi.kind));
    *count = vi.count;
    return BP_OK;
  }

  bp_status string_at(const char *key, size_t index, uint64_t elem, std::string *out) const {
    const char *data = nullptr;
    uint64_t len = 0;
    if (bp_gguf_kv_read_string(file, index, elem, &data, &len) != BP_OK)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s[%" PRIu64 "]: not a string", key, elem);
    out->assign(data, len);
    return BP_OK;
  }

  // Optional string; *present tells whether the key exists.
  bp_status string_key(const char *key, std::string *out, bool *present) const {
    size_t index;
    *present = find(key, &index);
    if (!*present) return BP_OK;
    bp_gguf_value_info vi;
    if (bp_status st = info(key, index, &vi)) return st;
    if (vi.kind != BP_GGUF_STRING)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: expected a string, found %s", key, bp_gguf_kind_name(vi.kind));
    return string_at(key, index, 0, out);
  }

  // Optional bool; *out is left alone when the key is absent.
  bp_status bool_key(const char *key, bool *out) const {
    size_t index;
    if (!find(key, &index)) return BP_OK;
    int64_t v = 0;
    if (bp_gguf_kv_read_int(file, index, 0, &v) != BP_OK)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: expected a bool", key);
    *out = v != 0;
    return BP_OK;
  }

  // Optional token id; unlike llama.cpp, which falls back to its default
  // with a warning, an id outside the vocabulary is an error: the file is
  // wrong and guessing would hide it.
  bp_status id_key(const char *key, int32_t n_vocab, int32_t *out, bool *present = nullptr) const {
    size_t index;
    const bool found = find(key, &index);
    if (present) *present = found;
    if (!found) return BP_OK;
    int64_t v = 0;
    if (bp_gguf_kv_read_int(file, index, 0, &v) != BP_OK)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: expected an integer token id", key);
    if (v < 0 || v >= n_vocab)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s = %" PRId64 " is outside the vocabulary (%d tokens)", key, v, n_vocab);
    *out = static_cast<int32_t>(v);
    return BP_OK;
  }
};

bp_status read_model(const reader &r, vocab *v) {
  std::string model, pre;
  bool present = false;
  if (bp_status st = r.string_key(kModelKey, &model, &present)) return st;
  if (!present) return failf(BP_ERR_INVALID_ARGUMENT, "%s: missing", kModelKey);
  if (model == "llama") {
    v->model = model_kind::spm;
    return BP_OK;  // llama.cpp ignores .pre for SentencePiece vocabularies
  }
  if (model != "gpt2")
    return failf(BP_ERR_UNIMPLEMENTED, "%s '%s' is not supported (supported: llama, gpt2)", kModelKey, model.c_str());
  v->model = model_kind::bpe;
  if (bp_status st = r.string_key(kPreKey, &pre, &present)) return st;
  if (!present || pre == "default") {
    v->pre = pre_kind::dflt;
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    v->pre = pre_kind::llama3;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    v->pre = pre_kind::qwen2;
  } else if (pre == "gpt-2" || pre == "gpt2") {
    v->pre = pre_kind::gpt2;
  } else {
    return failf(BP_ERR_UNIMPLEMENTED,
                 "%s '%s' is not supported (supported: llama-bpe, llama3, llama-v3, qwen2, deepseek-r1-qwen, gpt-2, "
                 "default)",
                 kPreKey, pre.c_str());
  }
  return BP_OK;
}

bp_status read_tokens(const reader &r, vocab *v) {
  size_t index;
  if (!r.find(kTokensKey, &index)) return failf(BP_ERR_INVALID_ARGUMENT, "%s: missing", kTokensKey);
  uint64_t n = 0;
  if (bp_status st = r.string_array(kTokensKey, index, &n)) return st;
  if (n == 0 || n > INT32_MAX) return failf(BP_ERR_INVALID_ARGUMENT, "%s: %" PRIu64 " tokens", kTokensKey, n);
  v->pieces.resize(n);
  v->ids.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string &piece = v->pieces[i];
    if (bp_status st = r.string_at(kTokensKey, index, i, &piece)) return st;
    // llama.cpp renames empty entries this way; keeping its name keeps
    // lookups of that text identical.
    if (piece.empty()) piece = "[EMPTY_" + std::to_string(i) + "]";
    if (!v->ids.emplace(piece, static_cast<int32_t>(i)).second)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s[%" PRIu64 "]: duplicate token '%s'", kTokensKey, i, piece.c_str());
  }

  v->scores.assign(n, 0.0f);
  if (r.find(kScoresKey, &index)) {
    bp_gguf_value_info vi;
    if (bp_status st = r.info(kScoresKey, index, &vi)) return st;
    if (vi.kind != BP_GGUF_ARRAY || (vi.elem_kind != BP_GGUF_F32 && vi.elem_kind != BP_GGUF_I32))
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: expected an array of f32 or i32", kScoresKey);
    if (vi.count != n)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: %" PRIu64 " scores for %" PRIu64 " tokens", kScoresKey, vi.count, n);
    for (uint64_t i = 0; i < n; ++i) {
      double s = 0;
      if (bp_gguf_kv_read_float(r.file, index, i, &s) != BP_OK)
        return failf(BP_ERR_INVALID_ARGUMENT, "%s[%" PRIu64 "]: unreadable", kScoresKey, i);
      v->scores[i] = static_cast<float>(s);
    }
  }

  v->attrs.assign(n, kNormal);
  if (r.find(kTypesKey, &index)) {
    bp_gguf_value_info vi;
    if (bp_status st = r.info(kTypesKey, index, &vi)) return st;
    if (vi.kind != BP_GGUF_ARRAY || vi.elem_kind != BP_GGUF_I32)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: expected an array of i32", kTypesKey);
    if (vi.count != n)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: %" PRIu64 " types for %" PRIu64 " tokens", kTypesKey, vi.count, n);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t t = 0;
      if (bp_gguf_kv_read_int(r.file, index, i, &t) != BP_OK)
        return failf(BP_ERR_INVALID_ARGUMENT, "%s[%" PRIu64 "]: unreadable", kTypesKey, i);
      switch (t) {
        case kTypeNormal:
          v->attrs[i] = kNormal;
          break;
        case kTypeUnknown:
          v->attrs[i] = kUnknown;
          break;
        case kTypeControl:
          v->attrs[i] = kControl;
          break;
        case kTypeUserDefined:
          v->attrs[i] = kUserDefined;
          break;
        case kTypeUnused:
          v->attrs[i] = kUnused;
          break;
        case kTypeByte:
          v->attrs[i] = kByte;
          break;
        default:
          v->attrs[i] = 0;
          break;  // undefined: no text, never special
      }
    }
  }
  return BP_OK;
}

bp_status read_merges(const reader &r, vocab *v) {
  size_t index;
  if (!r.find(kMergesKey, &index)) return failf(BP_ERR_INVALID_ARGUMENT, "%s: missing", kMergesKey);
  uint64_t n = 0;
  if (bp_status st = r.string_array(kMergesKey, index, &n)) return st;
  v->merge_ranks.reserve(n);
  std::string merge;
  for (uint64_t i = 0; i < n; ++i) {
    if (bp_status st = r.string_at(kMergesKey, index, i, &merge)) return st;
    // Split at the first space past the first byte, as llama.cpp does, so a
    // left side that is itself a space stays whole.
    const size_t sp = merge.find(' ', 1);
    if (sp == std::string::npos)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s[%" PRIu64 "]: '%s' is not two tokens separated by a space", kMergesKey,
                   i, merge.c_str());
    const std::string_view first(merge.data(), sp), second(merge.data() + sp + 1, merge.size() - sp - 1);
    for (std::string_view side : {first, second}) {
      if (v->find(side) < 0)
        return failf(BP_ERR_INVALID_ARGUMENT, "%s[%" PRIu64 "]: '%.*s' is not a token", kMergesKey, i,
                     static_cast<int>(side.size()), side.data());
    }
    // The first occurrence keeps its rank (llama.cpp emplaces).
    v->merge_ranks.emplace(vocab::merge_key(first, second), static_cast<int32_t>(i));
  }
  return BP_OK;
}

// The lowest id among tokens whose text is one of |names|, or -1.
int32_t find_named(const vocab &v, std::initializer_list<std::string_view> names) {
  int32_t best = -1;
  for (std::string_view name : names) {
    const int32_t id = v.find(name);
    if (id >= 0 && (best < 0 || id < best)) best = id;
  }
  return best;
}

// llama.cpp recognises end-of-turn and fill-in-the-middle tokens by their
// text when the file names no id, and forces them to CONTROL, which makes
// them special (split out of text, empty in output).
bp_status read_special_ids(const reader &r, vocab *v) {
  const int32_t n = static_cast<int32_t>(v->pieces.size());
  const auto in_range = [n](int32_t id) { return id >= 0 && id < n ? id : -1; };
  if (v->model == model_kind::spm) {
    v->bos = in_range(1);
    v->eos = in_range(2);
    v->unk = in_range(0);
    v->add_bos = true;
    v->add_space_prefix = true;
  } else {
    // llama.cpp's defaults for gpt2 vocabularies, odd as they are.
    v->bos = in_range(11);
    v->eos = in_range(11);
    v->add_bos = v->pre == pre_kind::llama3;
    v->ignore_merges = v->pre == pre_kind::llama3;
  }
  if (bp_status st = r.bool_key("tokenizer.ggml.add_space_prefix", &v->add_space_prefix)) return st;
  if (bp_status st = r.bool_key("tokenizer.ggml.add_bos_token", &v->add_bos)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.bos_token_id", n, &v->bos)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.eos_token_id", n, &v->eos)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.unknown_token_id", n, &v->unk)) return st;

  int32_t eot = -1, eom = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  if (bp_status st = r.id_key("tokenizer.ggml.eot_token_id", n, &eot)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.eom_token_id", n, &eom)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.fim_pad_token_id", n, &fim_pad)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.fim_rep_token_id", n, &fim_rep)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.fim_sep_token_id", n, &fim_sep)) return st;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1;
  if (bp_status st = r.id_key("tokenizer.ggml.fim_pre_token_id", n, &fim_pre)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.fim_suf_token_id", n, &fim_suf)) return st;
  if (bp_status st = r.id_key("tokenizer.ggml.fim_mid_token_id", n, &fim_mid)) return st;

  const auto detect = [v](int32_t *id, std::initializer_list<std::string_view> names) {
    if (*id >= 0) return;
    *id = find_named(*v, names);
    if (*id >= 0) v->attrs[*id] |= kControl;
  };
  detect(&eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                "_<EOT>", "[EOT]",
                "<\xEF\xBD\x9C"
                "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                "<end_of_utterance>"});
  detect(&eom, {"<|eom_id|>"});
  detect(&fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                    "<\xEF\xBD\x9C"
                    "fim\xE2\x96\x81"
                    "begin\xEF\xBD\x9C>",
                    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"});
  detect(&fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                    "<\xEF\xBD\x9C"
                    "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"});
  detect(&fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                    "<\xEF\xBD\x9C"
                    "fim\xE2\x96\x81"
                    "end\xEF\xBD\x9C>",
                    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"});
  detect(&fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect(&fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(&fim_sep, {"<|file_sep|>"});

  v->eog.assign(n, false);
  for (int32_t id : {fim_pad, fim_rep, fim_sep})
    if (id >= 0) v->eog[id] = true;
  static constexpr std::string_view kEndNames[] = {"<|eot_id|>",
                                                   "<|im_end|>",
                                                   "<|end|>",
                                                   "<|return|>",
                                                   "<|call|>",
                                                   "<|flush|>",
                                                   "<|calls|>",
                                                   "<end_of_turn>",
                                                   "<|endoftext|>",
                                                   "</s>",
                                                   "<|eom_id|>",
                                                   "<EOT>",
                                                   "_<EOT>",
                                                   "[EOT]",
                                                   "[EOS]",
                                                   "<|end_of_text|>",
                                                   "<end_of_utterance>",
                                                   "<eos>",
                                                   "<turn|>",
                                                   "<|tool_response>",
                                                   "<\xEF\xBD\x9C"
                                                   "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                                   "[e~["};
  for (std::string_view name : kEndNames) {
    const int32_t id = v->find(name);
    if (id < 0) continue;
    v->eog[id] = true;
    v->attrs[id] |= kControl;
  }
  // gpt-oss: these structure tokens are always rendered.
  for (std::string_view name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = v->find(name);
    if (id >= 0) v->attrs[id] = kUserDefined;
  }
  for (int32_t id : {v->eos, eot, eom})
    if (id >= 0) v->eog[id] = true;

  // Harmony and Solar-Open vocabularies use <|end|> between messages, not to
  // end generation; Gemma 4 likewise uses </s> as text.
  const auto is_eog_named = [v](std::string_view name) {
    const int32_t id = v->find(name);
    return id >= 0 && v->eog[id] ? id : -1;
  };
  const int32_t end = is_eog_named("<|end|>");
  const bool has_call = is_eog_named("<|call|>") >= 0 || is_eog_named("<|calls|>") >= 0;
  if (end >= 0 && has_call && (is_eog_named("<|return|>") >= 0 || is_eog_named("<|flush|>") >= 0)) {
    v->eog[end] = false;
    v->attrs[end] = kUserDefined;
  }
  const int32_t s = is_eog_named("</s>");
  if (s >= 0 && is_eog_named("<|tool_response>") >= 0) {
    v->eog[s] = false;
    v->attrs[s] = kNormal;
  }
  return BP_OK;
}

// Special tokens are split out longest first; among equal lengths llama.cpp's
// order is unspecified (std::sort), ours is by id.
void order_specials(vocab *v) {
  for (int32_t id = 0; id < static_cast<int32_t>(v->pieces.size()); ++id)
    if (v->attrs[id] & (kControl | kUserDefined | kUnknown)) v->specials.push_back(id);
  std::stable_sort(v->specials.begin(), v->specials.end(),
                   [v](int32_t a, int32_t b) { return v->pieces[a].size() > v->pieces[b].size(); });
}

// Phi-3 files are recognised by general.name; llama.cpp then drops the
// whitespace after most special tokens.
bp_status apply_name_quirks(const reader &r, vocab *v) {
  std::string name;
  bool present = false;
  if (bp_status st = r.string_key("general.name", &name, &present)) return st;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return BP_OK;
  for (int32_t id : v->specials) v->attrs[id] |= kRstrip;
  if (int32_t id = v->find("</s>"); id >= 0) v->attrs[id] |= kRstrip;
  for (std::string_view keep : {"<unk>", "<s>", "<|endoftext|>"})
    if (int32_t id = v->find(keep); id >= 0) v->attrs[id] &= ~kRstrip;
  return BP_OK;
}

}  // namespace

bp_status read_vocab(const bp_gguf *file, vocab *out) {
  *out = vocab{};
  const reader r{file};
  vocab v;
  if (bp_status st = read_model(r, &v)) return st;
  if (bp_status st = read_tokens(r, &v)) return st;
  if (v.model == model_kind::bpe)
    if (bp_status st = read_merges(r, &v)) return st;
  if (bp_status st = read_special_ids(r, &v)) return st;
  order_specials(&v);
  if (bp_status st = apply_name_quirks(r, &v)) return st;
  *out = std::move(v);
  return BP_OK;
}

}  // namespace bp::model::tok
