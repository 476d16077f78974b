// ops_copy.cpp: GET_ROWS, CPY and CONT (with F32/F16/I32 conversion, any
// strides) and CONCAT along any dim.
#include <cinttypes>
#include <cstdio>

#include <vector>

#include "cpu.hpp"
#include "kernels.hpp"
#include "quant.hpp"

namespace bp::cpu {
namespace {

// Copies |n| elements from a row of |st| (stride |sstride|) into a row of
// |dt| (stride |dstride|): memcpy when both are dense and of one type.
void copy_row(const char *src, bp_type st, size_t sstride, char *dst, bp_type dt, size_t dstride, int64_t n) {
  const size_t ss = bp_type_size(st), ds = bp_type_size(dt);
  if (st == dt && (n == 1 || (sstride == ss && dstride == ds))) {
    std::memmove(dst, src, static_cast<size_t>(n) * ss);
    return;
  }
  if (st == BP_TYPE_F16 && dt == BP_TYPE_F32) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + i * sstride, sizeof h);
      float f = bp_fp16_to_fp32(h);
      std::memcpy(dst + i * dstride, &f, sizeof f);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) convert_element(src + i * sstride, st, dst + i * dstride, dt);
}

// Walks a tensor's elements in logical (row-major, dim 0 fastest) order.
struct cursor {
  const bp_tensor *t;
  int64_t i[4];
  void seek(int64_t flat) {
    i[0] = flat % t->ne[0];
    flat /= t->ne[0];
    i[1] = flat % t->ne[1];
    flat /= t->ne[1];
    i[2] = flat % t->ne[2];
    i[3] = flat / t->ne[2];
  }
  char *ptr() const { return elem_ptr(t, i[0], i[1], i[2], i[3]); }
  void next() {
    for (int d = 0; d < 4; ++d) {
      if (++i[d] < t->ne[d] || d == 3) return;
      i[d] = 0;
    }
  }
};

}  // namespace

// ---- GET_ROWS -------------------------------------------------------------
// dst(:, n, i2, i3) = a(:, ids(n, i2, i3), i2, i3); ids and a repeat over
// dims 2 and 3 when they are smaller than dst's.

bool get_rows_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *ids = t->src[1];
  qtype q = qtype::q8_0;
  if (has_valid_shape(a) && bp_type_is_quantized(a->type)) {
    // Rows of a quantized table, widened to F32 (quant_rows.cpp).
    return has_valid_shape(t) && has_valid_shape(ids) && quant_rows_dense(a, &q) && t->type == BP_TYPE_F32 &&
           ids->type == BP_TYPE_I32 && t->ne[0] == a->ne[0] && t->ne[1] == ids->ne[0] && ids->ne[3] == 1;
  }
  return has_valid_shape(t) && has_valid_shape(a) && has_valid_shape(ids) && is_known_type(a->type) &&
         t->type == (a->type == BP_TYPE_I32 ? BP_TYPE_I32 : BP_TYPE_F32) && ids->type == BP_TYPE_I32 &&
         t->ne[0] == a->ne[0] && t->ne[1] == ids->ne[0] && ids->ne[3] == 1;
}

static int32_t row_id(const bp_tensor *t, int64_t n, int64_t i2, int64_t i3) {
  const bp_tensor *ids = t->src[1];
  int32_t id;
  std::memcpy(&id, elem_ptr(ids, n, i2 % ids->ne[1], i3 % ids->ne[2], 0), sizeof id);
  return id;
}

bp_status get_rows_prepare(const bp_tensor *t, bp_error *err) {
  const bp_tensor *a = t->src[0];
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t n = 0; n < t->ne[1]; ++n) {
        int32_t id = row_id(t, n, i2, i3);
        if (id < 0 || id >= a->ne[1])
          return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                               "GET_ROWS node '%s': row id %" PRId32 " at [%" PRId64 ", %" PRId64 ", %" PRId64
                               "] of ids '%s' is out of range; '%s' has rows 0..%" PRId64,
                               t->name, id, n, i2, i3, t->src[1]->name, a->name, a->ne[1] - 1);
      }
  return BP_OK;
}

void get_rows_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0];
  int64_t r0, r1;
  split_range(bp_tensor_nrows(t), ith, nth, &r0, &r1);
  qtype q = qtype::q8_0;
  const bool quantized = qtype_of(a->type, &q);
  std::vector<float> scratch(quantized ? static_cast<size_t>(t->ne[0]) : 0u);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(t, r);
    int32_t id = row_id(t, ix.i1, ix.i2, ix.i3);
    if (id < 0 || id >= a->ne[1]) continue;  // prepare() already refused it
    if (quantized) {
      float *out = out_row(t, ix.i1, ix.i2, ix.i3, scratch.data());
      dequantize_row(q, row_ptr(a, id, ix.i2 % a->ne[2], ix.i3 % a->ne[3]), out, t->ne[0]);
      finish_row(t, ix.i1, ix.i2, ix.i3, out);
      continue;
    }
    copy_row(row_ptr(a, id, ix.i2 % a->ne[2], ix.i3 % a->ne[3]), a->type, a->nb[0], row_ptr(t, ix.i1, ix.i2, ix.i3),
             t->type, t->nb[0], t->ne[0]);
  }
}

