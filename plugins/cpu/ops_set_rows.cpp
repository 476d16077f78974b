// ops_set_rows.cpp: SET_ROWS, row i of src (f32) into row ids[i] of dst (f32
// or f16), for every (i2, i3). The result is dst itself (a view of it), so
// the kernel writes through the node's own data pointer and strides. Row ids
// are checked on the calling thread first (prepare): a bad one is an error
// that names it, and nothing is written.
#include <cinttypes>
#include <cstring>
#include <vector>

#include "kernels.hpp"

namespace bp::cpu {
namespace {

int32_t row_id(const bp_tensor *ids, int64_t i) {
  int32_t id;
  std::memcpy(&id, elem_ptr(ids, i, 0, 0, 0), sizeof id);
  return id;
}

}  // namespace

bool set_rows_supports(const bp_tensor *t) {
  const bp_tensor *src = t->src[0], *dst = t->src[1], *ids = t->src[2];
  if (!has_valid_shape(src) || !has_valid_shape(dst) || !has_valid_shape(ids)) return false;
  return src->type == BP_TYPE_F32 && is_float_type(dst->type) && t->type == dst->type && ids->type == BP_TYPE_I32 &&
         src->ne[0] == dst->ne[0] && src->ne[2] == dst->ne[2] && src->ne[3] == dst->ne[3] && ids->ne[0] == src->ne[1] &&
         rows_dense_as(t, t->type);
}

bp_status set_rows_prepare(const bp_tensor *t, bp_error *err) {
  const bp_tensor *ids = t->src[2];
  for (int64_t i = 0; i < ids->ne[0]; ++i) {
    const int32_t id = row_id(ids, i);
    if (id < 0 || id >= t->ne[1])
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                           "SET_ROWS node '%s': row id %" PRId32 " at [%" PRId64
                           "] of ids '%s' is out of range; '%s' has rows 0..%" PRId64,
                           t->name, id, i, ids->name, t->src[1]->name, t->ne[1] - 1);
  }
  return BP_OK;
}

// The rows written, not the whole destination (the node's own size).
int64_t set_rows_work(const bp_tensor *t) { return bp_tensor_nelements(t->src[0]); }

void set_rows_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *src = t->src[0], *ids = t->src[2];
  int64_t r0, r1;
  split_range(bp_tensor_nrows(src), ith, nth, &r0, &r1);
  std::vector<float> scratch(static_cast<size_t>(src->ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const row_index ix = decode_row(src, r);
    const int32_t id = row_id(ids, ix.i1);
    if (id < 0 || id >= t->ne[1]) continue;  // prepare() already refused it
    const float *x = read_row(src, ix.i1, ix.i2, ix.i3, scratch.data());
    char *y = row_ptr(t, id, ix.i2, ix.i3);
    if (t->type == BP_TYPE_F32) {
      std::memcpy(y, x, static_cast<size_t>(src->ne[0]) * sizeof(float));
    } else {
      for (int64_t i = 0; i < src->ne[0]; ++i) store_f32(y + i * t->nb[0], t->type, x[i]);
    }
  }
}

}  // namespace bp::cpu
