// special.cpp: one special token at a time, longest first, cuts every plain
// span at each of its non-overlapping occurrences. This is not leftmost-
// longest matching over all tokens at once, and the order matters: a longer
// token claims its text everywhere before a shorter one is looked for.
#include "special.hpp"

#include <cctype>

namespace bp::model::tok {

std::vector<fragment> partition(const vocab &v, std::string_view text, bool parse_special) {
  std::vector<fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<fragment> next;
  for (int32_t id : v.specials) {
    const uint32_t attr = v.attrs[id];
    if (!parse_special && (attr & (kControl | kUnknown))) continue;
    const std::string_view needle = v.pieces[id];
    next.clear();
    for (const fragment &f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin;
      while (begin < f.end) {
        const size_t at = text.substr(0, f.end).find(needle, begin);
        if (at == std::string_view::npos) break;
        if (at > begin) next.push_back({-1, begin, at});
        next.push_back({id, at, at + needle.size()});
        begin = at + needle.size();
        if (attr & kRstrip)
          while (begin < f.end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
      }
      if (begin < f.end) next.push_back({-1, begin, f.end});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace bp::model::tok
