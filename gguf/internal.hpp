// internal.hpp: the structs behind gguf.h's handles (not installed).
//
// gguf/ sits above core/: it builds on the public C API, core's error
// recording (set_error, api_guard: core/errors.hpp) and core's handle scheme
// (the TAG_GGUF_* tags, live_mark, free_check, retire_handle, bad_handle:
// core/liveness.hpp),
// so a closed handle is recognised like any other (docs/ownership.md); core/
// never calls into it (the build gives core/ no path to these headers).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backplane/gguf.h"
#include "core/errors.hpp"
#include "core/liveness.hpp"
#include "gguf/parse.hpp"

namespace bp::gguf {

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

// True when |h| carries |tag|; otherwise records INVALID_ARGUMENT naming |fn|
// and the parameter |what| (NULL, closed, or another type) and returns false.
template <typename T>
bool handle_check(const T *h, core::handle_tag tag, const char *fn, const char *what) {
  if (core::handle_ok(h, tag)) return true;
  core::bad_handle(fn, what, h, tag);
  return false;
}

}  // namespace bp::gguf

struct bp_gguf {
  uint32_t tag = bp::core::TAG_GGUF_FILE;
  std::shared_ptr<bp::gguf::mapping> map;
  bp::gguf::file_info info;
  std::unordered_map<std::string, size_t> key_index, tensor_index;
  bp::core::live_mark live;  // last: see live_mark
};

struct bp_gguf_weights {
  uint32_t tag = bp::core::TAG_GGUF_WEIGHTS;
  std::shared_ptr<bp::gguf::mapping> map;  // held while tensors live in its pages
  std::vector<bp_buffer *> buffers;
  size_t n_tensors = 0;
  uint64_t bytes = 0;
  bool mapped = false;
  bp::core::live_mark live;  // last: see live_mark
};
