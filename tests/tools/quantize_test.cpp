// quantize_test.cpp: bp-gguf quantize as a user runs it, on two small f16
// files from bp-gguf synth whose shapes reach llama-quantize's rules: eight
// layers (the "more bits" layers 0, 3, 6 and 7 of ffn_down and attn_v), an
// untied output with four query heads per key head and a feed-forward length
// of 352 (a multiple of 32, not of 256: ffn_down falls back to 32-value
// blocks), and a tied one (no output.weight) with a feed-forward length of
// 360 (not a multiple of 32: ffn_down stays f16). For every mix each tensor
// has the type the rules below say, its bytes are bp_quantize_rows_for_file
// of the input's values, every key is copied and general.file_type set; the
// output loads (bp-gguf check); bad input is refused with a clear message.
// scripts/models/compare_quantize.sh checks the same against llama-quantize.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backplane/gguf.h"
#include "support/run_command.hpp"

namespace {

using result = bp::test::command_result;

result run(const std::string &cmd) { return bp::test::run_command(cmd + " 2>&1"); }

std::string tool() { return std::string(BP_TEST_BIN_DIR) + "/bp-gguf"; }

// Each mix: its general.file_type and base type.
struct mix_info {
  uint32_t file_type;
  bp_type base;
};
const std::map<std::string, mix_info> &mixes() {
  static const std::map<std::string, mix_info> m = {
      {"Q4_0", {2, BP_TYPE_Q4_0}},      {"Q4_1", {3, BP_TYPE_Q4_1}},        {"Q5_0", {8, BP_TYPE_Q5_0}},
      {"Q5_1", {9, BP_TYPE_Q5_1}},      {"Q8_0", {7, BP_TYPE_Q8_0}},        {"Q2_K", {10, BP_TYPE_Q2_K}},
      {"Q3_K_S", {11, BP_TYPE_Q3_K}},   {"Q3_K_M", {12, BP_TYPE_Q3_K}},     {"Q3_K_L", {13, BP_TYPE_Q3_K}},
      {"Q4_K_S", {14, BP_TYPE_Q4_K}},   {"Q4_K_M", {15, BP_TYPE_Q4_K}},     {"Q5_K_S", {16, BP_TYPE_Q5_K}},
      {"Q5_K_M", {17, BP_TYPE_Q5_K}},   {"Q6_K", {18, BP_TYPE_Q6_K}},       {"IQ4_NL", {25, BP_TYPE_IQ4_NL}},
      {"IQ4_XS", {30, BP_TYPE_IQ4_XS}}, {"MXFP4_MOE", {38, BP_TYPE_MXFP4}}, {"F16", {1, BP_TYPE_F16}},
      {"BF16", {32, BP_TYPE_BF16}},     {"F32", {0, BP_TYPE_F32}},
  };
  return m;
}

// The test files' shapes, as the rules read them.
struct shape_facts {
  bool tied;
  int gqa;
  int64_t ff;
};

bool ends_with(const std::string &s, const char *tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// llama.cpp's fallback for a row of |ne0| values that is not whole blocks of
// |want|: a type with 32-value blocks, else f16.
bp_type fallback(bp_type want, int64_t ne0) {
  if (ne0 % bp_type_block_size(want) == 0) return want;
  const std::map<bp_type, bp_type> to = {{BP_TYPE_Q2_K, BP_TYPE_Q4_0}, {BP_TYPE_Q3_K, BP_TYPE_Q4_0},
                                         {BP_TYPE_Q4_K, BP_TYPE_Q5_0}, {BP_TYPE_Q5_K, BP_TYPE_Q5_1},
                                         {BP_TYPE_Q6_K, BP_TYPE_Q8_0}, {BP_TYPE_IQ4_XS, BP_TYPE_IQ4_NL}};
  auto it = to.find(want);
  const bp_type t = it == to.end() ? want : it->second;
  return ne0 % bp_type_block_size(t) == 0 ? t : BP_TYPE_F16;
}

// The type the rules want for |name| of a file shaped as |f| (eight layers,
// width 256) in a quantized |mix|, written out by role rather than computed
// as the tool does.
bp_type wanted(const std::string &mix, const shape_facts &f, const std::string &name) {
  const bp_type base = mixes().at(mix).base;
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  const bool more = layer == 0 || layer == 3 || layer == 6 || layer == 7;  // more bits, 8 layers
  const bool first = layer == 0;                                           // the first 8th
  auto has = [&](const char *part) { return name.find(part) != std::string::npos; };
  if (name == "output.weight" || (f.tied && name == "token_embd.weight")) {
    return mix == "Q8_0" || mix == "MXFP4_MOE" ? BP_TYPE_Q8_0 : BP_TYPE_Q6_K;
  }
  if (mix == "MXFP4_MOE") return BP_TYPE_Q8_0;  // no experts here
  if (has("attn_v.weight")) {
    if (mix == "Q2_K") return f.gqa >= 4 ? BP_TYPE_Q4_K : BP_TYPE_Q3_K;
    if (mix == "Q3_K_M") return layer < 2 ? BP_TYPE_Q5_K : BP_TYPE_Q4_K;
    if (mix == "Q3_K_L") return BP_TYPE_Q5_K;
    if (mix == "IQ4_NL" || mix == "IQ4_XS") return f.gqa >= 4 ? BP_TYPE_Q5_K : base;
    if (mix == "Q4_K_M" || mix == "Q5_K_M") return more ? BP_TYPE_Q6_K : base;
    if (mix == "Q4_K_S") return layer < 4 ? BP_TYPE_Q5_K : base;
    return base;
  }
  if (has("attn_output.weight")) {
    if (mix == "Q2_K") return BP_TYPE_Q3_K;
    if (mix == "Q3_K_M") return BP_TYPE_Q4_K;
    if (mix == "Q3_K_L") return BP_TYPE_Q5_K;
    return base;
  }
  if (!has("ffn_down")) return base;
  if (mix == "Q2_K") return BP_TYPE_Q3_K;
  if (mix == "Q3_K_M") return BP_TYPE_Q4_K;
  if (mix == "Q3_K_L") return BP_TYPE_Q5_K;
  if (mix == "Q4_K_M") return more ? BP_TYPE_Q6_K : BP_TYPE_Q4_K;
  if (mix == "Q5_K_M") return more ? BP_TYPE_Q6_K : BP_TYPE_Q5_K;
  if (mix == "Q4_K_S" || mix == "IQ4_NL" || mix == "IQ4_XS") return first ? BP_TYPE_Q5_K : base;
  return base;
}

// The type llama-quantize gives a tensor of input type |in|: only 2-D
// weights other than norms change; an unquantized mix gives its type.
bp_type expected(const std::string &mix, const shape_facts &f, const bp_gguf_tensor_info &t) {
  const std::string name = t.name;
  const bp_type base = mixes().at(mix).base;
  if (t.n_dims < 2 || !ends_with(name, "weight") || ends_with(name, "_norm.weight")) return t.type;
  if (base == BP_TYPE_F16 || base == BP_TYPE_BF16 || base == BP_TYPE_F32) return base;
  return fallback(wanted(mix, f, name), t.ne[0]);
}

// An open file, closed at the end of the scope.
struct gguf_file {
  bp_gguf *f = nullptr;
  explicit gguf_file(const std::string &path) { EXPECT_EQ(bp_gguf_open(path.c_str(), &f), BP_OK) << bp_last_error(); }
  ~gguf_file() { bp_gguf_close(f); }
  bp_gguf_tensor_info tensor(size_t i) const {
    bp_gguf_tensor_info ti{};
    ti.struct_size = sizeof ti;
    EXPECT_EQ(bp_gguf_tensor_describe(f, i, &ti), BP_OK);
    return ti;
  }
  const uint8_t *bytes(size_t i) const {
    const void *d = nullptr;
    uint64_t n = 0;
    EXPECT_EQ(bp_gguf_tensor_data(f, i, &d, &n), BP_OK);
    return static_cast<const uint8_t *>(d);
  }
  // Every element of a key, as text: its kind and values.
  std::vector<std::string> value(size_t i) const {
    bp_gguf_value_info vi{};
    vi.struct_size = sizeof vi;
    EXPECT_EQ(bp_gguf_kv_describe(f, i, &vi), BP_OK);
    std::vector<std::string> out = {std::to_string(vi.kind) + "/" + std::to_string(vi.elem_kind)};
    for (uint64_t e = 0; e < vi.count; ++e) {
      const char *s = nullptr;
      uint64_t len = 0;
      double d = 0;
      uint64_t u = 0;
      if (vi.elem_kind == BP_GGUF_STRING && bp_gguf_kv_read_string(f, i, e, &s, &len) == BP_OK) {
        out.emplace_back(s, len);
      } else if ((vi.elem_kind == BP_GGUF_F32 || vi.elem_kind == BP_GGUF_F64) &&
                 bp_gguf_kv_read_float(f, i, e, &d) == BP_OK) {
        out.push_back(std::to_string(d));
      } else if (bp_gguf_kv_read_uint(f, i, e, &u) == BP_OK) {
        out.push_back(std::to_string(u));
      } else {
        int64_t v = 0;
        EXPECT_EQ(bp_gguf_kv_read_int(f, i, e, &v), BP_OK);
        out.push_back(std::to_string(v));
      }
    }
    return out;
  }
  int64_t integer(const char *key) const {
    size_t i = 0;
    int64_t v = -1;
    if (bp_gguf_find_key(f, key, &i) != BP_OK || bp_gguf_kv_read_int(f, i, 0, &v) != BP_OK) return -1;
    return v;
  }
};

class Quantize : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access(tool().c_str(), X_OK) != 0) return;
    char tmpl[] = "/tmp/bp_quantize_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string common = " --type f16 --embd 256 --layers 8 --heads 4 --n-vocab 600";
    result r = run(tool() + " synth " + untied() + " --arch llama --kv-heads 1 --ff 352" + common);
    ASSERT_EQ(r.status, 0) << r.out;
    r = run(tool() + " synth " + tied() + " --arch qwen2 --vocab bpe --kv-heads 2 --ff 360 --tied" + common);
    ASSERT_EQ(r.status, 0) << r.out;
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void SetUp() override {
    if (access(tool().c_str(), X_OK) != 0) GTEST_SKIP() << tool() << " is not built";
  }
  static std::string untied() { return dir_ + "/untied-f16.gguf"; }
  static std::string tied() { return dir_ + "/tied-f16.gguf"; }
  static std::string out(const std::string &name) { return dir_ + "/" + name; }
  static std::string dir_;
};
std::string Quantize::dir_;

