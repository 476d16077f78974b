// synth_test.cpp: bp-gguf synth as a user runs it: every architecture with
// every weight type, read back with bp_gguf_open (keys, tensor names, shapes,
// types, vocabulary sizes); the same seed gives the same bytes; bad flags
// exit 2 with a message naming the flag.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/gguf.h"
#include "support/run_command.hpp"

namespace {

using result = bp::test::command_result;

// Standard error too: the messages are what these tests read.
result run(const std::string &cmd) { return bp::test::run_command(cmd + " 2>&1"); }

std::string tool() { return std::string(BP_TEST_BIN_DIR) + "/bp-gguf"; }

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// An open file, closed at the end of the scope.
struct gguf_file {
  bp_gguf *f = nullptr;
  explicit gguf_file(const std::string &path) { EXPECT_EQ(bp_gguf_open(path.c_str(), &f), BP_OK) << bp_last_error(); }
  ~gguf_file() { bp_gguf_close(f); }
  bool has(const std::string &key) const {
    size_t i;
    return bp_gguf_find_key(f, key.c_str(), &i) == BP_OK;
  }
  size_t index(const std::string &key) const {
    size_t i = 0;
    EXPECT_EQ(bp_gguf_find_key(f, key.c_str(), &i), BP_OK) << key;
    return i;
  }
  int64_t integer(const std::string &key) const {
    int64_t v = -1;
    EXPECT_EQ(bp_gguf_kv_read_int(f, index(key), 0, &v), BP_OK) << key;
    return v;
  }
  double real(const std::string &key) const {
    double v = -1;
    EXPECT_EQ(bp_gguf_kv_read_float(f, index(key), 0, &v), BP_OK) << key;
    return v;
  }
  std::string str(const std::string &key, uint64_t elem = 0) const {
    const char *d = nullptr;
    uint64_t n = 0;
    EXPECT_EQ(bp_gguf_kv_read_string(f, index(key), elem, &d, &n), BP_OK) << key;
    return d ? std::string(d, n) : std::string();
  }
  uint64_t count(const std::string &key) const {
    bp_gguf_value_info vi{};
    vi.struct_size = sizeof vi;
    EXPECT_EQ(bp_gguf_kv_describe(f, index(key), &vi), BP_OK);
    return vi.count;
  }
  // "type [ne0, ne1]" of a tensor, "" when absent.
  std::string tensor(const std::string &name) const {
    size_t i;
    if (bp_gguf_find_tensor(f, name.c_str(), &i) != BP_OK) return "";
    bp_gguf_tensor_info ti{};
    ti.struct_size = sizeof ti;
    EXPECT_EQ(bp_gguf_tensor_describe(f, i, &ti), BP_OK);
    std::ostringstream s;
    s << ti.type_name << " [";
    for (uint32_t d = 0; d < ti.n_dims; ++d) s << (d ? ", " : "") << ti.ne[d];
    s << "]";
    return s.str();
  }
  std::vector<float> f32(const std::string &name) const {
    size_t i = 0;
    EXPECT_EQ(bp_gguf_find_tensor(f, name.c_str(), &i), BP_OK) << name;
    const void *d = nullptr;
    uint64_t n = 0;
    EXPECT_EQ(bp_gguf_tensor_data(f, i, &d, &n), BP_OK);
    const float *p = static_cast<const float *>(d);
    return std::vector<float>(p, p + n / 4);
  }
};

class Synth : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(tool().c_str(), X_OK) != 0) GTEST_SKIP() << tool() << " is not built";
    char tmpl[] = "/tmp/bp_synth_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Runs synth into dir_/|name|; the path.
  std::string synth(const std::string &name, const std::string &flags) {
    const std::string path = dir_ + "/" + name;
    result r = run(tool() + " synth " + path + " " + flags);
    EXPECT_EQ(r.status, 0) << flags << "\n" << r.out;
    return path;
  }
  std::string dir_;
};

