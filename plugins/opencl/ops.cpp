// ops.cpp: which ops and types the opencl backend runs (the same set as the
// cpu plugin) and how each node is launched: the kernel, its -D options and
// its work sizes. Dense operands take the "_contig"/"_rows" fast paths; the
// "_nd" kernels follow any strides and broadcast through ne/nb arguments.
#include <CL/cl.h>

#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "backend.hpp"
#include "op_family.hpp"

namespace bp::opencl {
namespace {

bool is_float(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16; }
bool is_known(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_I32; }
// Weight storage the copy kernels convert to and from f32 (LOAD_AS, STORE_AS).
bool is_stored_float(bp_type t) { return is_float(t) || t == BP_TYPE_BF16; }

// Work-group size along a dimension of |n| items: big groups for long rows
// (the driver runs a group as one vectorized loop), few distinct sizes since
// each new one makes the driver specialize the kernel again.
size_t local_for(int64_t n) { return n >= 256 ? 256 : n >= 64 ? 64 : 16; }

std::string opts2(const char *a, bp_type ta, const char *b, bp_type tb) {
  return std::string("-D") + a + "=" + std::to_string(type_code(ta)) + " -D" + b + "=" + std::to_string(type_code(tb));
}

const char *binary_name(bp_op op) {
  switch (op) {
    case BP_OP_ADD:
      return "add";
    case BP_OP_SUB:
      return "sub";
    case BP_OP_MUL:
      return "mul";
    default:
      return "div";
  }
}

const char *unary_name(bp_op op) {
  switch (op) {
    case BP_OP_SCALE:
      return "scale";
    case BP_OP_CLAMP:
      return "clamp";
    case BP_OP_NEG:
      return "neg";
    case BP_OP_ABS:
      return "abs";
    case BP_OP_SQR:
      return "sqr";
    case BP_OP_SQRT:
      return "sqrt";
    case BP_OP_EXP:
      return "exp";
    case BP_OP_RELU:
      return "relu";
    case BP_OP_GELU:
      return "gelu";
    case BP_OP_SILU:
      return "silu";
    case BP_OP_TANH:
      return "tanh";
    default:
      return "sigmoid";
  }
}

bool rows_only_dim0(const bp_tensor *b) { return b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1; }

bp_status run_binary(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const std::string opts = opts2("A_TYPE", a->type, "B_TYPE", b->type);
  const bool dense = bp_tensor_is_contiguous(a) && bp_tensor_is_contiguous(t) && bp_tensor_is_contiguous(b);
  cl_kernel k = nullptr;
  std::string name = binary_name(t->op);
  if (dense && bp_tensor_same_shape(a, b)) {
    if (bp_status s = get_kernel(be, "elementwise", opts, (name + "_contig").c_str(), &k, err); s != BP_OK) return s;
    const cl_buffer *ba = buffer_of(a), *bb = buffer_of(b), *bd = buffer_of(t);
    if (!ba || !bb || !bd)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "'%s' has a source outside OpenCL memory", t->name);
    const cl_ulong n = static_cast<cl_ulong>(bp_tensor_nelements(t));
    size_t g = n, l = 256;
    return launch(be, k)
        .mem(ba->mem)
        .arg(cl_ulong(offset_of(a, ba)))
        .mem(bb->mem)
        .arg(cl_ulong(offset_of(b, bb)))
        .mem(bd->mem)
        .arg(cl_ulong(offset_of(t, bd)))
        .arg(n)
        .run(1, &g, &l, t->name, err);
  }
  if (dense && b->ne[0] == a->ne[0] && rows_only_dim0(b)) {
    if (bp_status s = get_kernel(be, "elementwise", opts, (name + "_rows").c_str(), &k, err); s != BP_OK) return s;
    const cl_buffer *ba = buffer_of(a), *bb = buffer_of(b), *bd = buffer_of(t);
    if (!ba || !bb || !bd)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "'%s' has a source outside OpenCL memory", t->name);
    const cl_ulong n0 = static_cast<cl_ulong>(t->ne[0]);
    size_t g[2] = {static_cast<size_t>(n0), static_cast<size_t>(bp_tensor_nrows(t))}, l[2] = {local_for(t->ne[0]), 1};
    return launch(be, k)
        .mem(ba->mem)
        .arg(cl_ulong(offset_of(a, ba)))
        .mem(bb->mem)
        .arg(cl_ulong(offset_of(b, bb)))
        .mem(bd->mem)
        .arg(cl_ulong(offset_of(t, bd)))
        .arg(n0)
        .arg(cl_ulong(0))
        .run(2, g, l, t->name, err);
  }
  if (bp_status s = get_kernel(be, "elementwise", opts, (name + "_nd").c_str(), &k, err); s != BP_OK) return s;
  size_t g[3] = {static_cast<size_t>(t->ne[0]), static_cast<size_t>(t->ne[1]),
                 static_cast<size_t>(t->ne[2] * t->ne[3])};
  size_t l[3] = {local_for(t->ne[0]), 1, 1};
  return launch(be, k).tensor(a).tensor(b).tensor(t).run(3, g, l, t->name, err);
}

