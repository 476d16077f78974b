// synth.hpp: bp-gguf synth: seeded random-weight llama-family GGUF files
// (llama, qwen2, qwen3) that llama.cpp loads and runs, for tests and
// benchmarks. The pieces, one job per file:
//   synth_cli.cpp      the subcommand's flags
//   synth.cpp          checks the options, writes metadata and tensors
//   synth_weights.cpp  the seeded values, their scales, quantized in parallel
//   synth_scratch.cpp  file-backed memory for the bytes until they are written
//   synth_vocab.cpp    a small BPE trainer and the spm / gpt2 vocabularies
//   synth_sample.cpp   the text the trainer learns from
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace bp::gguf_tool {

struct synth_options {
  std::string out;
  std::string arch;  // llama | qwen2 | qwen3
  std::string type;  // f32 f16 bf16 q8_0 q4_0 q5_0 q4_K q5_K q6_K
  std::string vocab = "spm";
  int64_t n_vocab = 512;
  int64_t embd = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 0;  // 0: embd / heads
  int64_t ff = 160;
  int64_t ctx = 256;
  uint64_t seed = 1;
  double rope_base = 0;  // 0: 10000 for llama, 1000000 for qwen2/qwen3
  bool rope_freqs = false;
  bool tied = false;
  std::string output_type;  // "": q6_K for K-quants, else --type
};

// Adds the synth subcommand to |app|, its flags stored in |opts|.
CLI::App *add_synth_command(CLI::App &app, synth_options &opts);

// Writes the file. 0 done, 1 a failed step, 2 a bad option (message on stderr).
int synth(const synth_options &opts);

// ---- weights (synth_weights.cpp) ----

// How a tensor's values are drawn: value = mean + std * N(0,1)-ish, from a
// counter-based generator keyed by (seed, name), so the bytes do not depend
// on the thread count or the platform's libm.
struct synth_fill {
  float mean = 0;
  float std = 1;
};

// |rows| rows of |n_per_row| values drawn per |fill| and encoded as |type|
// (rows quantized in parallel) into |out|, which holds
// bp_type_row_size(type, n_per_row) * rows bytes. False with the error set by
// bp_quantize_rows when that fails.
bool synth_tensor_bytes(uint64_t seed, const std::string &name, synth_fill fill, bp_type type, int64_t n_per_row,
                        int64_t rows, uint8_t *out);

// Memory for tensor bytes that lives until the scratch is destroyed: pages
// of an unlinked file beside |out_path| (synth_scratch.cpp), else the heap.
class synth_scratch {
 public:
  explicit synth_scratch(const std::string &out_path);
  ~synth_scratch();
  synth_scratch(const synth_scratch &) = delete;
  synth_scratch &operator=(const synth_scratch &) = delete;
  uint8_t *alloc(size_t n);

 private:
  int fd_ = -1;
  uint64_t end_ = 0;
  std::vector<std::pair<void *, size_t>> maps_;
  std::deque<std::vector<uint8_t>> heap_;
};

// LLaMA 3.1's rope scaling factors (factor 8, low 1, high 4, original context
// 8192) for |head_dim| / 2 frequencies of base |base|: 1 for the high
// frequencies, 8 for the low ones, smoothly in between.
std::vector<float> synth_rope_factors(int64_t head_dim, double base);

// ---- vocabulary (synth_vocab.cpp) ----

struct synth_vocab {
  std::string model;  // "llama" or "gpt2"
  std::string pre;    // "" (spm), "llama-bpe" or "qwen2"
  std::vector<std::string> tokens;
  std::vector<float> scores;        // spm only
  std::vector<int32_t> types;       // 1 normal, 2 unknown, 3 control, 6 byte
  std::vector<std::string> merges;  // gpt2 only, "a b"
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_bos = false;
};

// The vocabulary of |n_vocab| tokens: |kind| "spm" or "bpe", |arch| picks
// the gpt2 pre-tokenizer and special tokens. Empty tokens and the message in
// |error| when |n_vocab| is too small.
synth_vocab synth_make_vocab(const std::string &kind, const std::string &arch, int64_t n_vocab, std::string &error);

// The training text (synth_sample.cpp): English prose, C/Python code and
// a few other languages, UTF-8.
const char *synth_sample_text();

}  // namespace bp::gguf_tool
