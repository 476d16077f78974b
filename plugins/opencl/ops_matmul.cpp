// ops_matmul.cpp: MUL_MAT launches: mul_mat_dot (matmul.cl) for every
// shape of f32, f16 and bf16 weights, its vector width and columns per
// work-item chosen per backend; mul_mv_q (quant.cl) for quantized weights;
// mul_mat_tiled (quant.cl) for GPU-sized products of every weight type.
// Each takes a fused next node in its store (epilogue.h, -DEPILOGUE and
// two more arguments).
#include <CL/cl.h>

#include <algorithm>
#include <string>

#include "backend.hpp"

namespace bp::opencl {

namespace {
bool rows_dense(const bp_tensor *t) { return t->ne[0] == 1 || t->nb[0] == bp_type_size(t->type); }

// epilogue.h's EPI_ADD, EPI_MUL, EPI_SILU for node |after| (0: none).
int epilogue_code(const bp_tensor *after) {
  if (!after) return 0;
  return after->op == BP_OP_ADD ? 1 : after->op == BP_OP_MUL ? 2 : 3;
}

// The build option of the epilogue; "" without one, so the unfused
// programs (and their cache entries) are the ones they always were.
std::string epilogue_option(const bp_tensor *after) {
  return after ? " -DEPILOGUE=" + std::to_string(epilogue_code(after)) : std::string();
}
}  // namespace

const bp_tensor *epilogue_operand(const bp_tensor *product, const bp_tensor *after) {
  if (after->op == BP_OP_SILU) return product;  // not read: the argument only fills the slot
  return after->src[0] == product ? after->src[1] : after->src[0];
}

bool mul_mat_supported(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  return (a->type == BP_TYPE_F32 || a->type == BP_TYPE_F16 || a->type == BP_TYPE_BF16 || is_quant(a->type)) &&
         b->type == BP_TYPE_F32 && t->type == BP_TYPE_F32 && rows_dense(a) && rows_dense(b) && a->ne[0] == b->ne[0] &&
         b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && t->ne[0] == a->ne[1] && t->ne[1] == b->ne[1] &&
         t->ne[2] == b->ne[2] && t->ne[3] == b->ne[3] && bp_tensor_is_contiguous(t);
}

namespace {

// Quantized weights: a work-group per row of a, reducing in local memory,
// up to 8 columns of b per group (a decoded once per 8 columns). 64 items
// on GPUs; on CPU drivers, where the group is one vectorized loop, 16 (a
// row of 4096 has 128 groups of 32 values: 8 per item).
bp_status mul_mat_quant_run(backend_ctx *be, const bp_tensor *t, const bp_tensor *after, bp_error *err) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t M = a->ne[1], N = b->ne[1], cols = std::min<int64_t>(N, 8);
  const size_t wg = be->dev->type == BP_DEVICE_TYPE_CPU ? 16 : 64;
  const cl_long r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  const std::string opts = "-DBP_QTYPE=" + std::to_string(static_cast<int>(a->type)) + " -DWG=" + std::to_string(wg) +
                           " -DNCOLS=" + std::to_string(cols) + epilogue_option(after);
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "quant", opts, "mul_mv_q", &k, err); s != BP_OK) return s;
  size_t g[3] = {static_cast<size_t>(M) * wg, static_cast<size_t>((N + cols - 1) / cols),
                 static_cast<size_t>(t->ne[2] * t->ne[3])},
         l[3] = {wg, 1, 1};
  return launch(be, k).tensor(a).tensor(b).tensor(t).arg(r2).arg(r3).epilogue(t, after).run(3, g, l, t->name, err);
}

// Whether mul_mat_tiled runs (backend_options::matmul): its decoders take
// 4 values of a row at a time, so K % 4 == 0; unforced, on GPUs and for
// products of 32 columns or more, where a tile of a decoded into local
// memory serves a block of columns (matrix x vector products read a once
// anyway and keep mul_mv_q / mul_mat_dot).
bool tiled_applies(const backend_ctx *be, const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  if (a->ne[0] % 4 != 0 || be->matmul == matmul_mode::dot) return false;
  return be->matmul == matmul_mode::tiled || (be->dev->type != BP_DEVICE_TYPE_CPU && b->ne[1] >= 32);
}

// 64 x 64 blocks of the output per work-group of 16 x 16 (quant.cl).
bp_status mul_mat_tiled_run(backend_ctx *be, const bp_tensor *t, const bp_tensor *after, bp_error *err) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const cl_long r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  const std::string opts = "-DBP_QTYPE=" + std::to_string(static_cast<int>(a->type)) + epilogue_option(after);
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "quant", opts, "mul_mat_tiled", &k, err); s != BP_OK) return s;
  const int64_t tile = 64;
  size_t g[3] = {static_cast<size_t>((t->ne[0] + tile - 1) / tile * 16),
                 static_cast<size_t>((t->ne[1] + tile - 1) / tile * 16), static_cast<size_t>(t->ne[2] * t->ne[3])},
         l[3] = {16, 16, 1};
  return launch(be, k).tensor(a).tensor(b).tensor(t).arg(r2).arg(r3).epilogue(t, after).run(3, g, l, t->name, err);
}

}  // namespace

bp_status mul_mat_run(backend_ctx *be, const bp_tensor *t, const bp_tensor *after, bp_error *err) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  if (tiled_applies(be, t)) return mul_mat_tiled_run(be, t, after, err);
  if (is_quant(a->type)) return mul_mat_quant_run(be, t, after, err);
  const int64_t M = a->ne[1], N = b->ne[1];
  const cl_long r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  // One column per work-item for a matrix x vector; otherwise the backend's
  // width, even at N = 2 or 3, where the spare columns cost FMAs but a is
  // read half or a third as often.
  const int64_t cols = N == 1 ? 1 : be->matmul_cols;
  const std::string opts = "-DA_TYPE=" + std::to_string(type_code(a->type)) +
                           " -DVW=" + std::to_string(be->matmul_vector_width) + " -DDOT_COLS=" + std::to_string(cols) +
                           epilogue_option(after);
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "matmul", opts, "mul_mat_dot", &k, err); s != BP_OK) return s;
  // A group is 16 items of 4 rows by as many column items as cover 32
  // columns: 64 rows of a (1 MiB at K = 4096, f32) stay in cache while up
  // to 32 columns pass.
  const int64_t n_items = (N + cols - 1) / cols;
  size_t g[3] = {static_cast<size_t>((M + 3) / 4), static_cast<size_t>(n_items),
                 static_cast<size_t>(t->ne[2] * t->ne[3])},
         l[3] = {16, static_cast<size_t>(std::min<int64_t>(n_items, 32 / cols)), 1};
  return launch(be, k).tensor(a).tensor(b).tensor(t).arg(r2).arg(r3).epilogue(t, after).run(3, g, l, t->name, err);
}

}  // namespace bp::opencl