// ---- CPY / CONT -----------------------------------------------------------
// Elements of src0 in logical order go to the node's elements in logical
// order. For CPY the node aliases src1 (same memory, shape and strides).

bool copy_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0];
  qtype q = qtype::q8_0;
  if (has_valid_shape(t) && bp_type_is_quantized(t->type)) {
    // F32 into whole blocks of a quantized tensor (quant_rows.cpp).
    return has_valid_shape(a) && a->type == BP_TYPE_F32 && quant_rows_dense(t, &q) &&
           bp_tensor_nelements(t) == bp_tensor_nelements(a);
  }
  if (!has_valid_shape(t) || !has_valid_shape(a) || !is_known_type(t->type) || !is_known_type(a->type)) return false;
  // f32 <-> f16 and i32 -> i32, as the op table allows.
  if (is_float_type(t->type) != is_float_type(a->type)) return false;
  return bp_tensor_nelements(t) == bp_tensor_nelements(a);
}

// F32 (any layout) into a quantized tensor, one destination row at a time:
// its elements in logical order, gathered, then quantized.
static void copy_to_quant_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0];
  qtype q = qtype::q8_0;
  qtype_of(t->type, &q);
  int64_t r0, r1;
  split_range(bp_tensor_nrows(t), ith, nth, &r0, &r1);
  std::vector<float> row(static_cast<size_t>(t->ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const float *src = row.data();
    if (a->ne[0] == t->ne[0]) {
      row_index sx = decode_row(a, r);
      src = read_row(a, sx.i1, sx.i2, sx.i3, row.data());
    } else {
      cursor s{a, {0, 0, 0, 0}};
      s.seek(r * t->ne[0]);
      for (int64_t i = 0; i < t->ne[0]; ++i, s.next()) std::memcpy(&row[i], s.ptr(), sizeof(float));
    }
    row_index dx = decode_row(t, r);
    quantize_row(q, src, row_ptr(t, dx.i1, dx.i2, dx.i3), t->ne[0]);
  }
}

void copy_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0];
  if (bp_type_is_quantized(t->type)) {
    copy_to_quant_run(t, ith, nth);
    return;
  }
  if (a->ne[0] == t->ne[0]) {
    // Same row length: row r of one is row r of the other.
    int64_t r0, r1;
    split_range(bp_tensor_nrows(t), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
      row_index sx = decode_row(a, r), dx = decode_row(t, r);
      copy_row(row_ptr(a, sx.i1, sx.i2, sx.i3), a->type, a->nb[0], row_ptr(t, dx.i1, dx.i2, dx.i3), t->type, t->nb[0],
               t->ne[0]);
    }
    return;
  }
  int64_t e0, e1;
  split_range(bp_tensor_nelements(t), ith, nth, &e0, &e1);
  if (e0 >= e1) return;
  cursor s{a, {0, 0, 0, 0}}, d{t, {0, 0, 0, 0}};
  s.seek(e0);
  d.seek(e0);
  for (int64_t e = e0; e < e1; ++e) {
    convert_element(s.ptr(), a->type, d.ptr(), t->type);
    s.next();
    d.next();
  }
}

// ---- CONCAT ---------------------------------------------------------------

bool concat_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  if (!has_valid_shape(t) || !has_valid_shape(a) || !has_valid_shape(b)) return false;
  if (!is_known_type(t->type) || !is_known_type(a->type) || !is_known_type(b->type)) return false;
  if (t->type != a->type || t->type != b->type) return false;
  const int dim = bp_tensor_param_i32(t, 0);
  if (dim < 0 || dim >= BP_MAX_DIMS) return false;
  for (int d = 0; d < BP_MAX_DIMS; ++d) {
    if (d == dim ? t->ne[d] != a->ne[d] + b->ne[d] : (t->ne[d] != a->ne[d] || t->ne[d] != b->ne[d])) return false;
  }
  return true;
}

void concat_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int dim = bp_tensor_param_i32(t, 0);
  int64_t r0, r1;
  split_range(bp_tensor_nrows(t), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(t, r);
    char *out = row_ptr(t, ix.i1, ix.i2, ix.i3);
    if (dim == 0) {
      copy_row(row_ptr(a, ix.i1, ix.i2, ix.i3), a->type, a->nb[0], out, t->type, t->nb[0], a->ne[0]);
      copy_row(row_ptr(b, ix.i1, ix.i2, ix.i3), b->type, b->nb[0], out + a->ne[0] * t->nb[0], t->type, t->nb[0],
               b->ne[0]);
      continue;
    }
    int64_t i[4] = {0, ix.i1, ix.i2, ix.i3};
    const bp_tensor *src = a;
    if (i[dim] >= a->ne[dim]) {
      i[dim] -= a->ne[dim];
      src = b;
    }
    copy_row(row_ptr(src, i[1], i[2], i[3]), src->type, src->nb[0], out, t->type, t->nb[0], t->ne[0]);
  }
}

}  // namespace bp::cpu
