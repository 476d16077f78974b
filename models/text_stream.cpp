// text_stream.cpp: UTF-8 hold-back and stop strings (text_stream.hpp).
#include "text_stream.hpp"

#include <algorithm>

namespace bp::model {

size_t utf8_incomplete_tail(std::string_view s, size_t n) {
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

size_t text_stream::stop_prefix_tail() const {
  size_t hold = 0;
  for (const std::string &s : stops_)
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return hold;
}

std::string text_stream::push(std::string_view bytes) {
  if (stopped_) return {};
  pending_.append(bytes);
  // Only pending_ is searched: a stop string that began in bytes already
  // returned would have been held back as a prefix, so none can.
  size_t first = std::string::npos;
  for (const std::string &s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    std::string out = pending_.substr(0, first);
    pending_.clear();
    stopped_ = true;
    return out;
  }
  // The stop-string prefix is held, then an unfinished character before it:
  // the held bytes may be that character's own continuation bytes (a stop
  // string may start with any byte), and a character split over two pieces
  // would reach a caller that decodes each piece as two invalid ones.
  size_t cut = pending_.size() - stop_prefix_tail();
  cut -= utf8_incomplete_tail(pending_, cut);
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string text_stream::finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace bp::model
