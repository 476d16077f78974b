// special.hpp: splitting special tokens' text out of a text before it is
// tokenized (llama.cpp's tokenizer_st_partition).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "vocab.hpp"

namespace bp::model::tok {

// A special token (token >= 0) or a span [begin, end) of plain text.
struct fragment {
  int32_t token;
  size_t begin, end;
};

// Control and unknown tokens are split out only when |parse_special|;
// user-defined ones always are, as Hugging Face tokenizers do.
std::vector<fragment> partition(const vocab &v, std::string_view text, bool parse_special);

}  // namespace bp::model::tok