// Types, bytes and metadata of every mix on both files.
void check_mix(const std::string &in_path, const shape_facts &facts, const std::string &mix, const std::string &out) {
  SCOPED_TRACE(mix + " of " + in_path);
  result r = run(tool() + " quantize " + in_path + " " + out + " " + mix + " --threads 2");
  ASSERT_EQ(r.status, 0) << r.out;
  gguf_file in(in_path), q(out);
  ASSERT_TRUE(in.f && q.f);
  EXPECT_EQ(q.integer("general.file_type"), mixes().at(mix).file_type);
  EXPECT_EQ(q.integer("general.quantization_version"), 2);
  for (size_t k = 0; k < bp_gguf_kv_count(in.f); ++k) {
    const std::string key = bp_gguf_kv_key(in.f, k);
    if (key == "general.file_type") continue;
    size_t j = 0;
    ASSERT_EQ(bp_gguf_find_key(q.f, key.c_str(), &j), BP_OK) << key;
    EXPECT_EQ(in.value(k), q.value(j)) << key;
  }
  ASSERT_EQ(bp_gguf_tensor_count(q.f), bp_gguf_tensor_count(in.f));
  std::vector<float> values;
  std::vector<uint8_t> want, plain;
  for (size_t i = 0; i < bp_gguf_tensor_count(q.f); ++i) {
    const bp_gguf_tensor_info t = q.tensor(i);
    size_t j = 0;
    ASSERT_EQ(bp_gguf_find_tensor(in.f, t.name, &j), BP_OK) << t.name;
    const bp_gguf_tensor_info s = in.tensor(j);
    ASSERT_EQ(t.type, expected(mix, facts, s)) << t.name << " is " << t.type_name;
    if (t.type == s.type) {
      ASSERT_EQ(t.nbytes, s.nbytes);
      EXPECT_EQ(std::memcmp(q.bytes(i), in.bytes(j), t.nbytes), 0) << t.name;
      continue;
    }
    const int64_t n = t.ne[0] * t.ne[1], rows = t.ne[1];
    values.resize(n);
    ASSERT_EQ(bp_dequantize(s.type, in.bytes(j), values.data(), n), BP_OK);
    want.assign(t.nbytes, 0);
    ASSERT_EQ(bp_quantize_rows_for_file(t.type, values.data(), want.data(), rows, t.ne[0], nullptr), BP_OK);
    EXPECT_EQ(std::memcmp(q.bytes(i), want.data(), t.nbytes), 0) << t.name << " " << t.type_name;
    if (t.type != BP_TYPE_IQ4_NL) {  // the one type whose file quantizer is not the reference
      plain.assign(t.nbytes, 0);
      ASSERT_EQ(bp_quantize_rows(t.type, values.data(), plain.data(), rows, t.ne[0], nullptr), BP_OK);
      EXPECT_EQ(plain, want) << t.name;
    }
  }
}