bp_status run_unary(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *a = t->src[0];
  const std::string opts = opts2("A_TYPE", a->type, "B_TYPE", BP_TYPE_F32);
  const float p0 = (t->op == BP_OP_SCALE || t->op == BP_OP_CLAMP) ? bp_tensor_param_f32(t, 0) : 0.0f;
  const float p1 = t->op == BP_OP_CLAMP ? bp_tensor_param_f32(t, 1) : 0.0f;
  std::string name = unary_name(t->op);
  cl_kernel k = nullptr;
  if (bp_tensor_is_contiguous(a) && bp_tensor_is_contiguous(t)) {
    if (bp_status s = get_kernel(be, "elementwise", opts, (name + "_contig").c_str(), &k, err); s != BP_OK) return s;
    const cl_buffer *ba = buffer_of(a), *bd = buffer_of(t);
    if (!ba || !bd)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "'%s' has a source outside OpenCL memory", t->name);
    const cl_ulong n = static_cast<cl_ulong>(bp_tensor_nelements(t));
    size_t g = n, l = 256;
    return launch(be, k)
        .mem(ba->mem)
        .arg(cl_ulong(offset_of(a, ba)))
        .mem(bd->mem)
        .arg(cl_ulong(offset_of(t, bd)))
        .arg(n)
        .arg(p0)
        .arg(p1)
        .run(1, &g, &l, t->name, err);
  }
  if (bp_status s = get_kernel(be, "elementwise", opts, (name + "_nd").c_str(), &k, err); s != BP_OK) return s;
  size_t g[3] = {static_cast<size_t>(t->ne[0]), static_cast<size_t>(t->ne[1]),
                 static_cast<size_t>(t->ne[2] * t->ne[3])};
  size_t l[3] = {local_for(t->ne[0]), 1, 1};
  return launch(be, k).tensor(a).tensor(t).arg(p0).arg(p1).run(3, g, l, t->name, err);
}

