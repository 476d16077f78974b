// Byte-level BPE tokenizer ("gpt2") on a hand-made vocabulary: the
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

// GPT-2's byte alphabet, written out independently of the library.
std::string byte_char(unsigned b) {
  unsigned cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
    unsigned n = 0;
    for (unsigned c = 0; c < b; ++c)
      if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

const std::string G = byte_char(' ');   // "Ġ"
const std::string C = byte_char('\n');  // "Ċ"

// Tokens 0..255 are the bytes in byte order, so id == byte for single bytes.
struct bpe_vocab {
  std::vector<std::string> pieces;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  bpe_vocab() {
    for (unsigned b = 0; b < 256; ++b) add(byte_char(b));
  }
  void add(const std::string &p, int32_t type = 1) {
    pieces.push_back(p);
    types.push_back(type);
  }
  // Adds merge "a b" and its result as a token.
  void merge(const std::string &a, const std::string &b) {
    merges.push_back(a + " " + b);
    add(a + b);
  }
  int32_t id(const std::string &p) const {
    for (size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i] == p) return static_cast<int32_t>(i);
    ADD_FAILURE() << "no token " << p;
    return -1;
  }
};

bpe_vocab make_vocab() {
  bpe_vocab v;
  v.merge("l", "l");     // rank 0
  v.merge("h", "e");     // 1
  v.merge("he", "ll");   // 2
  v.merge("hell", "o");  // 3
  v.merge("l", "o");     // 4: loses to "l l" in "llo"
  v.merge("3", "4");     // 5: would win in "12345" if digits were not split first
  v.merge("1", "2");
  v.merge("12", "3");
  v.merge("4", "5");
  v.merge(G, G);
  v.merge(G, "b");
  v.merge(C, C);
  v.merge("'", "r");
  v.merge("'r", "e");
  v.merge("w", "e");
  v.add("<|endoftext|>", 3);
  v.add("<|im_start|>", 3);
  v.add("<|im_end|>", 3);
  return v;
}

