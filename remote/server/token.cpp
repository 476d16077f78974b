// token.cpp: the token file and the constant-time comparison (token.hpp).
#include "token.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace bp::remote::server {

bool constant_time_equal(const std::string &a, const std::string &b) {
  // Every byte of the longer string is visited and folded into |diff|; the
  // length difference is folded in too. volatile keeps the compiler from
  // turning the loop into an early-exit memcmp.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

bool read_token_file(const std::string &path, std::string *token, std::string *error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read the token file '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream all;
  all << in.rdbuf();
  std::string t = all.str();
  const char *space = " \t\r\n\v\f";
  const size_t first = t.find_first_not_of(space);
  if (first == std::string::npos) {
    *error = "the token file '" + path + "' is empty: write a secret of at least 16 characters into it";
    return false;
  }
  t = t.substr(first, t.find_last_not_of(space) - first + 1);
  if (t.find_first_of("\r\n") != std::string::npos) {
    *error = "the token file '" + path + "' holds more than one line: the token is one line";
    return false;
  }
  for (unsigned char c : t) {
    // gRPC metadata values are printable ASCII.
    if (c < 0x20 || c > 0x7e) {
      *error = "the token file '" + path + "' holds a byte that is not printable ASCII: gRPC metadata cannot carry it";
      return false;
    }
  }
  *token = t;
  return true;
}

}  // namespace bp::remote::server
