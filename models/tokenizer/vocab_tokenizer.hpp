// vocab_tokenizer.hpp: what SentencePiece and BPE tokenizers share: special
// token splitting, BOS, token text and detokenizing.
#pragma once

#include <cstdlib>

#include "special.hpp"
#include "tokenizer/tokenizer.hpp"
#include "vocab.hpp"

namespace bp::model::tok {

class vocab_tokenizer : public tokenizer {
 public:
  explicit vocab_tokenizer(vocab v) : v_(std::move(v)) {}

  bp_status tokenize(std::string_view text, bool add_bos, bool parse_special,
                     std::vector<int32_t> *out) const override {
    if (add_bos && v_.bos >= 0) out->push_back(v_.bos);
    bool after_special = true;  // the text's start counts as one for SPM's space prefix
    for (const fragment &f : partition(v_, text, parse_special)) {
      if (f.token >= 0) {
        out->push_back(f.token);
        after_special = true;
      } else {
        encode(text.substr(f.begin, f.end - f.begin), after_special, out);
        after_special = false;
      }
    }
    return BP_OK;
  }
  const std::string &token_text(int32_t id) const override { return valid(id) ? texts_[id] : empty(); }
  const std::string &token_piece(int32_t id) const override { return valid(id) ? v_.pieces[id] : empty(); }
  // Joins token texts. The prefix space is dropped from the first token with
  // any text, so a leading BOS does not keep it (llama.cpp's detokenize only
  // looks at the very first token).
  std::string detokenize(const int32_t *ids, size_t n, bool strip_leading_space) const override {
    std::string s;
    bool strip = strip_leading_space && v_.add_space_prefix;
    for (size_t i = 0; i < n; ++i) {
      const std::string &t = token_text(ids[i]);
      if (strip && !t.empty()) {
        s.append(t, t[0] == ' ' ? 1 : 0, std::string::npos);
        strip = false;
      } else {
        s += t;
      }
    }
    return s;
  }
  int32_t n_vocab() const override { return static_cast<int32_t>(v_.pieces.size()); }
  int32_t bos() const override { return v_.bos; }
  int32_t eos() const override { return v_.eos; }
  bool add_bos() const override { return v_.add_bos; }
  bool is_end(int32_t id) const override { return valid(id) && v_.eog[id]; }

 protected:
  // Tokenizes plain text; |after_special| is true at the start of the text
  // and right after a special token.
  virtual void encode(std::string_view text, bool after_special, std::vector<int32_t> *out) const = 0;

  // Output text of every token: control and unknown tokens are silent,
  // user-defined ones are their text, byte tokens their byte, normal ones
  // what |normal_text| makes of their piece (llama.cpp's token_to_piece).
  template <typename F>
  void fill_texts(F normal_text) {
    texts_.resize(v_.pieces.size());
    for (size_t id = 0; id < v_.pieces.size(); ++id) {
      const uint32_t a = v_.attrs[id];
      const std::string &p = v_.pieces[id];
      if (a & (kControl | kUnknown)) continue;
      if (a & kUserDefined) {
        texts_[id] = p;
      } else if (a & kNormal) {
        texts_[id] = normal_text(p);
      } else if (a & kByte) {
        // "<0xXX>"
        const std::string hex = p.size() > 3 ? p.substr(3, 2) : std::string();
        texts_[id] = std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
      }
    }
  }

  vocab v_;

 private:
  bool valid(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < v_.pieces.size(); }
  static const std::string &empty() {
    static const std::string e;
    return e;
  }
  std::vector<std::string> texts_;
};

}  // namespace bp::model::tok
