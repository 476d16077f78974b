// log_text.cpp: escaping client strings for the log (log_text.hpp).
#include "log_text.hpp"

namespace bp::remote::server {

std::string log_text(std::string_view text, size_t max) {
  static const char digits[] = "0123456789abcdef";
  const size_t shown = text.size() < max ? text.size() : max;
  std::string out;
  out.reserve(shown + 16);
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  if (shown < text.size()) out += "...(+" + std::to_string(text.size() - shown) + " bytes)";
  return out;
}

}  // namespace bp::remote::server
