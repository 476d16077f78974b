// synth_cli.cpp: the flags of bp-gguf synth (docs/tools.md lists them).
#include "synth.hpp"

namespace bp::gguf_tool {

CLI::App *add_synth_command(CLI::App &app, synth_options &o) {
  CLI::App *c = app.add_subcommand("synth", "write a seeded random-weight llama/qwen2/qwen3 GGUF file");
  c->add_option("OUT", o.out, "the GGUF file to write")->required();
  c->add_option("--arch", o.arch, "llama, qwen2 or qwen3")->required();
  c->add_option("--type", o.type, "weight type: f32 f16 bf16 q8_0 q4_0 q5_0 q4_K q5_K q6_K")->required();
  c->add_option("--vocab", o.vocab, "spm (LLaMA 2 style) or bpe (GPT-2 style); default spm");
  c->add_option("--n-vocab", o.n_vocab, "tokens (default 512)");
  c->add_option("--embd", o.embd, "embedding length (default 64)");
  c->add_option("--layers", o.layers, "blocks (default 2)");
  c->add_option("--heads", o.heads, "attention heads (default 4)");
  c->add_option("--kv-heads", o.kv_heads, "key/value heads (default 2)");
  c->add_option("--head-dim", o.head_dim, "per-head dimension (default embd/heads)");
  c->add_option("--ff", o.ff, "feed-forward length (default 160)");
  c->add_option("--ctx", o.ctx, "context length (default 256)");
  c->add_option("--seed", o.seed, "random seed (default 1)");
  c->add_option("--rope-base", o.rope_base, "rope frequency base (default 10000 llama, 1000000 qwen)");
  c->add_flag("--rope-freqs", o.rope_freqs, "add LLaMA 3.1-style rope_freqs.weight (llama only)");
  c->add_flag("--tied", o.tied, "no output.weight: the output reuses token_embd");
  c->add_option("--output-type", o.output_type, "type of output.weight (default q6_K for K-quants, else --type)");
  return c;
}

}  // namespace bp::gguf_tool
