// synth_scratch.cpp: where bp-gguf synth keeps tensor bytes until the writer
// has written them (bp_gguf_writer_add_tensor_data borrows them until then).
// Each block is a MAP_SHARED mapping of an unlinked file beside the output,
// so the pages are file-backed: the kernel can write them out and drop them
// under memory pressure, and a 1B-shaped f32 file does not need its 4+ GiB in
// anonymous memory. Where no such file can be made, blocks come from the heap.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "synth.hpp"

namespace bp::gguf_tool {

synth_scratch::synth_scratch(const std::string &out_path) {
  std::string dir = std::filesystem::path(out_path).parent_path().string();
  if (dir.empty()) dir = ".";
#ifdef O_TMPFILE
  fd_ = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd_ < 0) {
    std::string tmpl = dir + "/.bp-gguf-synth-XXXXXX";
    fd_ = mkstemp(tmpl.data());
    if (fd_ >= 0) unlink(tmpl.c_str());
  }
}

synth_scratch::~synth_scratch() {
  for (const auto &[p, n] : maps_) munmap(p, n);
  if (fd_ >= 0) close(fd_);
}

uint8_t *synth_scratch::alloc(size_t n) {
  if (n == 0) n = 1;
  if (fd_ >= 0) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t len = (n + page - 1) / page * page;
    if (ftruncate(fd_, static_cast<off_t>(end_ + len)) == 0) {
      void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(end_));
      if (p != MAP_FAILED) {
        end_ += len;
        maps_.emplace_back(p, len);
        return static_cast<uint8_t *>(p);
      }
    }
  }
  heap_.emplace_back(n);
  return heap_.back().data();
}

}  // namespace bp::gguf_tool
