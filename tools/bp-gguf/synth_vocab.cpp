// synth_vocab.cpp: bp-gguf synth's vocabularies, learned from the sample
// text by a small byte-pair-encoding trainer (each step merges the most
// frequent adjacent pair; ties go to the smaller pair by bytes, so the result
// is the same everywhere).
//
// spm (tokenizer.ggml.model "llama", as LLaMA 1/2): <unk> <s> </s>, the 256
// byte tokens <0x00>..<0xFF>, then the learned pieces (spaces as U+2581,
// words carry their leading one), each scored -rank so earlier merges win,
// then the single characters (scored lowest, as in LLaMA's own vocabulary).
//
// bpe (tokenizer.ggml.model "gpt2"): the 256 single-byte characters of
// GPT-2's byte-to-unicode alphabet in GPT-2's order, then one token per
// merge (tokenizer.ggml.merges "a b"), learned after GPT-2-style pre-splitting
// (words with their leading space, digit and punctuation runs apart), then
// the special tokens of the architecture.
//
// When the text runs out of pairs seen twice, further pieces join two known
// pieces (a word start and a continuation) into a new one, so any --n-vocab
// is filled with distinct, reachable tokens.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "synth.hpp"

namespace bp::gguf_tool {

namespace {

const char *const kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// The code points of |text| (valid UTF-8: the sample is).
std::vector<uint32_t> code_points(const std::string &text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < n && i + k < text.size(); ++k) cp = (cp << 6) | (text[i + k] & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// GPT-2's byte-to-unicode table: byte_char[b] is the character standing for
// byte b; gpt2_order lists the bytes in GPT-2's vocabulary order.
struct byte_alphabet {
  std::string byte_char[256];
  std::vector<int> gpt2_order;
  byte_alphabet() {
    bool printable[256] = {};
    for (int b = 33; b <= 126; ++b) printable[b] = true;
    for (int b = 161; b <= 172; ++b) printable[b] = true;
    for (int b = 174; b <= 255; ++b) printable[b] = true;
    for (int b = 0; b < 256; ++b)
      if (printable[b]) gpt2_order.push_back(b), byte_char[b] = utf8(b);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b)
      if (!printable[b]) gpt2_order.push_back(b), byte_char[b] = utf8(next++);
  }
};

// Words with their counts, as symbol ids; merges pairs one step at a time.
class bpe_trainer {
 public:
  int intern(const std::string &s) {
    auto [it, added] = ids_.emplace(s, static_cast<int>(text_.size()));
    if (added) text_.push_back(s);
    return it->second;
  }
  void add_word(const std::vector<std::string> &symbols) {
    std::vector<int> w;
    for (const auto &s : symbols) w.push_back(intern(s));
    ++counts_[w];
  }
  // Merges the most frequent pair seen at least twice into |left|, |right|;
  // false when there is none.
  bool step(std::string &left, std::string &right) {
    if (words_.empty())
      for (auto &[w, n] : counts_) words_.emplace_back(w, n);
    std::unordered_map<uint64_t, int64_t> pairs;
    for (const auto &[w, n] : words_)
      for (size_t i = 0; i + 1 < w.size(); ++i) pairs[key(w[i], w[i + 1])] += n;
    uint64_t best = 0;
    int64_t best_n = 1;
    for (const auto &[k, n] : pairs) {
      if (n < best_n) continue;
      if (n > best_n || less(k, best)) best = k, best_n = n;
    }
    if (best_n < 2) return false;
    const int a = static_cast<int>(best >> 32), b = static_cast<int>(best & 0xffffffffu);
    left = text_[a], right = text_[b];
    const int ab = intern(left + right);
    for (auto &[w, n] : words_) {
      std::vector<int> out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          out.push_back(ab);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      w.swap(out);
    }
    return true;
  }
  // Every symbol of the input words with its count, most frequent first.
  std::vector<std::string> symbols_by_count() const {
    std::map<std::string, int64_t> n;
    for (const auto &[w, c] : counts_)
      for (int s : w) n[text_[s]] += c;
    std::vector<std::pair<int64_t, std::string>> v;
    for (const auto &[s, c] : n) v.emplace_back(-c, s);
    std::sort(v.begin(), v.end());
    std::vector<std::string> out;
    for (auto &p : v) out.push_back(p.second);
    return out;
  }

