// pretokenize.hpp: cutting text into words before byte-level BPE, with the
// regular expressions llama.cpp uses for each tokenizer.ggml.pre.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/backplane.h"
#include "vocab.hpp"

namespace bp::model::tok {

class pretokenizer {
 public:
  static bp_status create(pre_kind kind, std::unique_ptr<pretokenizer> *out);
  ~pretokenizer();
  pretokenizer(const pretokenizer &) = delete;
  pretokenizer &operator=(const pretokenizer &) = delete;

  // The words of |text|, in order, as UTF-8. Malformed UTF-8 comes back as
  // U+FFFD, as llama.cpp decodes it before splitting.
  std::vector<std::string> split(std::string_view text) const;

 private:
  pretokenizer() = default;
  std::vector<void *> codes_;  // pcre2_code_8 *, applied in turn to each piece
};

}  // namespace bp::model::tok
