// secure_random.cpp: getrandom-backed ids (secure_random.hpp).
#include "secure_random.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>

namespace bp::remote::server {

bool secure_random_bytes(void *out, size_t n) {
  auto *p = static_cast<unsigned char *>(out);
  while (n > 0) {
    // Blocks only until the kernel's pool is first seeded (early boot).
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  if (n == 0) return true;
  // Kernels before 3.17 have no getrandom; the same generator is behind
  // /dev/urandom.
  FILE *f = std::fopen("/dev/urandom", "rb");
  if (f == nullptr) return false;
  const size_t read = std::fread(p, 1, n, f);
  std::fclose(f);
  return read == n;
}

uint64_t secure_random_u64() {
  for (int tries = 0; tries < 4; ++tries) {
    uint64_t v = 0;
    if (!secure_random_bytes(&v, sizeof v)) return 0;
    if (v != 0) return v;
  }
  return 0;
}

std::string secure_random_hex128() {
  unsigned char b[16];
  if (!secure_random_bytes(b, sizeof b)) return {};
  static const char digits[] = "0123456789abcdef";
  std::string hex(32, '0');
  for (size_t i = 0; i < sizeof b; ++i) {
    hex[2 * i] = digits[b[i] >> 4];
    hex[2 * i + 1] = digits[b[i] & 15];
  }
  return hex;
}

bool is_session_id(const std::string &text) {
  if (text.size() != 32) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace bp::remote::server
