// bpe.hpp: the tokenizer of tokenizer.ggml.model "gpt2" (byte-level BPE).
#pragma once

#include <memory>

#include "pretokenize.hpp"
#include "vocab_tokenizer.hpp"

namespace bp::model::tok {

class bpe_tokenizer final : public vocab_tokenizer {
 public:
  bpe_tokenizer(vocab v, std::unique_ptr<pretokenizer> pre);
  const char *kind() const override { return "gpt2"; }

 protected:
  void encode(std::string_view text, bool after_special, std::vector<int32_t> *out) const override;

 private:
  void encode_word(const std::string &word, std::vector<int32_t> *out) const;
  std::unique_ptr<pretokenizer> pre_;
};

}  // namespace bp::model::tok
