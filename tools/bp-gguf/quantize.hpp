// quantize.hpp: bp-gguf quantize: an f32, f16 or bf16 GGUF file to a
// quantized one, per tensor the type llama.cpp's llama-quantize picks for the
// same mix. The pieces, one job per file:
//   quantize_cli.cpp     the subcommand's flags and the command itself
//   quantize_rules.cpp   the mixes and the per-tensor type rules
//   quantize_plan.cpp    reads the input: the model's facts, each tensor's type, size and offset
//   quantize_header.cpp  the output's metadata and tensor table, as bytes
//   quantize_run.cpp     the threaded quantize-and-write loop, the progress bar
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "backplane/gguf.h"

namespace bp::gguf_tool {

struct quantize_options {
  std::string in, out, type;
  int threads = 0;  // 0: the hardware's
  bool dry_run = false;
  bool pure = false;     // every quantizable tensor gets the mix's base type (llama-quantize --pure)
  bool progress = true;  // the bar, when standard error is a terminal
};

// Adds the quantize subcommand to |app|, its flags stored in |opts|.
CLI::App *add_quantize_command(CLI::App &app, quantize_options &opts);

// Quantizes. 0 done, 1 a bad file or a failed step, 2 bad usage (an unknown
// mix), each with a message on stderr.
int quantize(const quantize_options &opts);

// ---- rules (quantize_rules.cpp) ----

// A llama.cpp file type ("mix"): its name, the value of general.file_type
// (llama_ftype) and the type most tensors get.
struct quant_mix {
  const char *name;
  uint32_t file_type;
  bp_type base;
};

// The mixes bp-gguf quantize writes, in llama-quantize's order. Aliases
// (Q3_K, Q4_K, Q5_K for the _M mixes) resolve in find_mix.
const std::vector<quant_mix> &quant_mixes();
// |name| case-insensitively, or an alias; nullptr when unknown.
const quant_mix *find_mix(const std::string &name);

// What the rules read from the file's metadata.
struct model_facts {
  std::string arch;
  int n_layer = 0;    // {arch}.block_count
  int n_head = 0;     // {arch}.attention.head_count (layer 0's when an array)
  int n_head_kv = 0;  // {arch}.attention.head_count_kv, n_head when absent
  int n_expert = 0;   // {arch}.expert_count
  int n_vocab = 0;
  int n_gqa() const { return n_head_kv == 0 ? 0 : n_head / n_head_kv; }
};

// A tensor as the rules see it: its name, shape (ne0 = row length) and type.
struct rule_tensor {
  std::string name;
  int n_dims = 0;  // as ggml counts them: trailing 1s dropped
  int64_t ne[4] = {1, 1, 1, 1};
  bp_type type = BP_TYPE_F32;
};

// The type chosen for one tensor.
struct rule_choice {
  bp_type type = BP_TYPE_F32;    // what it is written as
  bool quantizable = false;      // llama.cpp would quantize this tensor at all
  bool fell_back = false;        // its row length is not a multiple of |wanted|'s block
  bp_type wanted = BP_TYPE_F32;  // the rules' type before the fallback
};

// The type of every tensor of |tensors| (already in llama.cpp's order, see
// llama_order) for |mix|. Throws std::runtime_error when a rule cannot place
// a tensor (an expert tensor whose name has no layer).
std::vector<rule_choice> choose_types(const quant_mix &mix, bool pure, const model_facts &facts,
                                      const std::vector<rule_tensor> &tensors);

// llama.cpp's order of tensors: by layer (blk.N.; others first), then name.
bool llama_order(const std::string &a, const std::string &b);

// ---- plan (quantize_plan.cpp) ----

struct planned_tensor {
  size_t index = 0;  // in the input file
  rule_tensor t;
  rule_choice choice;
  const uint8_t *src = nullptr;
  uint64_t src_bytes = 0;
  uint64_t out_bytes = 0;
  uint64_t out_offset = 0;  // from the start of the output's data section
};

struct quantize_plan {
  model_facts facts;
  std::vector<planned_tensor> tensors;  // in the output's order
  uint64_t alignment = 32;
  uint64_t in_bytes = 0, out_bytes = 0;
  int n_fallback = 0;
};

// Reads |file| and plans |mix|. False with the reason in |error| for an
// input that is already quantized or holds a type Backplane does not know.
bool make_plan(const bp_gguf *file, const quant_mix &mix, bool pure, quantize_plan &plan, std::string &error);

// ---- header (quantize_header.cpp) ----

// The output's bytes before the data section: every metadata pair of |file|
// (split.* dropped), general.quantization_version = 2 and general.file_type =
// |mix|'s, both last, as llama.cpp writes them; then the tensor table of
// |plan| and the padding to the alignment.
std::vector<uint8_t> quantize_header(const bp_gguf *file, const quant_mix &mix, const quantize_plan &plan);

// ---- run (quantize_run.cpp) ----

// Writes the data section of |plan| at |data_offset| of |fd| with |threads|
// threads; a bar on stderr when |progress|. False with the reason in |error|.
bool quantize_run(const quantize_plan &plan, int fd, uint64_t data_offset, int threads, bool progress,
                  std::string &error);

}  // namespace bp::gguf_tool
