// stream.hpp: bp-generate's text stream. Tokens arrive as bytes; what may be
// printed now is every byte except (a) the start of a UTF-8 sequence whose
// remaining bytes have not arrived, and (b) a tail that could still become a
// stop string. A stop string ends the stream; neither it nor anything after
// it is printed. Header-only, so tests/tools can check it without a model.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace bp::generate {

// Bytes at the end of s[0, n) that start a UTF-8 sequence still missing
// bytes (0 when s[0, n) ends on a whole character). Invalid bytes are not
// held: they are printed as they come.
inline size_t utf8_incomplete_tail(std::string_view s, size_t n) {
  for (size_t i = 1; i <= std::min<size_t>(3, n); ++i) {
    unsigned char c = static_cast<unsigned char>(s[n - i]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > i && c < 0xF8 ? i : 0;
  }
  return 0;
}

class text_stream {
 public:
  explicit text_stream(std::vector<std::string> stops = {}) : stops_(std::move(stops)) {
    stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
  }

  // Adds |bytes|; returns the bytes that may be printed now. After a stop
  // string, stopped() is true and later calls return "".
  std::string push(std::string_view bytes) {
    if (stopped_) return {};
    pending_.append(bytes);
    size_t first = std::string::npos;
    for (const auto &s : stops_) first = std::min(first, pending_.find(s));
    if (first != std::string::npos) {
      std::string out = pending_.substr(0, first);
      pending_.clear();
      stopped_ = true;
      text_ += out;
      return out;
    }
    // The longest tail that is a proper prefix of a stop string.
    size_t hold = 0;
    for (const auto &s : stops_)
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    size_t cut = pending_.size() - hold;
    cut -= utf8_incomplete_tail(pending_, cut);
    std::string out = pending_.substr(0, cut);
    pending_.erase(0, cut);
    text_ += out;
    return out;
  }

  // At the end of the generation: whatever is held (an unfinished character
  // or the start of a stop string that never came) is printed after all.
  std::string finish() {
    std::string out;
    out.swap(pending_);
    text_ += out;
    return out;
  }

  bool stopped() const { return stopped_; }
  // Every byte returned so far.
  const std::string &text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_, text_;
  bool stopped_ = false;
};

}  // namespace bp::generate