std::unique_ptr<tokenizer> load(const bpe_vocab &v, const char *pre, void (*extra)(gguf_builder &) = nullptr) {
  gguf_builder b;
  b.str("tokenizer.ggml.model", "gpt2");
  if (pre) b.str("tokenizer.ggml.pre", pre);
  b.strs("tokenizer.ggml.tokens", v.pieces);
  b.i32s("tokenizer.ggml.token_type", v.types);
  b.strs("tokenizer.ggml.merges", v.merges);
  b.u32("tokenizer.ggml.bos_token_id", v.id("<|endoftext|>"));
  b.u32("tokenizer.ggml.eos_token_id", v.id("<|endoftext|>"));
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

TEST(TokenizerBpe, Basics) {
  const bpe_vocab v = make_vocab();
  auto t = load(v, "llama-bpe");
  ASSERT_TRUE(t);
  EXPECT_STREQ(t->kind(), "gpt2");
  EXPECT_TRUE(t->add_bos());  // llama-bpe's default
  EXPECT_EQ(t->bos(), v.id("<|endoftext|>"));
  EXPECT_TRUE(t->is_end(v.id("<|endoftext|>")));
  EXPECT_TRUE(t->is_end(v.id("<|im_end|>")));
  EXPECT_FALSE(t->is_end(v.id("<|im_start|>")));
  EXPECT_EQ(t->token_text(v.id(G + "b")), " b");
  EXPECT_EQ(t->token_text(v.id(C + C)), "\n\n");
  EXPECT_EQ(t->token_text(v.id("<|im_start|>")), "");
  EXPECT_EQ(t->token_piece(v.id(G + G)), G + G);
  EXPECT_FALSE(load(v, "qwen2")->add_bos());
}

// "hello": l l (rank 0), then h e, he ll, hell o; "l o" is stale by then.
TEST(TokenizerBpe, MergesByRank) {
  const bpe_vocab v = make_vocab();
  auto t = load(v, "qwen2");
  EXPECT_EQ(ids(*t, "hello"), V{v.id("hello")});
  EXPECT_EQ(ids(*t, "llo"), (V{v.id("ll"), 'o'}));
  EXPECT_EQ(ids(*t, "lo"), V{v.id("lo")});
  EXPECT_EQ(ids(*t, "hello", true), (V{v.id("<|endoftext|>"), v.id("hello")}));
}

TEST(TokenizerBpe, Digits) {
  const bpe_vocab v = make_vocab();
  EXPECT_EQ(ids(*load(v, "llama-bpe"), "12345"), (V{v.id("123"), v.id("45")}));
  EXPECT_EQ(ids(*load(v, "qwen2"), "12345"), (V{'1', '2', '3', '4', '5'}));
  // gpt-2 keeps the number whole, so "3 4" (the better rank) wins.
  EXPECT_EQ(ids(*load(v, "gpt-2"), "12345"), (V{v.id("12"), v.id("34"), '5'}));
}

TEST(TokenizerBpe, Whitespace) {
  const bpe_vocab v = make_vocab();
  auto t = load(v, "llama-bpe");
  // "a", "  " (the run less its last space), " b".
  EXPECT_EQ(ids(*t, "a   b"), (V{'a', v.id(G + G), v.id(G + "b")}));
  EXPECT_EQ(ids(*t, "a  "), (V{'a', v.id(G + G)}));
  EXPECT_EQ(ids(*t, "a\n\nb"), (V{'a', v.id(C + C), 'b'}));
  // "\t\n" is one piece; \t and \n are bytes 9 and 10.
  EXPECT_EQ(ids(*t, "a\t\nb"), (V{'a', 9, 10, 'b'}));
  // U+0085 counts as whitespace (llama.cpp's set): " \x85" then "b".
  EXPECT_EQ(ids(*t,
                "a \xC2\x85"
                "b"),
            (V{'a', 32, 0xC2, 0x85, 'b'}));
}

TEST(TokenizerBpe, Contractions) {
  const bpe_vocab v = make_vocab();
  // llama-bpe: "we", "'re", "x"; without the contraction rule "'rex" would be one piece.
  EXPECT_EQ(ids(*load(v, "llama-bpe"), "we'rex"), (V{v.id("we"), v.id("'re"), 'x'}));
  EXPECT_EQ(ids(*load(v, "llama-bpe"), "we'REx"), (V{v.id("we"), '\'', 'R', 'E', 'x'}));
  // gpt-2's contractions are lower case only: "'", "REx".
  EXPECT_EQ(ids(*load(v, "gpt-2"), "we'REx"), (V{v.id("we"), '\'', 'R', 'E', 'x'}));
  EXPECT_EQ(ids(*load(v, "gpt-2"), "we're"), (V{v.id("we"), v.id("'re")}));
}

TEST(TokenizerBpe, MultibyteCharacters) {
  const bpe_vocab v = make_vocab();
  auto t = load(v, "qwen2");
  EXPECT_EQ(ids(*t, "\xF0\x9F\x98\x80"), (V{0xF0, 0x9F, 0x98, 0x80}));
  EXPECT_EQ(ids(*t, "\xE6\x97\xA5"), (V{0xE6, 0x97, 0xA5}));
  // Malformed UTF-8 becomes U+FFFD before splitting, as in llama.cpp.
  EXPECT_EQ(ids(*t, "\xFF"), (V{0xEF, 0xBF, 0xBD}));
}

TEST(TokenizerBpe, SpecialTokens) {
  const bpe_vocab v = make_vocab();
  auto t = load(v, "llama-bpe");
  const int32_t start = v.id("<|im_start|>"), end = v.id("<|im_end|>");
  EXPECT_EQ(ids(*t, "x<|im_start|>y<|im_end|>", false, true), (V{'x', start, 'y', end}));
  const V plain = ids(*t, "x<|im_start|>y", false, false);
  EXPECT_EQ(plain, (V{'x', '<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't', '|', '>', 'y'}));
  EXPECT_EQ(t->detokenize(plain.data(), plain.size(), false), "x<|im_start|>y");
}

TEST(TokenizerBpe, RoundTrip) {
  const bpe_vocab v = make_vocab();
  for (const char *pre : {"llama-bpe", "qwen2", "gpt-2", "default"}) {
    auto t = load(v, pre);
    for (const std::string s : {"hello world", "  two leading", "trailing  ", "a\n\n\tb\r\n", "it's we're 12345",
                                "\xC3\xA9t\xC3\xA9", "\xF0\x9F\x98\x80 emoji!", "\xE6\x97\xA5\xE6\x9C\xAC 42", ""}) {
      const V x = ids(*t, s, true);
      EXPECT_EQ(t->detokenize(x.data(), x.size(), true), s) << pre << ": " << s;
    }
  }
}

bp_status load_status(void (*fill)(gguf_builder &)) {
  gguf_builder b;
  b.str("tokenizer.ggml.model", "gpt2");
  fill(b);
  std::unique_ptr<tokenizer> t;
  const bp_status st = b.load(&t);
  EXPECT_EQ(st != BP_OK, t == nullptr);
  return st;
}

TEST(TokenizerBpe, Errors) {
  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.pre", "qwen2");
              b.strs("tokenizer.ggml.tokens", {"a", "b"});
            }),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(gguf_builder::last_error.find("tokenizer.ggml.merges"), std::string::npos) << gguf_builder::last_error;

  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.pre", "qwen2");
              b.strs("tokenizer.ggml.tokens", {"a", "b", "ab"});
              b.strs("tokenizer.ggml.merges", {"a b", "a c"});
            }),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(gguf_builder::last_error.find("tokenizer.ggml.merges[1]"), std::string::npos) << gguf_builder::last_error;

  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.pre", "tekken");
              b.strs("tokenizer.ggml.tokens", {"a"});
              b.strs("tokenizer.ggml.merges", {});
            }),
            BP_ERR_UNIMPLEMENTED);
  EXPECT_NE(gguf_builder::last_error.find("'tekken'"), std::string::npos) << gguf_builder::last_error;
  EXPECT_NE(gguf_builder::last_error.find("llama-bpe"), std::string::npos) << gguf_builder::last_error;

  EXPECT_EQ(load_status([](gguf_builder &b) {
              b.str("tokenizer.ggml.pre", "qwen2");
              b.strs("tokenizer.ggml.tokens", {"a"});
              b.strs("tokenizer.ggml.merges", {});
              b.u32("tokenizer.ggml.bos_token_id", 1);
            }),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(gguf_builder::last_error.find("tokenizer.ggml.bos_token_id"), std::string::npos)
      << gguf_builder::last_error;
}

}  // namespace
