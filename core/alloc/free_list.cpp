// free_list.cpp: best-fit offsets with merging (see free_list.hpp).
#include "core/alloc/free_list.hpp"

#include <algorithm>
#include <cstdlib>

namespace bp::core {

free_list::free_list(size_t alignment) : alignment_(alignment == 0 ? 1 : alignment) {
  if ((alignment_ & (alignment_ - 1)) != 0) std::abort();  // our invariant: buffer types report powers of two
}

size_t free_list::alloc(size_t size) {
  size = aligned(size);
  in_use_ += size;
  // Best fit: the smallest free range that holds |size|; the first one wins
  // ties so that low offsets are reused first.
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i)
    if (free_[i].size >= size && (best == free_.size() || free_[i].size < free_[best].size)) best = i;
  if (best != free_.size()) {
    size_t offset = free_[best].offset;
    free_[best].offset += size;
    free_[best].size -= size;
    if (free_[best].size == 0) free_.erase(free_.begin() + (ptrdiff_t)best);
    return offset;
  }
  // Nothing fits: take fresh space at the end. (release() never leaves a
  // free range touching the end, so no bytes are stranded below it.)
  size_t offset = end_;
  end_ = offset + size;
  peak_ = std::max(peak_, end_);
  return offset;
}

void free_list::release(size_t offset, size_t size) {
  size = aligned(size);
  if (size == 0) return;
  in_use_ -= size;
  auto it = std::lower_bound(free_.begin(), free_.end(), offset,
                             [](const range &r, size_t off) { return r.offset < off; });
  it = free_.insert(it, range{offset, size});
  // Merge with the next range, then with the previous one.
  auto next = it + 1;
  if (next != free_.end() && it->offset + it->size == next->offset) {
    it->size += next->size;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = it - 1;
    if (prev->offset + prev->size == it->offset) {
      prev->size += it->size;
      it = free_.erase(it) - 1;
    }
  }
  // A free range at the end gives the end back: later allocations restart there.
  if (it + 1 == free_.end() && it->offset + it->size == end_) {
    end_ = it->offset;
    free_.erase(it);
  }
}

}  // namespace bp::core
