// vocab.hpp: the vocabulary of a GGUF file (tokenizer.ggml.*), with the token
// attributes and special ids llama.cpp derives from it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backplane/gguf.h"

namespace bp::model::tok {

// Token attributes, a bit set because llama.cpp adds CONTROL to tokens whose
// text names an end of generation while keeping what the file said.
enum attr : uint32_t {
  kUnknown = 1u << 0,
  kUnused = 1u << 1,
  kNormal = 1u << 2,
  kControl = 1u << 3,
  kUserDefined = 1u << 4,
  kByte = 1u << 5,
  kRstrip = 1u << 6,  // whitespace after the token is dropped (Phi-3)
};

// Lets the maps be searched with a string_view, without a copy per lookup.
struct text_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename T>
using text_map = std::unordered_map<std::string, T, text_hash, std::equal_to<>>;

enum class model_kind { spm, bpe };
enum class pre_kind { none, dflt, gpt2, llama3, qwen2 };

struct vocab {
  model_kind model = model_kind::spm;
  pre_kind pre = pre_kind::none;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<uint32_t> attrs;
  std::vector<bool> eog;
  text_map<int32_t> ids;
  // "<len(first)>:<first><second>" -> rank; the length keeps pairs apart.
  text_map<int32_t> merge_ranks;
  // Tokens split out of the text before tokenizing, longest text first.
  std::vector<int32_t> specials;
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_bos = false;
  bool add_space_prefix = false;
  // llama-bpe looks a whole pre-token up before merging.
  bool ignore_merges = false;

  int32_t find(std::string_view text) const {
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }
  static std::string merge_key(std::string_view first, std::string_view second) {
    std::string key = std::to_string(first.size());
    key += ':';
    key += first;
    key += second;
    return key;
  }
  int32_t merge_rank(std::string_view first, std::string_view second) const {
    auto it = merge_ranks.find(merge_key(first, second));
    return it == merge_ranks.end() ? -1 : it->second;
  }
};

// Fills *out from |file|; a failure is reported (report.hpp) and returned.
bp_status read_vocab(const bp_gguf *file, vocab *out);

}  // namespace bp::model::tok
