// fusion.hpp: two graph nodes in one pool task (backend.cpp runs them).
//
// A row or element-wise node (the first) and an element-wise node that reads
// its result at the same elements (the second) run as one task: each thread
// computes its rows of the first node, then the same rows of the second,
// with no barrier between them. The ranges agree by construction: both
// kernels split the same number of rows with split_range, and are handed the
// same (ith, nth). The first node's result is still written, so whatever else
// reads it (later nodes, the caller) sees it.
#ifndef BP_PLUGIN_CPU_FUSION_HPP_
#define BP_PLUGIN_CPU_FUSION_HPP_

#include "backplane/plugin.h"

namespace bp::cpu {

// True when |second| may run fused right after |first|, each thread doing
// the same rows of both (see fusion.cpp for the rules).
bool can_fuse(const bp_tensor *first, const bp_tensor *second);

// Rows of kFlatRow elements for a pair whose tensors are all dense, of one
// shape, with rows a multiple of kFlatRow long, and element-wise (no NORM,
// no broadcast): one long row, as a decode step's SILU·MUL [8192, 1], then
// splits over threads too.
constexpr int64_t kFlatRow = 1024;

// A pair reshaped as rows of kFlatRow elements: shallow copies of the
// tensors with new extents and strides (same data). Holds copies, so it must
// outlive the run that uses first/second.
struct flat_pair {
  bp_tensor first, second, first_src[2], second_other;
};
// True (and |out| filled) when the pair may be reshaped; false leaves the
// pair as it is.
bool flatten_pair(const bp_tensor *first, const bp_tensor *second, flat_pair *out);

// Chunks per thread part for a pair over |rows| rows of |first| on |nth|
// threads: each thread computes the first node for a chunk of its rows, then
// the second node for the same chunk, so the intermediate is still in the
// cache when the second reads it. Part c of thread ith is virtual part
// ith * chunks + c of nth * chunks, so split_range still gives both kernels
// the same rows, and each thread's chunks are its own contiguous rows.
int fused_chunks(const bp_tensor *first, int64_t rows, int nth);

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_FUSION_HPP_