// The reader names types in lower case ("q4_k").
std::string shape(std::string type, int64_t a, int64_t b = -1) {
  for (auto &c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type + " [" + std::to_string(a) + (b >= 0 ? ", " + std::to_string(b) : "") + "]";
}

TEST_F(Synth, EveryArchitectureWithEveryType) {
  const std::map<std::string, uint32_t> ftype = {{"f32", 0},  {"f16", 1},   {"bf16", 32}, {"q8_0", 7}, {"q4_0", 2},
                                                 {"q5_0", 8}, {"q4_K", 15}, {"q5_K", 17}, {"q6_K", 18}};
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    for (const auto &[type, file_type] : ftype) {
      SCOPED_TRACE(arch + " " + type);
      // 256 columns everywhere, so the K-quants fit; qwen3 with a wider head
      // (key_length 128, 4 x 128 = 512 query columns).
      const int64_t embd = 256, ff = 512, heads = 4, kv = 2, hd = arch == "qwen3" ? 128 : 64, layers = 2;
      const std::string vocab = arch == "llama" ? "spm" : "bpe";
      const std::string path =
          synth(arch + "_" + type + ".gguf", "--arch " + arch + " --type " + type + " --vocab " + vocab +
                                                 " --embd 256 --ff 512 --layers 2 --n-vocab 600" +
                                                 (arch == "qwen3" ? " --head-dim 128" : ""));
      gguf_file g(path);
      ASSERT_NE(g.f, nullptr);
      EXPECT_EQ(g.str("general.architecture"), arch);
      EXPECT_FALSE(g.str("general.name").empty());
      EXPECT_EQ(g.integer("general.file_type"), file_type);
      const std::string a = arch + ".";
      EXPECT_EQ(g.integer(a + "context_length"), 256);
      EXPECT_EQ(g.integer(a + "embedding_length"), embd);
      EXPECT_EQ(g.integer(a + "block_count"), layers);
      EXPECT_EQ(g.integer(a + "feed_forward_length"), ff);
      EXPECT_EQ(g.integer(a + "attention.head_count"), heads);
      EXPECT_EQ(g.integer(a + "attention.head_count_kv"), kv);
      EXPECT_EQ(g.integer(a + "rope.dimension_count"), hd);
      EXPECT_EQ(g.integer(a + "vocab_size"), 600);
      EXPECT_GT(g.real(a + "attention.layer_norm_rms_epsilon"), 0);
      EXPECT_EQ(g.real(a + "rope.freq_base"), arch == "llama" ? 10000.0 : 1000000.0);
      EXPECT_EQ(g.has(a + "attention.key_length"), arch == "qwen3");
      if (arch == "qwen3") {
        EXPECT_EQ(g.integer(a + "attention.value_length"), hd);
      }
      // The vocabulary: as many tokens, types (and spm scores) as --n-vocab.
      EXPECT_EQ(g.count("tokenizer.ggml.tokens"), 600u);
      EXPECT_EQ(g.count("tokenizer.ggml.token_type"), 600u);
      EXPECT_EQ(g.str("tokenizer.ggml.model"), vocab == "spm" ? "llama" : "gpt2");
      if (vocab == "spm") {
        EXPECT_EQ(g.count("tokenizer.ggml.scores"), 600u);
      }
      if (vocab == "bpe") {
        EXPECT_GT(g.count("tokenizer.ggml.merges"), 300u);
      }

      const std::string out_type = type.back() == 'K' ? "q6_K" : type;  // as Q4_K_M / Q5_K_M
      EXPECT_EQ(g.tensor("token_embd.weight"), shape(type, embd, 600));
      EXPECT_EQ(g.tensor("output_norm.weight"), shape("f32", embd));
      EXPECT_EQ(g.tensor("output.weight"), shape(out_type, embd, 600));
      EXPECT_EQ(g.tensor("rope_freqs.weight"), "");
      size_t n = 3;
      for (int64_t i = 0; i < layers; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        EXPECT_EQ(g.tensor(b + "attn_norm.weight"), shape("f32", embd));
        EXPECT_EQ(g.tensor(b + "attn_q.weight"), shape(type, embd, heads * hd));
        EXPECT_EQ(g.tensor(b + "attn_k.weight"), shape(type, embd, kv * hd));
        EXPECT_EQ(g.tensor(b + "attn_v.weight"), shape(type, embd, kv * hd));
        EXPECT_EQ(g.tensor(b + "attn_output.weight"), shape(type, heads * hd, embd));
        EXPECT_EQ(g.tensor(b + "ffn_norm.weight"), shape("f32", embd));
        EXPECT_EQ(g.tensor(b + "ffn_gate.weight"), shape(type, embd, ff));
        EXPECT_EQ(g.tensor(b + "ffn_up.weight"), shape(type, embd, ff));
        EXPECT_EQ(g.tensor(b + "ffn_down.weight"), shape(type, ff, embd));
        n += 9;
        if (arch == "qwen2") {
          EXPECT_EQ(g.tensor(b + "attn_q.bias"), shape("f32", heads * hd));
          EXPECT_EQ(g.tensor(b + "attn_k.bias"), shape("f32", kv * hd));
          EXPECT_EQ(g.tensor(b + "attn_v.bias"), shape("f32", kv * hd));
          n += 3;
        }
        if (arch == "qwen3") {
          EXPECT_EQ(g.tensor(b + "attn_q_norm.weight"), shape("f32", hd));
          EXPECT_EQ(g.tensor(b + "attn_k_norm.weight"), shape("f32", hd));
          n += 2;
        }
      }
      EXPECT_EQ(bp_gguf_tensor_count(g.f), n);
    }
  }
}

