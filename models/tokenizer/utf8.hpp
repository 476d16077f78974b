// utf8.hpp: UTF-8 decoding with llama.cpp's leniency, so byte boundaries and
// replacement characters fall where llama.cpp puts them (the ids depend on it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bp::model::utf8 {

// Length of the sequence a lead byte announces, judged from its top four bits
// only: a stray continuation byte counts as 1 and 0xF8..0xFF as 4, which is
// how llama.cpp cuts text into symbols before merging.
inline size_t seq_len(unsigned char lead) {
  static constexpr unsigned char kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

inline constexpr uint32_t kReplacement = 0xFFFD;

// Decodes one code point at |*pos| and advances it. A malformed sequence
// yields U+FFFD and consumes one byte. Overlong forms and surrogates are
// accepted as llama.cpp accepts them.
inline uint32_t decode(std::string_view s, size_t *pos) {
  const size_t i = *pos;
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) {
    *pos += 1;
    return c;
  }
  if ((c & 0xE0) == 0xC0 && (c & 0x40) && cont(1)) {
    *pos += 2;
    return ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu);
  }
  if ((c & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    *pos += 3;
    return ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
  }
  if ((c & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    *pos += 4;
    return ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
  }
  *pos += 1;
  return kReplacement;
}

inline std::vector<uint32_t> decode_all(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out.push_back(decode(s, &pos));
  return out;
}

// Encodes |cp|; values past U+10FFFF (which the decoder can produce from
// 0xF5..0xF7 leads) become U+FFFD.
inline void append(std::string *out, uint32_t cp) {
  if (cp > 0x10FFFF) cp = kReplacement;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace bp::model::utf8
