// internal.hpp: the structs behind gguf.h's handles (not installed).
//
// gguf/ sits above core/: it builds on the public C API and core's error
// recording (set_error, api_guard); core/ never calls into it (the build
// gives core/ no path to these headers).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backplane/gguf.h"
#include "core/internal.hpp"
#include "gguf/parse.hpp"

namespace bp::gguf {

inline constexpr uint32_t kTagFile = 0x47475546u;     // "GGUF"
inline constexpr uint32_t kTagWeights = 0x47475754u;  // "GGWT"
inline constexpr uint32_t kTagWriter = 0x47475752u;   // "GGWR"
inline constexpr uint32_t kTagDead = 0xdeadbeefu;

// The file's bytes: a private read-write mapping (pages written by a caller
// through a host buffer are copied on write, the file never changes) or
// memory the caller lends. Shared by the file handle and every set of
// weights mapped from it, so closing the file keeps what they use.
struct mapping {
  const uint8_t *data = nullptr;
  size_t size = 0;
  void *map_addr = nullptr;  // mmap'ed region (nullptr: caller memory or an empty file)
  int fd = -1;               // for pread when copying; -1 for caller memory
  std::string path;
  mapping() = default;
  mapping(const mapping &) = delete;
  mapping &operator=(const mapping &) = delete;
  ~mapping();
};

// The Backplane type of a file type id; false when Backplane holds none.
bool backplane_type_of(uint32_t file_type, bp_type *out);

}  // namespace bp::gguf

struct bp_gguf {
  uint32_t tag = bp::gguf::kTagFile;
  std::shared_ptr<bp::gguf::mapping> map;
  bp::gguf::file_info info;
  std::unordered_map<std::string, size_t> key_index, tensor_index;
};

struct bp_gguf_weights {
  uint32_t tag = bp::gguf::kTagWeights;
  std::shared_ptr<bp::gguf::mapping> map;  // held while tensors live in its pages
  std::vector<bp_buffer *> buffers;
  size_t n_tensors = 0;
  uint64_t bytes = 0;
  bool mapped = false;
};