// One work-item per row; small groups so a few hundred rows still spread
// over every core.
bp_status run_rows(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *a = t->src[0];
  const bp_tensor *mask = t->op == BP_OP_SOFT_MAX ? t->src[1] : nullptr;
  const std::string opts = "-DMASK_TYPE=" + std::to_string(mask ? type_code(mask->type) : 0);
  const char *name = t->op == BP_OP_ARGMAX                              ? "argmax"
                     : t->op == BP_OP_SOFT_MAX                          ? (mask ? "soft_max_mask" : "soft_max")
                     : (t->op == BP_OP_NORM || t->op == BP_OP_RMS_NORM) ? "norm"
                                                                        : "sum_rows";
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "rows", opts, name, &k, err); s != BP_OK) return s;
  size_t g = static_cast<size_t>(bp_tensor_nrows(a)), l = 4;
  launch call(be, k);
  call.tensor(a);
  switch (t->op) {
    case BP_OP_SUM_ROWS:
      call.tensor(t).arg(cl_int(0));
      break;
    case BP_OP_MEAN:
      call.tensor(t).arg(cl_int(1));
      break;
    case BP_OP_ARGMAX:
      call.tensor(t);
      break;
    case BP_OP_NORM:
      call.tensor(t).arg(cl_int(0)).arg(bp_tensor_param_f32(t, 0));
      break;
    case BP_OP_RMS_NORM:
      call.tensor(t).arg(cl_int(1)).arg(bp_tensor_param_f32(t, 0));
      break;
    default:  // SOFT_MAX: soft_max_mask takes the mask after a
      if (mask) call.tensor(mask);
      call.tensor(t).arg(bp_tensor_param_f32(t, 0));
      break;
  }
  return call.run(1, &g, &l, t->name, err);
}

bp_status run_copy(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *a = t->src[0];
  // Same type, both dense: a plain buffer copy.
  if (a->type == t->type && bp_tensor_is_contiguous(a) && bp_tensor_is_contiguous(t)) {
    const cl_buffer *ba = buffer_of(a), *bd = buffer_of(t);
    if (!ba || !bd)
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "'%s' has a source outside OpenCL memory", t->name);
    const size_t n = bp_tensor_nbytes(t);
    if (ba == bd && offset_of(a, ba) == offset_of(t, bd)) return BP_OK;
    cl_event ev = nullptr;
    const uint64_t before = trace_before_enqueue(be);
    cl_int rc = clEnqueueCopyBuffer(be->queue, ba->mem, bd->mem, offset_of(a, ba), offset_of(t, bd), n, 0, nullptr,
                                    trace_event(be, &ev));
    if (rc != CL_SUCCESS) return device_fail(be->dev, rc, cl_site::setup, std::string("copy '") + t->name + "'", err);
    trace_enqueued(be, ev, before);
    return BP_OK;
  }
  const std::string opts = opts2("S_TYPE", a->type, "D_TYPE", t->type);
  cl_kernel k = nullptr;
  if (a->ne[0] == t->ne[0]) {
    if (bp_status s = get_kernel(be, "copy", opts, "copy_rows", &k, err); s != BP_OK) return s;
    size_t g[2] = {static_cast<size_t>(t->ne[0]), static_cast<size_t>(bp_tensor_nrows(t))},
           l[2] = {local_for(t->ne[0]), 1};
    return launch(be, k).tensor(a).tensor(t).run(2, g, l, t->name, err);
  }
  if (bp_status s = get_kernel(be, "copy", opts, "copy_flat", &k, err); s != BP_OK) return s;
  size_t g = static_cast<size_t>(bp_tensor_nelements(t)), l = 256;
  return launch(be, k).tensor(a).tensor(t).run(1, &g, &l, t->name, err);
}

// The ids are data: read them (they are small) and refuse a bad one with the
// same message as the cpu plugin, before any kernel could read out of range.
// Reads node |t|'s row ids (|ids|) back to the host, after the work before.
bp_status read_ids(backend_ctx *be, const bp_tensor *t, const bp_tensor *ids, std::vector<char> *host, bp_error *err) {
  const cl_buffer *b = buffer_of(ids);
  if (!b) return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "ids of '%s' are outside OpenCL memory", t->name);
  host->resize(bp_tensor_nbytes(ids));
  cl_int rc = clEnqueueReadBuffer(be->queue, b->mem, CL_TRUE, offset_of(ids, b), host->size(), host->data(), 0, nullptr,
                                  nullptr);
  if (rc != CL_SUCCESS)
    return device_fail(be->dev, rc, cl_site::wait, std::string("reading ids of '") + t->name + "'", err);
  return BP_OK;
}

