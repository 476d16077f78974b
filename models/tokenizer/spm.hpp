// spm.hpp: the tokenizer of tokenizer.ggml.model "llama" (SentencePiece).
#pragma once

#include "vocab_tokenizer.hpp"

namespace bp::model::tok {

class spm_tokenizer final : public vocab_tokenizer {
 public:
  explicit spm_tokenizer(vocab v);
  const char *kind() const override { return "llama"; }

 protected:
  void encode(std::string_view text, bool after_special, std::vector<int32_t> *out) const override;
};

}  // namespace bp::model::tok