 private:
  static uint64_t key(int a, int b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }
  bool less(uint64_t x, uint64_t y) const {
    const auto &xa = text_[x >> 32], &xb = text_[x & 0xffffffffu];
    const auto &ya = text_[y >> 32], &yb = text_[y & 0xffffffffu];
    return xa != ya ? xa < ya : xb < yb;
  }
  std::unordered_map<std::string, int> ids_;
  std::vector<std::string> text_;
  std::map<std::vector<int>, int64_t> counts_;  // ordered: the same result everywhere
  std::vector<std::pair<std::vector<int>, int64_t>> words_;
};

// Yields new pieces left + right (left a word start, right a continuation,
// both known), in diagonal order over the two lists.
class filler {
 public:
  filler(std::vector<std::string> starts, std::vector<std::string> rests)
      : starts_(std::move(starts)), rests_(std::move(rests)) {}
  // The next pair whose join is not in |known|; false when all are used.
  bool next(const std::set<std::string> &known, std::string &left, std::string &right) {
    const size_t ns = starts_.size(), nr = rests_.size();
    for (; d_ < ns + nr; ++d_, i_ = 0) {
      for (; i_ <= d_; ++i_) {
        const size_t i = i_, j = d_ - i_;
        if (i >= ns || j >= nr) continue;
        if (known.count(starts_[i] + rests_[j])) continue;
        left = starts_[i], right = rests_[j];
        ++i_;
        return true;
      }
    }
    return false;
  }

 private:
  std::vector<std::string> starts_, rests_;
  size_t d_ = 0, i_ = 0;
};

bool starts_with(const std::string &s, const std::string &p) { return s.compare(0, p.size(), p) == 0; }

synth_vocab make_spm(int64_t n_vocab, std::string &error) {
  synth_vocab v;
  v.model = "llama";
  const int64_t n_fixed = 3 + 256;
  if (n_vocab < n_fixed + 1) {
    error = "--n-vocab " + std::to_string(n_vocab) + " is too small: an spm vocabulary needs at least " +
            std::to_string(n_fixed + 1) + " tokens (3 special, 256 bytes, 1 piece)";
    return v;
  }
  // Words: each run of non-space characters, with U+2581 in front.
  bpe_trainer trainer;
  std::vector<std::string> word;
  for (uint32_t cp : code_points(synth_sample_text())) {
    if (cp == ' ' || cp == '\n' || cp == '\t') {
      if (!word.empty()) trainer.add_word(word), word.clear();
      continue;
    }
    if (word.empty()) word.push_back(kSpace);
    word.push_back(utf8(cp));
  }
  if (!word.empty()) trainer.add_word(word);

  auto add = [&](const std::string &text, int32_t type) {
    v.tokens.push_back(text);
    v.types.push_back(type);
  };
  add("<unk>", 2), add("<s>", 3), add("</s>", 3);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    add(hex, 6);
  }
  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  const int64_t n_pieces = n_vocab - n_fixed;
  // A third of the room at most for single characters, the most frequent.
  std::vector<std::string> chars = trainer.symbols_by_count();
  const size_t n_chars = std::min(chars.size(), static_cast<size_t>(std::max<int64_t>(n_pieces / 3, 0)));
  std::vector<std::string> pieces, starts, rests;
  std::string left, right;
  while (static_cast<int64_t>(pieces.size() + n_chars) < n_pieces && trainer.step(left, right)) {
    if (!known.insert(left + right).second) continue;
    pieces.push_back(left + right);
    (starts_with(pieces.back(), kSpace) ? starts : rests).push_back(pieces.back());
  }
  std::vector<std::string> tail(chars.begin(), chars.begin() + n_chars);
  for (size_t i = n_chars; i < chars.size() && static_cast<int64_t>(pieces.size() + tail.size()) < n_pieces; ++i)
    tail.push_back(chars[i]);
  for (const auto &c : chars) (starts_with(c, kSpace) ? starts : rests).push_back(c);
  for (const auto &c : tail) known.insert(c);
  filler fill(starts, rests);
  while (static_cast<int64_t>(pieces.size() + tail.size()) < n_pieces && fill.next(known, left, right)) {
    known.insert(left + right);
    pieces.push_back(left + right);
  }
  pieces.insert(pieces.end(), tail.begin(), tail.end());
  if (static_cast<int64_t>(pieces.size()) < n_pieces) {
    error = "--n-vocab " + std::to_string(n_vocab) + " is more pieces than this tool can make";
    return v;
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) {
    add(pieces[i], 1);
    v.scores.push_back(-static_cast<float>(i));
  }
  v.bos = 1, v.eos = 2, v.unk = 0;
  v.add_bos = true;
  return v;
}

// GPT-2-style pre-split: a word is an optional space and a run of letters,
// of digits or of other symbols; "'s" and the like alone; whitespace runs
// apart, their last space going to the word after them.
std::vector<std::string> pre_split(const std::string &text) {
  const std::vector<uint32_t> cps = code_points(text);
  auto cls = [](uint32_t c) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return 0;  // space
    if ((c >= '0' && c <= '9')) return 1;                           // digit
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return 2;           // letter
    if (c >= 0x80 && !(c >= 0x3000 && c <= 0x303f) && !(c >= 0xff00 && c <= 0xff65)) return 2;
    return 3;  // punctuation and symbols
  };
  std::vector<std::string> out;
  const size_t n = cps.size();
  for (size_t i = 0; i < n;) {
    std::string w;
    size_t j = i;
    if (cps[i] == '\'' && i + 1 < n) {
      for (const char *c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        size_t k = 0;
        while (c[k] && i + 1 + k < n && cps[i + 1 + k] == static_cast<uint32_t>(c[k])) ++k;
        if (!c[k]) {
          j = i + 1 + k;
          break;
        }
      }
    }
    if (j == i) {
      size_t s = i;
      if (cps[i] == ' ' && i + 1 < n && cls(cps[i + 1]) != 0) s = i + 1;
      const int c = cls(cps[s]);
      j = s + 1;
      while (j < n && cls(cps[j]) == c) ++j;
      // A whitespace run followed by a word leaves its last space to it.
      if (c == 0 && j < n && j - s > 1 && cps[j - 1] == ' ') --j;
    }
    for (size_t k = i; k < j; ++k) w += utf8(cps[k]);
    out.push_back(w);
    i = j;
  }
  return out;
}

