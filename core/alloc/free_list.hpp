// free_list.hpp: a best-fit allocator of offsets inside one virtual buffer.
//
// What it is: the bookkeeping the graph allocator plans with. It hands out
// aligned byte ranges, takes them back (merging free neighbours) and records
// the highest offset ever used, which becomes the real buffer's size. What
// it is not: memory; no byte is touched here.
#pragma once

#include <cstddef>
#include <vector>

namespace bp::core {

class free_list {
 public:
  // |alignment| must be a power of two (buffer types guarantee it).
  explicit free_list(size_t alignment);

  // Offset of a new range of |size| bytes (rounded up to the alignment).
  // Best fit among the free ranges; grows the end when none fits.
  size_t alloc(size_t size);
  // Returns the range [offset, offset + size) taken by alloc(size).
  void release(size_t offset, size_t size);
  // Highest end offset ever handed out: the buffer size the plan needs.
  size_t peak() const { return peak_; }
  // Bytes currently handed out (for tests and logs).
  size_t in_use() const { return in_use_; }
  size_t aligned(size_t size) const { return (size + alignment_ - 1) & ~(alignment_ - 1); }

 private:
  struct range {
    size_t offset, size;
  };
  size_t alignment_;
  std::vector<range> free_;  // sorted by offset, never adjacent (merged)
  size_t end_ = 0;           // first byte past the highest range in use
  size_t peak_ = 0;
  size_t in_use_ = 0;
};

}  // namespace bp::core
