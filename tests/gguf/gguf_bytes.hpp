// gguf_bytes.hpp: GGUF files byte by byte, for the tests.
//
// Written from the format description alone, not with the library's writer,
// so a test can state the exact bytes a file must hold and craft every
// malformed case the reader must refuse.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gguf_test {

struct bytes {
  std::vector<uint8_t> b;
  // resize + memcpy rather than insert: GCC 12 misreads insert on an empty
  // vector here as an overflow (-Wstringop-overflow).
  bytes &raw(const void *p, size_t n) {
    const size_t at = b.size();
    b.resize(at + n);
    if (n) std::memcpy(b.data() + at, p, n);
    return *this;
  }
  template <typename T>
  bytes &put(T v) {
    return raw(&v, sizeof(T));
  }
  bytes &str(const std::string &s) {
    put<uint64_t>(s.size());
    return raw(s.data(), s.size());
  }
  bytes &zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
  bytes &pad_to(size_t align) { return zeros((align - b.size() % align) % align); }
  size_t size() const { return b.size(); }
};

// Header: magic, version, n_tensors, n_kv.
inline bytes header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  bytes h;
  h.raw("GGUF", 4).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  return h;
}

// A u32 pair.
inline void kv_u32(bytes &f, const std::string &key, uint32_t v) { f.str(key).put<uint32_t>(4).put<uint32_t>(v); }

// A tensor info: name, n_dims, dims, type, offset.
inline void tensor_info(bytes &f, const std::string &name, const std::vector<uint64_t> &ne, uint32_t type,
                        uint64_t offset) {
  f.str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
  for (uint64_t d : ne) f.put<uint64_t>(d);
  f.put<uint32_t>(type).put<uint64_t>(offset);
}

inline bool write_file(const std::string &path, const std::vector<uint8_t> &b) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace gguf_test
