// kv_cells.cpp: cell bookkeeping and the attention mask (kv_cells.hpp).
#include "kv_cells.hpp"

#include <algorithm>
#include <limits>

namespace bp::model {

void kv_cells::reset(uint32_t n_cells, uint32_t n_seq) {
  cells_.assign(n_cells, cell{});
  seq_max_.assign(n_seq, -1);
  used_ = end_ = 0;
}

bool kv_cells::plan(const std::vector<uint32_t> &sizes, bool contiguous, std::vector<uint32_t> *cells) const {
  cells->clear();
  // Free cells as this plan leaves them: a later graph must not take a cell
  // an earlier one of the same batch will write.
  std::vector<bool> taken(cells_.size());
  for (size_t i = 0; i < cells_.size(); ++i) taken[i] = cells_[i].seqs.any();
  size_t lowest = 0;  // no free cell below this one
  for (uint32_t n : sizes) {
    if (!contiguous) {
      for (uint32_t k = 0; k < n; ++k) {
        while (lowest < taken.size() && taken[lowest]) ++lowest;
        if (lowest == taken.size()) return false;
        taken[lowest] = true;
        cells->push_back(static_cast<uint32_t>(lowest));
      }
      continue;
    }
    size_t run = 0, start = 0;
    for (size_t i = 0; i < taken.size() && run < n; ++i) {
      if (taken[i]) {
        run = 0;
        continue;
      }
      if (run++ == 0) start = i;
    }
    if (run < n) return false;
    for (uint32_t k = 0; k < n; ++k) {
      taken[start + k] = true;
      cells->push_back(static_cast<uint32_t>(start + k));
    }
  }
  return true;
}

void kv_cells::put(uint32_t i, uint32_t seq, int32_t pos) {
  cell &c = cells_[i];
  if (c.seqs.none()) ++used_;
  c.pos = pos;
  c.seqs.set(seq);
  end_ = std::max(end_, i + 1);
  seq_max_[seq] = std::max(seq_max_[seq], pos);
}

void kv_cells::release(const uint32_t *cells, size_t n) {
  for (size_t k = 0; k < n; ++k) cells_[cells[k]] = cell{};
  recount();
}

void kv_cells::remove(uint32_t seq, uint32_t p0, uint32_t p1) {
  for (cell &c : cells_) {
    if (!c.seqs.test(seq)) continue;
    const uint32_t p = static_cast<uint32_t>(c.pos);
    if (p < p0 || p >= p1) continue;
    c.seqs.reset(seq);
    if (c.seqs.none()) c.pos = -1;
  }
  recount();
}

void kv_cells::copy(uint32_t src, uint32_t dst, uint32_t end) {
  for (cell &c : cells_) {
    c.seqs.reset(dst);
    if (c.seqs.test(src) && static_cast<uint32_t>(c.pos) < end) c.seqs.set(dst);
    if (c.seqs.none()) c.pos = -1;
  }
  recount();
}

void kv_cells::recount() {
  used_ = end_ = 0;
  std::fill(seq_max_.begin(), seq_max_.end(), -1);
  for (size_t i = 0; i < cells_.size(); ++i) {
    const cell &c = cells_[i];
    if (c.seqs.none()) continue;
    ++used_;
    end_ = static_cast<uint32_t>(i + 1);
    for (size_t s = 0; s < seq_max_.size(); ++s)
      if (c.seqs.test(s)) seq_max_[s] = std::max(seq_max_[s], c.pos);
  }
}

void kv_cells::fill_mask(const uint32_t *seq, const int32_t *pos, uint32_t T, uint32_t n_kv, float *mask) const {
  const float hidden = -std::numeric_limits<float>::infinity();
  const uint32_t n = std::min<uint32_t>(n_kv, size());
  for (uint32_t t = 0; t < T; ++t) {
    float *row = mask + static_cast<size_t>(t) * n_kv;
    for (uint32_t j = 0; j < n; ++j) row[j] = cells_[j].seqs.test(seq[t]) && cells_[j].pos <= pos[t] ? 0.0f : hidden;
    std::fill(row + n, row + n_kv, hidden);
  }
}

}  // namespace bp::model
