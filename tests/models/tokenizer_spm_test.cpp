// SentencePiece-style tokenizer ("llama") on a hand-made vocabulary: the
// expected ids follow llama.cpp's algorithm worked through by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/gguf.h"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer_fixture.hpp"

namespace {

using bp::model::tokenizer;

using bp::test::gguf_builder;

const std::string kSp = "\xE2\x96\x81";  // U+2581

struct spm_vocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  void add(const std::string &p, float score, int32_t type = 1) {
    pieces.push_back(p);
    scores.push_back(score);
    types.push_back(type);
  }
  int32_t id(const std::string &p) const {
    for (size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i] == p) return static_cast<int32_t>(i);
    ADD_FAILURE() << "no token " << p;
    return -1;
  }
  int32_t byte(unsigned char b) const {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    return id(name);
  }
};

spm_vocab make_vocab() {
  spm_vocab v;
  v.add("<unk>", 0, 2);
  v.add("<s>", 0, 3);
  v.add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.add(name, 0, 6);
  }
  for (const char *c : {"h", "e", "l", "o", "w", "r", "d"}) v.add(c, -10);
  v.add(kSp, -10);
  v.add(kSp + "h", -5);
  v.add("he", -1);
  v.add("ll", -2);
  v.add("lo", -3);
  v.add("llo", -1.5f);
  v.add(kSp + kSp, -0.5f);
  v.add("<|im_end|>", 0, 1);  // normal in the file, end of turn by its name
  v.add("<|user|>", 0, 4);    // user-defined
  return v;
}

std::unique_ptr<tokenizer> load(const spm_vocab &v, void (*extra)(gguf_builder &) = nullptr) {
  gguf_builder b;
  b.str("tokenizer.ggml.model", "llama");
  b.strs("tokenizer.ggml.tokens", v.pieces);
  b.f32s("tokenizer.ggml.scores", v.scores);
  b.i32s("tokenizer.ggml.token_type", v.types);
  if (extra) extra(b);
  std::unique_ptr<tokenizer> t;
  EXPECT_EQ(b.load(&t), BP_OK) << gguf_builder::last_error;
  return t;
}

std::vector<int32_t> ids(const tokenizer &t, const std::string &text, bool bos = false, bool special = true) {
  std::vector<int32_t> out;
  EXPECT_EQ(t.tokenize(text, bos, special, &out), BP_OK);
  return out;
}

using V = std::vector<int32_t>;

TEST(TokenizerSpm, Basics) {
  const spm_vocab v = make_vocab();
  auto t = load(v);
  ASSERT_TRUE(t);
  EXPECT_STREQ(t->kind(), "llama");
  EXPECT_EQ(t->n_vocab(), static_cast<int32_t>(v.pieces.size()));
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  EXPECT_TRUE(t->add_bos());
  EXPECT_TRUE(t->is_end(2));
  EXPECT_TRUE(t->is_end(v.id("<|im_end|>")));
  EXPECT_FALSE(t->is_end(1));
  EXPECT_EQ(t->token_text(1), "");
  EXPECT_EQ(t->token_text(v.id("<|im_end|>")), "");  // made control by its name
  EXPECT_EQ(t->token_text(v.id("<|user|>")), "<|user|>");
  EXPECT_EQ(t->token_text(v.id(kSp + "h")), " h");
  EXPECT_EQ(t->token_text(v.byte(0x0A)), "\n");
  EXPECT_EQ(t->token_piece(v.byte(0x0A)), "<0x0A>");
}

// "▁hello": he (-1) first, then ll (-2), then llo (-1.5), which was queued
// after ll; ▁h (-5) is stale by then.
TEST(TokenizerSpm, MergesByScore) {
  const spm_vocab v = make_vocab();
  auto t = load(v);
  EXPECT_EQ(ids(*t, "hello"), (V{v.id(kSp), v.id("he"), v.id("llo")}));
  EXPECT_EQ(ids(*t, "h"), (V{v.id(kSp + "h")}));
  EXPECT_EQ(ids(*t, "hello", true), (V{1, v.id(kSp), v.id("he"), v.id("llo")}));
  EXPECT_EQ(ids(*t, ""), V{});
  EXPECT_EQ(ids(*t, "", true), V{1});
}

TEST(TokenizerSpm, ByteFallback) {
  const spm_vocab v = make_vocab();
  auto t = load(v);
  EXPECT_EQ(ids(*t, "h\xC3\xA9"), (V{v.id(kSp + "h"), v.byte(0xC3), v.byte(0xA9)}));
  EXPECT_EQ(ids(*t, "\xF0\x9F\x98\x80"), (V{v.id(kSp), v.byte(0xF0), v.byte(0x9F), v.byte(0x98), v.byte(0x80)}));
  EXPECT_EQ(ids(*t, "\xE6\x97\xA5"), (V{v.id(kSp), v.byte(0xE6), v.byte(0x97), v.byte(0xA5)}));
  EXPECT_EQ(ids(*t, "h\n\t"), (V{v.id(kSp + "h"), v.byte('\n'), v.byte('\t')}));
  // Invalid UTF-8 goes out byte by byte.
  EXPECT_EQ(ids(*t, "h\xFF"), (V{v.id(kSp + "h"), v.byte(0xFF)}));
}