TEST_F(Quantize, EveryMixGivesEachTensorTheRulesTypeAndTheQuantizersBytes) {
  for (const auto &[mix, info] : mixes()) {
    check_mix(untied(), {false, 4, 352}, mix, out("untied-" + mix + ".gguf"));
    check_mix(tied(), {true, 2, 360}, mix, out("tied-" + mix + ".gguf"));
  }
}

TEST_F(Quantize, OutputLoads) {
  for (const char *mix : {"Q4_K_M", "Q2_K", "IQ4_XS"}) {
    const std::string path = out(std::string("load-") + mix + ".gguf");
    ASSERT_EQ(run(tool() + " quantize " + untied() + " " + path + " " + mix).status, 0);
    result r = run(tool() + " check " + path + " --no-cold");
    EXPECT_EQ(r.status, 0) << mix << "\n" << r.out;
  }
}

TEST_F(Quantize, AliasesLowerCaseAndThreadsGiveTheSameFile) {
  const std::string a = out("t1.gguf"), b = out("t3.gguf"), c = out("alias.gguf");
  ASSERT_EQ(run(tool() + " quantize " + untied() + " " + a + " Q4_K_M --threads 1").status, 0);
  ASSERT_EQ(run(tool() + " quantize " + untied() + " " + b + " q4_k_m --threads 3").status, 0);
  ASSERT_EQ(run(tool() + " quantize " + untied() + " " + c + " Q4_K").status, 0);
  EXPECT_EQ(run("cmp " + a + " " + b).status, 0);
  EXPECT_EQ(run("cmp " + a + " " + c).status, 0);
}

