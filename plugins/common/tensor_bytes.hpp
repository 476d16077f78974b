// tensor_bytes.hpp: whether two tensors share bytes, from their data
// pointers and sizes. Valid for the host plugins' real addresses and for the
// device plugins' opaque ones alike: distinct buffers never share an
// address range (plugins::opaque_range). The fused kernels of the cpu and
// opencl plugins decide with it whether a pair may run as one.
#ifndef BP_PLUGINS_COMMON_TENSOR_BYTES_HPP_
#define BP_PLUGINS_COMMON_TENSOR_BYTES_HPP_

#include <cstdint>

#include "backplane/tensor.h"

namespace bp::plugins {

// True when the byte ranges [data, data + nbytes) of |x| and |y| intersect.
inline bool bytes_overlap(const bp_tensor *x, const bp_tensor *y) {
  const auto xb = reinterpret_cast<uintptr_t>(x->data), yb = reinterpret_cast<uintptr_t>(y->data);
  return xb < yb + bp_tensor_nbytes(y) && yb < xb + bp_tensor_nbytes(x);
}

// True when node |k|, listed after |first|, may run before it: |k| reads
// no byte |first| writes and writes no byte |first| reads or writes (every
// tensor involved has memory). Lets a fused pair skip an independent node
// between its two (SwiGLU's up projection between its SILU and MUL).
inline bool may_run_before(const bp_tensor *k, const bp_tensor *first) {
  if (!k->data || !first->data || bytes_overlap(k, first)) return false;
  for (int s = 0; s < BP_MAX_SRC; ++s) {
    const bp_tensor *src = k->src[s];
    if (src && (!src->data || bytes_overlap(src, first))) return false;
    const bp_tensor *fs = first->src[s];
    if (fs && (!fs->data || bytes_overlap(k, fs))) return false;
  }
  return true;
}

}  // namespace bp::plugins

#endif  // BP_PLUGINS_COMMON_TENSOR_BYTES_HPP_
