// tokenizer.hpp: the tokenizer a GGUF file describes (tokenizer.ggml.*):
// SentencePiece-style ("llama": scores, byte fallback) or byte-level BPE
// ("gpt2": merges, with the pre-tokenizer named by tokenizer.ggml.pre).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/gguf.h"

namespace bp::model {

class tokenizer {
 public:
  virtual ~tokenizer() = default;

  // Reads the vocabulary of |file|. On failure returns a status (with
  // bp_report_error: INVALID_ARGUMENT naming the key, UNIMPLEMENTED naming an
  // unknown tokenizer.ggml.model or .pre) and leaves *out empty.
  static bp_status from_gguf(const bp_gguf *file, std::unique_ptr<tokenizer> *out);

  // Appends the ids of |text| to |out| (BOS first when |add_bos| and the
  // vocabulary has one); control tokens' text is matched only when
  // |parse_special| (user-defined tokens always are, as in llama.cpp).
  // Invalid UTF-8 is never an error: SentencePiece sends its bytes to byte
  // tokens, byte-level BPE reads each bad byte as U+FFFD (as llama.cpp does).
  virtual bp_status tokenize(std::string_view text, bool add_bos, bool parse_special,
                             std::vector<int32_t> *out) const = 0;
  // The bytes a token stands for in the output text ("" for control tokens).
  virtual const std::string &token_text(int32_t id) const = 0;
  // The vocabulary entry as stored in the file.
  virtual const std::string &token_piece(int32_t id) const = 0;
  // The text of |ids|; |strip_leading_space| drops the one space a
  // SentencePiece vocabulary prefixes to a text.
  virtual std::string detokenize(const int32_t *ids, size_t n, bool strip_leading_space) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;  // -1 when none
  virtual int32_t eos() const = 0;  // -1 when none
  virtual bool add_bos() const = 0;
  virtual bool is_end(int32_t id) const = 0;  // EOS, EOT, <|im_end|>, <|endoftext|>, ...
  virtual const char *kind() const = 0;       // "llama" or "gpt2"
};

}  // namespace bp::model