TEST_F(Quantize, DryRunListsEveryTensorAndTheSizeAndWritesNothing) {
  const std::string path = out("dry.gguf");
  result r = run(tool() + " quantize " + untied() + " " + path + " Q4_K_M --dry-run");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_NE(r.out.find("blk.0.attn_v.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> q6_K"), std::string::npos);
  EXPECT_NE(r.out.find("blk.1.ffn_down.weight: row length 352 is not a multiple of 256 (q4_K's block): q5_0"),
            std::string::npos)
      << r.out;
  const size_t at = r.out.find("output file ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const uint64_t said = std::stoull(r.out.substr(at + 12));
  ASSERT_EQ(run(tool() + " quantize " + untied() + " " + path + " Q4_K_M").status, 0);
  EXPECT_EQ(said, std::filesystem::file_size(path));
}

TEST_F(Quantize, BadInputIsRefusedWithAClearMessage) {
  result r = run(tool() + " quantize " + untied() + " " + out("x.gguf") + " Q4_K_XL");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown type \"Q4_K_XL\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Q4_K_M"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("IQ4_XS"), std::string::npos) << r.out;
  const std::string q = out("q8.gguf");
  ASSERT_EQ(run(tool() + " quantize " + untied() + " " + q + " Q8_0").status, 0);
  r = run(tool() + " quantize " + q + " " + out("again.gguf") + " Q4_K_M");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("already quantized"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out("again.gguf")));
  r = run(tool() + " quantize " + out("missing.gguf") + " " + out("y.gguf") + " Q4_0");
  EXPECT_EQ(r.status, 1) << r.out;
}

}  // namespace