// "▁h▁▁e": ▁▁ (-0.5) merges before ▁h (-5).
TEST(TokenizerSpm, WhitespaceRuns) {
  const spm_vocab v = make_vocab();
  auto t = load(v);
  EXPECT_EQ(ids(*t, "h  e"), (V{v.id(kSp + "h"), v.id(kSp + kSp), v.id("e")}));
  EXPECT_EQ(ids(*t, " h"), (V{v.id(kSp + kSp), v.id("h")}));
}

TEST(TokenizerSpm, SpecialTokens) {
  const spm_vocab v = make_vocab();
  auto t = load(v);
  // After a special token the text gets the space prefix again.
  EXPECT_EQ(ids(*t, "<s>h</s>", false, true), (V{1, v.id(kSp + "h"), 2}));
  EXPECT_EQ(ids(*t, "<s>h", false, false), (V{v.id(kSp), v.byte('<'), v.byte('s'), v.byte('>'), v.id("h")}));
  // User-defined tokens are split out even without parse_special; the text
  // after one gets the space prefix, so such text does not round-trip.
  EXPECT_EQ(ids(*t, "<|user|>h", false, false), (V{v.id("<|user|>"), v.id(kSp + "h")}));
}

// llama.cpp drops the whitespace after special tokens in Phi-3 files, which
// it recognises by general.name.
TEST(TokenizerSpm, Phi3StripsAfterSpecials) {
  const spm_vocab v = make_vocab();
  EXPECT_EQ(ids(*load(v), "<|user|>  h"), (V{v.id("<|user|>"), v.id(kSp + kSp), v.id(kSp + "h")}));
  auto phi3 = load(v, [](gguf_builder &b) { b.str("general.name", "Phi-3 mini"); });
  EXPECT_EQ(ids(*phi3, "<|user|>  h"), (V{v.id("<|user|>"), v.id(kSp + "h")}));
}

TEST(TokenizerSpm, NoSpacePrefix) {
  const spm_vocab v = make_vocab();
  auto t = load(v, [](gguf_builder &b) {
    b.boolean("tokenizer.ggml.add_space_prefix", false);
    b.boolean("tokenizer.ggml.add_bos_token", false);
    b.u32("tokenizer.ggml.bos_token_id", 2);
  });
  EXPECT_EQ(ids(*t, "h"), (V{v.id("h")}));
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->bos(), 2);
  const V x = ids(*t, " h");
  EXPECT_EQ(t->detokenize(x.data(), x.size(), true), " h");
}

TEST(TokenizerSpm, RoundTrip) {
  const spm_vocab v = make_vocab();
  auto t = load(v);
  for (const std::string s : {"hello world", "  two leading", "trailing  ", "h\n\te\r\n", "\xC3\xA9t\xC3\xA9",
                              "\xF0\x9F\x98\x80 emoji", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", ""}) {
    for (bool bos : {false, true}) {
      const V x = ids(*t, s, bos);
      EXPECT_EQ(t->detokenize(x.data(), x.size(), true), s) << s;
    }
  }
  const V x = ids(*t, "hello");
  EXPECT_EQ(t->detokenize(x.data(), x.size(), false), " hello");
}

bp_status load_status(void (*fill)(gguf_builder &)) {
  gguf_builder b;
  fill(b);
  std::unique_ptr<tokenizer> t;
  const bp_status st = b.load(&t);
  EXPECT_EQ(st != BP_OK, t == nullptr);
  return st;
}

TEST(TokenizerSpm, Errors) {
  EXPECT_EQ(load_status([](gguf_builder &b) { b.str("tokenizer.ggml.model", "llama"); }), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(gguf_builder::last_error.find("tokenizer.ggml.tokens"), std::string::npos) << gguf_builder::last_error;

  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.model", "llama");
              b.strs("tokenizer.ggml.tokens", {"a", "b"});
              b.f32s("tokenizer.ggml.scores", {0});
            }),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(gguf_builder::last_error.find("tokenizer.ggml.scores"), std::string::npos) << gguf_builder::last_error;

  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.model", "llama");
              b.strs("tokenizer.ggml.tokens", {"a", "b"});
              b.u32("tokenizer.ggml.eos_token_id", 7);
            }),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(gguf_builder::last_error.find("tokenizer.ggml.eos_token_id"), std::string::npos)
      << gguf_builder::last_error;

  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.model", "llama");
              b.strs("tokenizer.ggml.tokens", {"a", "a"});
            }),
            BP_ERR_INVALID_ARGUMENT);

  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.model", "bert");
              b.strs("tokenizer.ggml.tokens", {"a"});
            }),
            BP_ERR_UNIMPLEMENTED);
  EXPECT_NE(gguf_builder::last_error.find("'bert'"), std::string::npos) << gguf_builder::last_error;
  EXPECT_NE(gguf_builder::last_error.find("gpt2"), std::string::npos) << gguf_builder::last_error;
}

}  // namespace