TEST_F(Synth, SpmVocabularyIsLlamaShaped) {
  gguf_file g(synth("spm.gguf", "--arch llama --type f16 --n-vocab 1000"));
  EXPECT_EQ(g.str("tokenizer.ggml.tokens", 0), "<unk>");
  EXPECT_EQ(g.str("tokenizer.ggml.tokens", 1), "<s>");
  EXPECT_EQ(g.str("tokenizer.ggml.tokens", 2), "</s>");
  EXPECT_EQ(g.str("tokenizer.ggml.tokens", 3), "<0x00>");
  EXPECT_EQ(g.str("tokenizer.ggml.tokens", 3 + 0x0a), "<0x0A>");
  EXPECT_EQ(g.str("tokenizer.ggml.tokens", 258), "<0xFF>");
  EXPECT_EQ(g.integer("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(g.integer("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(g.integer("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(g.integer("tokenizer.ggml.add_bos_token"), 1);
  EXPECT_FALSE(g.has("tokenizer.ggml.merges"));
  // Learned pieces: common words whole, with U+2581 for their space.
  bool the = false;
  for (uint64_t i = 259; i < 1000; ++i) the |= g.str("tokenizer.ggml.tokens", i) == "\xe2\x96\x81the";
  EXPECT_TRUE(the);
}

TEST_F(Synth, BpeVocabularyHasMergesAndSpecials) {
  for (const std::string arch : {"llama", "qwen3"}) {
    gguf_file g(synth(arch + ".gguf", "--arch " + arch + " --type q8_0 --vocab bpe --n-vocab 2000"));
    EXPECT_EQ(g.str("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(g.str("tokenizer.ggml.pre"), arch == "llama" ? "llama-bpe" : "qwen2");
    EXPECT_EQ(g.str("tokenizer.ggml.tokens", 0), "!");           // GPT-2's byte order
    EXPECT_EQ(g.str("tokenizer.ggml.tokens", 255), "\xc5\x83");  // byte 0xAD is U+0143
    EXPECT_EQ(g.integer("tokenizer.ggml.add_bos_token"), arch == "llama" ? 1 : 0);
    const int64_t bos = g.integer("tokenizer.ggml.bos_token_id");
    EXPECT_EQ(g.str("tokenizer.ggml.tokens", bos), arch == "llama" ? "<|begin_of_text|>" : "<|endoftext|>");
    EXPECT_EQ(g.str("tokenizer.ggml.tokens", 1999), arch == "llama" ? "<|eot_id|>" : "<|im_end|>");
    // Every merge "a b" makes a token a+b.
    std::map<std::string, bool> tokens;
    for (uint64_t i = 0; i < 2000; ++i) tokens[g.str("tokenizer.ggml.tokens", i)] = true;
    const uint64_t n_merges = g.count("tokenizer.ggml.merges");
    EXPECT_GE(n_merges, 2000u - 256 - 3);
    for (uint64_t i = 0; i < n_merges; ++i) {
      const std::string m = g.str("tokenizer.ggml.merges", i);
      const size_t sp = m.find(' ');
      ASSERT_NE(sp, std::string::npos) << m;
      EXPECT_TRUE(tokens.count(m.substr(0, sp) + m.substr(sp + 1))) << m;
    }
    EXPECT_TRUE(tokens.count("\xc4\xa0the"));  // " the", space as U+0120
  }
}

TEST_F(Synth, SameSeedSameBytes) {
  const std::string flags = "--arch qwen3 --type q4_K --embd 256 --ff 256 --vocab bpe --seed 7";
  const std::string a = slurp(synth("a.gguf", flags)), b = slurp(synth("b.gguf", flags));
  const std::string c = slurp(synth("c.gguf", flags + "0"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c);
}

TEST_F(Synth, OutputTiedAndRopeFreqs) {
  {
    gguf_file g(synth("tied.gguf", "--arch llama --type q4_0 --tied --rope-freqs --rope-base 500000"));
    EXPECT_EQ(g.tensor("output.weight"), "");
    EXPECT_EQ(g.real("llama.rope.freq_base"), 500000.0);
    EXPECT_EQ(g.tensor("rope_freqs.weight"), shape("f32", 8));
    const std::vector<float> f = g.f32("rope_freqs.weight");
    ASSERT_EQ(f.size(), 8u);
    EXPECT_EQ(f.front(), 1.0f);  // high frequencies untouched
    EXPECT_EQ(f.back(), 8.0f);   // low ones slowed by LLaMA 3.1's factor
    for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
  }
  {
    gguf_file g(synth("out.gguf", "--arch llama --type q5_K --embd 256 --ff 256 --output-type q8_0"));
    EXPECT_EQ(g.tensor("output.weight"), shape("q8_0", 256, 512));
    EXPECT_EQ(g.tensor("token_embd.weight"), shape("q5_K", 256, 512));
  }
}

TEST_F(Synth, BadFlagsExit2NamingTheFlag) {
  const std::pair<std::string, std::string> cases[] = {
      {"--arch gpt9 --type f16", "--arch"},
      {"--arch llama --type iq2_xxs", "--type"},
      {"--arch llama --type q4_K", "--embd"},  // 64 is not a multiple of 256
      {"--arch llama --type q8_0 --ff 100", "--ff"},
      {"--arch llama --type f16 --heads 4 --kv-heads 3", "--kv-heads"},
      {"--arch llama --type f16 --n-vocab 100", "--n-vocab"},
      {"--arch llama --type f16 --vocab bpe --n-vocab 200", "--n-vocab"},
      {"--arch qwen2 --type f16 --rope-freqs", "--rope-freqs"},
      {"--arch qwen2 --type f16 --head-dim 32", "--head-dim"},
      {"--arch llama --type f16 --vocab wordpiece", "--vocab"},
      {"--arch llama --type q8_0 --output-type tq1_0", "--output-type"},
      {"--arch llama --type f16 --layers 0", "--layers"},
      {"--arch llama", "--type"},  // required
  };
  for (const auto &[flags, named] : cases) {
    const std::string path = dir_ + "/bad.gguf";
    result r = run(tool() + " synth " + path + " " + flags);
    EXPECT_EQ(r.status, 2) << flags << "\n" << r.out;
    EXPECT_NE(r.out.find(named), std::string::npos) << flags << "\n" << r.out;
    EXPECT_NE(access(path.c_str(), F_OK), 0) << flags;
  }
}

}  // namespace
