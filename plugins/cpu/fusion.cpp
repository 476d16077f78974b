// fusion.cpp: which node pairs the cpu backend runs as one task
// (fusion.hpp), and how it splits them.
#include "fusion.hpp"

#include <cstdlib>

#include "kernels.hpp"
#include "op_family.hpp"
#include "tensor_bytes.hpp"

namespace bp::cpu {
namespace {

using plugins::family_of;
using plugins::op_family;

// Element-wise: output element e reads element e of each source (a binary
// op's src1 may broadcast; fusion checks the shapes).
bool elementwise(bp_op op) {
  const op_family f = family_of(op);
  return f == op_family::binary || f == op_family::scalar || f == op_family::unary;
}

// A first node: its kernel computes output row r from row r of its sources
// (row r of a broadcast src1), rows split by split_range over its rows.
bool row_wise(bp_op op) { return elementwise(op) || op == BP_OP_NORM || op == BP_OP_RMS_NORM; }

bool overlap(const bp_tensor *x, const bp_tensor *y) { return plugins::bytes_overlap(x, y); }
// The same elements at the same addresses.
bool same_layout(const bp_tensor *x, const bp_tensor *y) {
  if (x->data != y->data || x->type != y->type) return false;
  for (int i = 0; i < BP_MAX_DIMS; ++i)
    if (x->ne[i] != y->ne[i] || x->nb[i] != y->nb[i]) return false;
  return true;
}
// Safe for one thread to do row r of both nodes before another thread does
// row s: either no byte in common, or the very same elements (in place).
bool apart_or_same(const bp_tensor *x, const bp_tensor *y) { return same_layout(x, y) || !overlap(x, y); }

// A copy of |t| read as rows of kFlatRow elements (|t| is dense).
void reshape_flat(const bp_tensor *t, int64_t elements, bp_tensor *out) {
  *out = *t;
  const size_t ts = bp_type_size(t->type);
  out->ne[0] = kFlatRow;
  out->ne[1] = elements / kFlatRow;
  out->ne[2] = out->ne[3] = 1;
  out->nb[0] = ts;
  out->nb[1] = ts * kFlatRow;
  out->nb[2] = out->nb[3] = ts * static_cast<size_t>(elements);
}

// Bytes of the first node's result a thread computes before the second node
// reads them: a chunk, its sources and the second's stay within L2 (1 MiB a
// core on the development VM). Measured there (bp-generate --pp 512, 1B
// llama q4_0, 2 threads, row ops' node time): 64 KiB chunks 215-220 ms, no
// chunks 244-277 ms, unfused 269-291 ms. BP_CPU_FUSE_CHUNK_BYTES overrides
// it (a whole number of bytes; 0 = no chunks), to measure.
int64_t chunk_bytes() {
  static const int64_t bytes = [] {
    int64_t v = int64_t{64} * 1024;
    if (const char *e = secure_getenv("BP_CPU_FUSE_CHUNK_BYTES"); e && *e) {
      char *end = nullptr;
      const long long n = std::strtoll(e, &end, 10);
      if (*end == '\0' && n >= 0) v = n;  // else ignored
    }
    return v;
  }();
  return bytes;
}

}  // namespace

bool can_fuse(const bp_tensor *first, const bp_tensor *second) {
  if (!row_wise(first->op) || !elementwise(second->op)) return false;
  if (!first->data || !second->data || !bp_tensor_same_shape(first, second)) return false;
  bool reads = false;
  const bp_tensor *other = nullptr;
  for (int s = 0; s < plugins::n_sources(second->op); ++s) {
    const bp_tensor *src = second->src[s];
    if (!src) return false;
    if (src == first) {
      reads = true;
    } else {
      other = src;
    }
  }
  if (!reads) return false;
  // The second's other operand: never bytes of the first's result that
  // another thread may still be writing (a view, a broadcast of it).
  if (other && (!other->data || !apart_or_same(other, first))) return false;
  // The second's result: never over the first's sources or result that
  // another thread may still read or write (in place is fine: each thread
  // reads its rows before it overwrites them).
  if (!apart_or_same(second, first)) return false;
  for (int s = 0; s < plugins::n_sources(first->op); ++s) {
    const bp_tensor *src = first->src[s];
    if (!src || !src->data || !apart_or_same(second, src)) return false;
  }
  return true;
}

bool flatten_pair(const bp_tensor *first, const bp_tensor *second, flat_pair *out) {
  if (!elementwise(first->op)) return false;  // NORM and RMS_NORM need whole rows
  // Rows that are whole multiples of the new ones: each element keeps its
  // place in a vector loop's blocks (no element moves into or out of a
  // row's scalar tail), so the results are the unfused ones, bit for bit.
  if (first->ne[0] % kFlatRow != 0 || first->ne[0] == kFlatRow) return false;
  const int64_t elements = bp_tensor_nelements(first);
  // 64-byte aligned too (as the allocator places tensors): a streamed row
  // (row_store) starts its 256-float chunks at a 64-byte boundary, which
  // then falls at the same elements whether rows are 1024 floats or more.
  auto dense = [&](const bp_tensor *t) {
    return bp_tensor_same_shape(t, first) && bp_tensor_is_contiguous(t) &&
           reinterpret_cast<uintptr_t>(t->data) % 64 == 0;
  };
  const int n1 = plugins::n_sources(first->op), n2 = plugins::n_sources(second->op);
  if (!dense(first) || !dense(second)) return false;
  for (int s = 0; s < n1; ++s)
    if (!dense(first->src[s])) return false;
  for (int s = 0; s < n2; ++s)
    if (!dense(second->src[s])) return false;
  reshape_flat(first, elements, &out->first);
  reshape_flat(second, elements, &out->second);
  for (int s = 0; s < n1; ++s) {
    reshape_flat(first->src[s], elements, &out->first_src[s]);
    out->first.src[s] = &out->first_src[s];
  }
  for (int s = 0; s < n2; ++s) {
    if (second->src[s] == first) {
      out->second.src[s] = &out->first;
    } else {
      reshape_flat(second->src[s], elements, &out->second_other);
      out->second.src[s] = &out->second_other;
    }
  }
  return true;
}

int fused_chunks(const bp_tensor *first, int64_t rows, int nth) {
  const int64_t per_part = (rows + nth - 1) / nth;
  const int64_t part_bytes = per_part * first->ne[0] * static_cast<int64_t>(bp_type_size(first->type));
  const int64_t target = chunk_bytes();
  if (target <= 0 || part_bytes <= target) return 1;
  int64_t chunks = (part_bytes + target - 1) / target;
  if (chunks > per_part) chunks = per_part;
  // Virtual parts of ceil(rows / (nth * chunks)) rows: keep the rows they
  // leave over (which the last thread goes without) under an eighth of a
  // part, so the split stays as even as the unfused one.
  for (; chunks > 1; --chunks) {
    const int64_t parts = nth * chunks;
    const int64_t slack = parts * ((rows + parts - 1) / parts) - rows;
    if (slack * 8 <= per_part) break;
  }
  return static_cast<int>(chunks);
}

}  // namespace bp::cpu
