// tiny_model.hpp: seeded random llama / qwen2 / qwen3 GGUF files for the
// model tests, written with the public GGUF writer, and the same weights as
// doubles for the reference forward pass.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backplane/backplane.h"

namespace bp::test {

struct tiny_config {
  std::string arch = "llama";
  int n_embd = 64, n_layer = 2, n_head = 4, n_head_kv = 2, n_ff = 96, head_dim = 16;
  int n_pieces = 40;  // vocabulary = 3 control + 256 byte tokens + pieces
  int n_ctx_train = 256;
  bp_type type = BP_TYPE_F32;  // the matrices' type
  bool tied = false;
  bool rope_freqs = false;
  float rope_base = 10000.0f;
  uint64_t seed = 1;
  // A scripted model when not empty: greedy decoding after token `first`
  // gives token `second` (pair k sets row `first` of the token table to the
  // unit vector e_k and adds e_k to output row `second`; the layers add
  // nothing), so a test picks the exact tokens, bytes and end a generation
  // sees. At most n_embd pairs, each `first` once; other tokens give
  // all-zero logits.
  std::vector<std::pair<int, int>> script;
  int n_vocab() const { return 3 + 256 + n_pieces; }
};

// name -> values as the file holds them after quantization (dequantized),
// row-major with ne[0] fastest, plus each tensor's ne.
struct tiny_weights {
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, std::vector<int64_t>> shapes;
  const std::vector<double> &at(const std::string &name) const { return values.at(name); }
  bool has(const std::string &name) const { return values.count(name) != 0; }
};

// Writes the model to |path|; "" on success, else the reason. |skip| names a
// tensor to leave out and |extra| adds key=value string pairs (bad files).
std::string write_tiny_model(const tiny_config &cfg, const std::string &path, tiny_weights *out,
                             const std::string &skip = "",
                             const std::vector<std::pair<std::string, std::string>> &extra = {});

// The logits (n_vocab per position) of |tokens| from position 0, in double.
std::vector<double> reference_logits(const tiny_config &cfg, const tiny_weights &w, const std::vector<int32_t> &tokens);

// A fresh temporary folder for one test's files.
std::string temp_dir();

}  // namespace bp::test
