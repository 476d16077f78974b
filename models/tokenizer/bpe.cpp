// bpe.cpp: byte-level BPE as llama.cpp does it: each pre-token word is mapped
// to GPT-2's printable byte alphabet, then adjacent symbols merge lowest
// merge rank first.
#include "bpe.hpp"

#include <array>
#include <queue>
#include <unordered_map>

#include "utf8.hpp"

namespace bp::model::tok {
namespace {

// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the
// rest take code points from U+0100 up, in byte order.
struct byte_alphabet {
  std::array<std::string, 256> to_char;
  std::unordered_map<uint32_t, unsigned char> to_byte;
  byte_alphabet() {
    uint32_t extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = printable ? b : extra++;
      utf8::append(&to_char[b], cp);
      to_byte[cp] = static_cast<unsigned char>(b);
    }
  }
};

const byte_alphabet &alphabet() {
  static const byte_alphabet a;
  return a;
}

// A piece in the byte alphabet back to bytes; a character outside it is
// written the way llama.cpp writes it.
std::string decode_piece(const std::string &piece) {
  std::string out;
  size_t pos = 0;
  while (pos < piece.size()) {
    const uint32_t cp = utf8::decode(piece, &pos);
    auto it = alphabet().to_byte.find(cp);
    if (it != alphabet().to_byte.end()) {
      out += static_cast<char>(it->second);
      continue;
    }
    static const char kHex[] = "0123456789abcdef";
    out += "[UNK_BYTE_0x";
    std::string enc;
    utf8::append(&enc, cp);
    for (unsigned char c : enc) {
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    out += piece + "]";
  }
  return out;
}

struct symbol {
  int prev, next;
  size_t off, n;
};

struct bigram {
  int left, right;
  int32_t rank;
  std::string text;
};

// Lowest rank first; on a tie the leftmost pair.
struct bigram_order {
  bool operator()(const bigram &a, const bigram &b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

bpe_tokenizer::bpe_tokenizer(vocab v, std::unique_ptr<pretokenizer> pre)
    : vocab_tokenizer(std::move(v)), pre_(std::move(pre)) {
  fill_texts(decode_piece);
}

void bpe_tokenizer::encode(std::string_view text, bool, std::vector<int32_t> *out) const {
  for (const std::string &word : pre_->split(text)) {
    std::string enc;
    for (unsigned char c : word) enc += alphabet().to_char[c];
    encode_word(enc, out);
  }
}

void bpe_tokenizer::encode_word(const std::string &word, std::vector<int32_t> *out) const {
  if (v_.ignore_merges) {
    if (int32_t id = v_.find(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<symbol> syms;
  for (size_t off = 0; off < word.size();) {
    const size_t n = std::min(utf8::seq_len(static_cast<unsigned char>(word[off])), word.size() - off);
    const int i = static_cast<int>(syms.size());
    syms.push_back({i - 1, off + n == word.size() ? -1 : i + 1, off, n});
    off += n;
  }
  const std::string_view w(word);
  const auto text = [&](int i) { return w.substr(syms[i].off, syms[i].n); };
  std::priority_queue<bigram, std::vector<bigram>, bigram_order> queue;
  const auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t rank = v_.merge_rank(text(left), text(right));
    if (rank < 0) return;
    std::string t(text(left));
    t += text(right);
    queue.push({left, right, rank, std::move(t)});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const bigram b = queue.top();
    queue.pop();
    symbol &l = syms[b.left];
    symbol &r = syms[b.right];
    if (l.n == 0 || r.n == 0) continue;
    // Stale when either side changed since the pair was queued.
    if (l.n + r.n != b.text.size() || w.substr(l.off, l.n + r.n) != b.text || r.off != l.off + l.n) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }
  for (size_t i = 0; i < syms.size(); ++i) {
    if (syms[i].n == 0) continue;
    const std::string_view t = text(static_cast<int>(i));
    if (int32_t id = v_.find(t); id >= 0) {
      out->push_back(id);
      continue;
    }
    // llama.cpp looks each byte up on its own and drops those that are not
    // tokens: only ASCII alphabet characters can be.
    for (char c : t)
      if (int32_t id = v_.find(std::string_view(&c, 1)); id >= 0) out->push_back(id);
  }
}

}  // namespace bp::model::tok
