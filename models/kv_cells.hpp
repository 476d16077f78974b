// kv_cells.hpp: what each cell (row) of a context's KV cache holds: a
// position and the set of sequences that see it; and the attention mask
// that follows from it.
//
// A cell is free when no sequence holds it. Copying a sequence's prefix to
// another only tags its cells with the second sequence too (the keys and
// values of a position do not depend on which sequence reads them), so a
// shared prompt is evaluated and stored once. A cell's tensor data is only
// ever written while the cell is free, so sharing never needs a copy.
#pragma once

#include <bitset>
#include <cstdint>
#include <vector>

namespace bp::model {

// Sequences a context may hold: the bit set of each cell has this many bits.
constexpr uint32_t k_max_seq = 256;

class kv_cells {
 public:
  void reset(uint32_t n_cells, uint32_t n_seq);

  uint32_t size() const { return static_cast<uint32_t>(cells_.size()); }
  uint32_t n_seq() const { return static_cast<uint32_t>(seq_max_.size()); }
  uint32_t used() const { return used_; }  // cells some sequence holds
  uint32_t end() const { return end_; }    // one past the highest cell in use; 0 when none
  // The position a sequence's next token takes: one past its highest, 0 when empty.
  uint32_t next_position(uint32_t seq) const { return static_cast<uint32_t>(seq_max_[seq] + 1); }

  // Cells for a batch split into graphs of |sizes| tokens, in order, from
  // the free cells: the lowest first, or, when |contiguous|, the first run
  // of free cells as long as each graph (the transposed V cache is written
  // through one view per graph). False when they do not fit; nothing is
  // held either way (put() holds them).
  bool plan(const std::vector<uint32_t> &sizes, bool contiguous, std::vector<uint32_t> *cells) const;

  // Sequence |seq| takes the free cell |cell| at |pos|.
  void put(uint32_t cell, uint32_t seq, int32_t pos);
  // Frees cells put by a graph that then failed to run.
  void release(const uint32_t *cells, size_t n);

  // Sequence |seq| lets go of its positions in [p0, p1).
  void remove(uint32_t seq, uint32_t p0, uint32_t p1);
  // |dst| lets go of everything, then holds |src|'s cells at positions < end.
  void copy(uint32_t src, uint32_t dst, uint32_t end);

  // The mask of one graph, rows of n_kv floats for each of its T tokens:
  //   mask[t][j] = 0     when cell j holds seq[t] at a position <= pos[t]
  //              = -inf  otherwise (another sequence, a later position, free)
  // so a token attends to its own sequence up to itself and never sees
  // another's cells, even where the two share a cell's row of the cache.
  void fill_mask(const uint32_t *seq, const int32_t *pos, uint32_t T, uint32_t n_kv, float *mask) const;

 private:
  struct cell {
    int32_t pos = -1;
    std::bitset<k_max_seq> seqs;
  };
  void recount();  // used_, end_ and seq_max_ from the cells

  std::vector<cell> cells_;
  std::vector<int32_t> seq_max_;  // each sequence's highest position; -1 when empty
  uint32_t used_ = 0, end_ = 0;
};

}  // namespace bp::model