synth_vocab make_bpe(const std::string &arch, int64_t n_vocab, std::string &error) {
  synth_vocab v;
  v.model = "gpt2";
  const bool llama = arch == "llama";
  v.pre = llama ? "llama-bpe" : "qwen2";
  const std::vector<std::string> specials =
      llama ? std::vector<std::string>{"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"}
            : std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const int64_t n_fixed = 256 + static_cast<int64_t>(specials.size());
  if (n_vocab < n_fixed + 1) {
    error = "--n-vocab " + std::to_string(n_vocab) + " is too small: a bpe vocabulary needs at least " +
            std::to_string(n_fixed + 1) + " tokens (256 bytes, 1 merge, " + std::to_string(specials.size()) +
            " special)";
    return v;
  }
  static const byte_alphabet alphabet;
  bpe_trainer trainer;
  for (const std::string &w : pre_split(synth_sample_text())) {
    std::vector<std::string> symbols;
    for (unsigned char b : w) symbols.push_back(alphabet.byte_char[b]);
    trainer.add_word(symbols);
  }
  for (int b : alphabet.gpt2_order) v.tokens.push_back(alphabet.byte_char[b]);
  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  const std::string space = alphabet.byte_char[' '];
  std::vector<std::string> starts, rests;
  for (const auto &t : v.tokens) (t == space ? starts : rests).push_back(t);
  const int64_t n_merged = n_vocab - n_fixed;
  std::string left, right;
  auto merge = [&] {
    v.merges.push_back(left + " " + right);
    if (!known.insert(left + right).second) return;
    v.tokens.push_back(left + right);
    (starts_with(v.tokens.back(), space) ? starts : rests).push_back(v.tokens.back());
  };
  while (static_cast<int64_t>(v.tokens.size()) < 256 + n_merged && trainer.step(left, right)) merge();
  filler fill(starts, rests);
  while (static_cast<int64_t>(v.tokens.size()) < 256 + n_merged && fill.next(known, left, right)) merge();
  if (static_cast<int64_t>(v.tokens.size()) < 256 + n_merged) {
    error = "--n-vocab " + std::to_string(n_vocab) + " is more tokens than this tool can make";
    return v;
  }
  v.types.assign(v.tokens.size(), 1);
  const int32_t first_special = static_cast<int32_t>(v.tokens.size());
  for (const auto &s : specials) v.tokens.push_back(s), v.types.push_back(3);
  if (llama) {
    v.bos = first_special, v.eos = first_special + 1;
    v.add_bos = true;
  } else {
    v.bos = first_special, v.eos = first_special + 2;  // <|endoftext|>, <|im_end|>
    v.add_bos = false;
  }
  return v;
}

}  // namespace

synth_vocab synth_make_vocab(const std::string &kind, const std::string &arch, int64_t n_vocab, std::string &error) {
  error.clear();
  synth_vocab v = kind == "spm" ? make_spm(n_vocab, error) : make_bpe(arch, n_vocab, error);
  if (!error.empty()) v.tokens.clear();
  return v;
}

}  // namespace bp::gguf_tool