bp_status check_row_ids(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *a = t->src[0], *ids = t->src[1];
  std::vector<char> host;
  if (bp_status s = read_ids(be, t, ids, &host, err); s != BP_OK) return s;
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t r = 0; r < t->ne[1]; ++r) {
        int32_t id;
        std::memcpy(&id, host.data() + r * ids->nb[0] + (i2 % ids->ne[1]) * ids->nb[1] + (i3 % ids->ne[2]) * ids->nb[2],
                    sizeof id);
        if (id < 0 || id >= a->ne[1])
          return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                               "GET_ROWS node '%s': row id %" PRId32 " at [%" PRId64 ", %" PRId64 ", %" PRId64
                               "] of ids '%s' is out of range; '%s' has rows 0..%" PRId64,
                               t->name, id, r, i2, i3, ids->name, a->name, a->ne[1] - 1);
      }
  return BP_OK;
}

bp_status run_get_rows(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  if (bp_status s = check_row_ids(be, t, err); s != BP_OK) return s;
  cl_kernel k = nullptr;
  if (is_quant(t->src[0]->type)) {
    const std::string opts = "-DBP_QTYPE=" + std::to_string(static_cast<int>(t->src[0]->type));
    if (bp_status s = get_kernel(be, "quant", opts, "get_rows_q", &k, err); s != BP_OK) return s;
    size_t g[2] = {static_cast<size_t>(t->ne[0] / 4), static_cast<size_t>(bp_tensor_nrows(t))},
           l[2] = {local_for(t->ne[0] / 4), 1};
    return launch(be, k).tensor(t->src[0]).tensor(t->src[1]).tensor(t).run(2, g, l, t->name, err);
  }
  if (bp_status s = get_kernel(be, "copy", opts2("S_TYPE", t->src[0]->type, "D_TYPE", t->type), "get_rows", &k, err);
      s != BP_OK)
    return s;
  size_t g[2] = {static_cast<size_t>(t->ne[0]), static_cast<size_t>(bp_tensor_nrows(t))},
         l[2] = {local_for(t->ne[0]), 1};
  return launch(be, k).tensor(t->src[0]).tensor(t->src[1]).tensor(t).run(2, g, l, t->name, err);
}

bp_status run_set_rows(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *src = t->src[0], *ids = t->src[2];
  std::vector<char> host;
  if (bp_status s = read_ids(be, t, ids, &host, err); s != BP_OK) return s;
  for (int64_t i = 0; i < ids->ne[0]; ++i) {
    int32_t id;
    std::memcpy(&id, host.data() + i * ids->nb[0], sizeof id);
    if (id < 0 || id >= t->ne[1])
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                           "SET_ROWS node '%s': row id %" PRId32 " at [%" PRId64
                           "] of ids '%s' is out of range; '%s' has rows 0..%" PRId64,
                           t->name, id, i, ids->name, t->src[1]->name, t->ne[1] - 1);
  }
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "copy", opts2("S_TYPE", src->type, "D_TYPE", t->type), "set_rows", &k, err);
      s != BP_OK)
    return s;
  size_t g[2] = {static_cast<size_t>(src->ne[0]), static_cast<size_t>(bp_tensor_nrows(src))},
         l[2] = {local_for(src->ne[0]), 1};
  return launch(be, k).tensor(src).tensor(ids).tensor(t).run(2, g, l, t->name, err);
}

bp_status run_concat(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "copy", opts2("S_TYPE", t->type, "D_TYPE", t->type), "concat", &k, err); s != BP_OK)
    return s;
  size_t g[2] = {static_cast<size_t>(t->ne[0]), static_cast<size_t>(bp_tensor_nrows(t))},
         l[2] = {local_for(t->ne[0]), 1};
  return launch(be, k)
      .tensor(t->src[0])
      .tensor(t->src[1])
      .tensor(t)
      .arg(cl_int(bp_tensor_param_i32(t, 0)))
      .run(2, g, l, t->name, err);
}

