// spm.cpp: SentencePiece-style tokenizing as llama.cpp does it: spaces become
// U+2581, adjacent symbols merge best score first when the merged text is a
// token, and what is left unknown falls back to byte tokens.
#include <algorithm>
#include <queue>

#include "spm.hpp"
#include "utf8.hpp"

namespace bp::model::tok {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";

struct symbol {
  int prev, next;
  size_t off, n;
};

struct bigram {
  int left, right;
  float score;
  size_t size;
};

// Best score first; on a tie the leftmost pair.
struct bigram_order {
  bool operator()(const bigram &a, const bigram &b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class session {
 public:
  session(const vocab &v, std::string text) : v_(v), text_(std::move(text)) {}

  void run(std::vector<int32_t> *out) {
    for (size_t off = 0; off < text_.size();) {
      const size_t n = std::min(utf8::seq_len(static_cast<unsigned char>(text_[off])), text_.size() - off);
      const int i = static_cast<int>(syms_.size());
      syms_.push_back({i - 1, off + n == text_.size() ? -1 : i + 1, off, n});
      off += n;
    }
    for (int i = 1; i < static_cast<int>(syms_.size()); ++i) try_pair(i - 1, i);
    while (!queue_.empty()) {
      const bigram b = queue_.top();
      queue_.pop();
      symbol &l = syms_[b.left];
      symbol &r = syms_[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) syms_[r.next].prev = b.left;
      try_pair(l.prev, b.left);
      try_pair(b.left, l.next);
    }
    for (int i = syms_.empty() ? -1 : 0; i != -1; i = syms_[i].next) emit(i, out);
  }

 private:
  std::string_view text(const symbol &s) const { return std::string_view(text_).substr(s.off, s.n); }

  void try_pair(int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view t = std::string_view(text_).substr(syms_[left].off, syms_[left].n + syms_[right].n);
    const int32_t id = v_.find(t);
    if (id < 0) return;
    queue_.push({left, right, v_.scores[id], t.size()});
  }

  // Merges only ever produce tokens, so a symbol that is not one is a single
  // character missing from the vocabulary: it goes out as byte tokens.
  // (llama.cpp's undo-the-merges path for this case cannot trigger.)
  void emit(int i, std::vector<int32_t> *out) {
    const std::string_view t = text(syms_[i]);
    if (int32_t id = v_.find(t); id >= 0) {
      out->push_back(id);
      return;
    }
    for (char c : t) out->push_back(byte_token(static_cast<unsigned char>(c)));
  }

  int32_t byte_token(unsigned char c) const {
    static const char kHex[] = "0123456789ABCDEF";
    const char name[] = {'<', '0', 'x', kHex[c >> 4], kHex[c & 15], '>'};
    if (int32_t id = v_.find(std::string_view(name, sizeof name)); id >= 0) return id;
    if (int32_t id = v_.find(std::string_view(reinterpret_cast<const char *>(&c), 1)); id >= 0) return id;
    return v_.unk;  // llama.cpp throws here; a vocabulary without the byte is rare
  }

  const vocab &v_;
  std::string text_;
  std::vector<symbol> syms_;
  std::priority_queue<bigram, std::vector<bigram>, bigram_order> queue_;
};

}  // namespace

spm_tokenizer::spm_tokenizer(vocab v) : vocab_tokenizer(std::move(v)) {
  fill_texts([](const std::string &piece) {
    std::string s;
    for (size_t i = 0; i < piece.size();) {
      if (std::string_view(piece).substr(i, kSpace.size()) == kSpace) {
        s += ' ';
        i += kSpace.size();
      } else {
        s += piece[i++];
      }
    }
    return s;
  });
}

void spm_tokenizer::encode(std::string_view text, bool after_special, std::vector<int32_t> *out) const {
  std::string s;
  if (v_.add_space_prefix && after_special) s += kSpace;
  for (char c : text) {
    if (c == ' ')
      s += kSpace;
    else
      s += c;
  }
  session(v_, std::move(s)).run(out);
}

}  // namespace bp::model::tok