bp_status run_rope(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  cl_kernel k = nullptr;
  const bp_tensor *ff = t->src[2];
  if (bp_status s = get_kernel(be, "rope", ff ? "-DFREQ_FACTORS=1" : "", "rope", &k, err); s != BP_OK) return s;
  // One work-item per pair (or copied column) and position; each loops over
  // the heads (rope.cl).
  const int64_t cols = bp_tensor_param_i32(t, 0) / 2 + (t->ne[0] - bp_tensor_param_i32(t, 0));
  size_t g[2] = {static_cast<size_t>(cols), static_cast<size_t>(t->ne[2] * t->ne[3])}, l[2] = {local_for(cols), 1};
  launch l_rope(be, k);
  l_rope.tensor(t->src[0]).tensor(t->src[1]);
  if (ff) l_rope.tensor(ff);
  return l_rope.tensor(t)
      .arg(cl_int(bp_tensor_param_i32(t, 0)))
      .arg(cl_int(bp_tensor_param_i32(t, 1) == BP_ROPE_NEOX ? 1 : 0))
      .arg(bp_tensor_param_f32(t, 2))
      .arg(bp_tensor_param_f32(t, 3))
      .run(2, g, l, t->name, err);
}

bool supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  switch (plugins::family_of(t->op)) {
    case plugins::op_family::binary:
      if (!is_float(b->type)) return false;
      for (int d = 0; d < BP_MAX_DIMS; ++d)
        if (a->ne[d] % b->ne[d] != 0) return false;
      [[fallthrough]];
    case plugins::op_family::scalar:
    case plugins::op_family::unary:
      return is_float(a->type) && t->type == a->type && bp_tensor_same_shape(t, a);
    case plugins::op_family::row_reduce:
    case plugins::op_family::other:
      break;
  }
  switch (t->op) {
    case BP_OP_SUM_ROWS:
    case BP_OP_MEAN:
      return a->type == BP_TYPE_F32 && t->type == BP_TYPE_F32 && bp_tensor_is_contiguous(t) &&
             bp_tensor_nelements(t) == bp_tensor_nrows(a);
    case BP_OP_ARGMAX:
      return a->type == BP_TYPE_F32 && t->type == BP_TYPE_I32 && bp_tensor_is_contiguous(t) &&
             bp_tensor_nelements(t) == bp_tensor_nrows(a);
    case BP_OP_NORM:
    case BP_OP_RMS_NORM:
      return a->type == BP_TYPE_F32 && t->type == BP_TYPE_F32 && bp_tensor_same_shape(t, a) &&
             bp_tensor_is_contiguous(t);
    case BP_OP_SOFT_MAX:
      return a->type == BP_TYPE_F32 && t->type == BP_TYPE_F32 && bp_tensor_same_shape(t, a) &&
             bp_tensor_is_contiguous(t) && (!t->src[1] || (is_float(t->src[1]->type) && t->src[1]->ne[0] >= a->ne[0]));
    case BP_OP_MUL_MAT:
      return mul_mat_supported(t);
    case BP_OP_GET_ROWS:
      return (is_known(a->type) || a->type == BP_TYPE_BF16 || is_quant(a->type)) &&
             t->type == (a->type == BP_TYPE_I32 ? BP_TYPE_I32 : BP_TYPE_F32) && b->type == BP_TYPE_I32 &&
             t->ne[0] == a->ne[0] && t->ne[1] == b->ne[0] && b->ne[3] == 1;
    case BP_OP_CPY:
    case BP_OP_CONT:
      // Floats of any storage into each other, i32 into i32.
      return ((is_stored_float(a->type) && is_stored_float(t->type)) ||
              (a->type == BP_TYPE_I32 && t->type == BP_TYPE_I32)) &&
             bp_tensor_nelements(t) == bp_tensor_nelements(a);
    case BP_OP_CONCAT: {
      const int dim = bp_tensor_param_i32(t, 0);
      if (!is_known(t->type) || a->type != t->type || b->type != t->type || dim < 0 || dim >= BP_MAX_DIMS) return false;
      for (int d = 0; d < BP_MAX_DIMS; ++d)
        if (d == dim ? t->ne[d] != a->ne[d] + b->ne[d] : (t->ne[d] != a->ne[d] || t->ne[d] != b->ne[d])) return false;
      return true;
    }
    case BP_OP_ROPE: {
      const int32_t n_dims = bp_tensor_param_i32(t, 0), mode = bp_tensor_param_i32(t, 1);
      const bp_tensor *ff = t->src[2];
      return t->type == BP_TYPE_F32 && a->type == BP_TYPE_F32 && b->type == BP_TYPE_I32 && bp_tensor_same_shape(t, a) &&
             b->ne[0] >= a->ne[2] && n_dims >= 2 && n_dims % 2 == 0 && n_dims <= a->ne[0] &&
             (mode == BP_ROPE_NORMAL || mode == BP_ROPE_NEOX) &&
             (!ff || (ff->type == BP_TYPE_F32 && ff->ne[0] >= n_dims / 2));
    }
    case BP_OP_ATTENTION:
      return attention_supported(t);
    case BP_OP_SET_ROWS: {
      const bp_tensor *dst = t->src[1], *ids = t->src[2];
      return a->type == BP_TYPE_F32 && is_float(dst->type) && t->type == dst->type && ids->type == BP_TYPE_I32 &&
             a->ne[0] == dst->ne[0] && a->ne[2] == dst->ne[2] && a->ne[3] == dst->ne[3] && ids->ne[0] == a->ne[1];
    }
    default:
      return false;
  }
}

}  // namespace

bool op_supported(const device_state *, const bp_tensor *t) {
  if (!t || bp_op_is_view(t->op)) return t != nullptr;
  for (int i = 0; i < plugins::n_sources(t->op); ++i)
    if (!t->src[i] && !(t->op == BP_OP_CPY && i == 1)) return false;
  if (!t->src[0]) return false;
  for (int d = 0; d < BP_MAX_DIMS; ++d)
    if (t->ne[d] < 1) return false;
  return supports(t);
}

bp_status compute_node(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  if (!op_supported(be->dev, t))
    return bp_error_setf(err, BP_ERR_UNIMPLEMENTED, "node '%s' (%d, %s) is not supported by the opencl backend",
                         t->name, static_cast<int>(t->op), bp_type_name(t->type));
  if (!buffer_of(t))
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "node '%s' is not in OpenCL memory; allocate the graph first",
                         t->name);
  switch (t->op) {
    case BP_OP_ADD:
    case BP_OP_SUB:
    case BP_OP_MUL:
    case BP_OP_DIV:
      return run_binary(be, t, err);
    case BP_OP_SUM_ROWS:
    case BP_OP_MEAN:
    case BP_OP_ARGMAX:
    case BP_OP_NORM:
    case BP_OP_RMS_NORM:
    case BP_OP_SOFT_MAX:
      return run_rows(be, t, err);
    case BP_OP_MUL_MAT:
      return mul_mat_run(be, t, nullptr, err);
    case BP_OP_GET_ROWS:
      return run_get_rows(be, t, err);
    case BP_OP_CPY:
    case BP_OP_CONT:
      return run_copy(be, t, err);
    case BP_OP_CONCAT:
      return run_concat(be, t, err);
    case BP_OP_ROPE:
      return run_rope(be, t, err);
    case BP_OP_ATTENTION:
      return attention_run(be, t, err);
    case BP_OP_SET_ROWS:
      return run_set_rows(be, t, err);
    default:
      return run_unary(be, t, err);
  }
}

}  // namespace bp::opencl
