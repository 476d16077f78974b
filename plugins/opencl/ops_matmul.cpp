// ops_matmul.cpp: MUL_MAT launches. Few columns of b (N < 8): matvec reads
// a and b where they are. Otherwise a and b are packed into f32 panels in
// the backend's scratch memory (converting f16 a on the way) and gemm
// computes TILE_N x 16 output blocks from them (matmul.cl explains why).
#include <CL/cl.h>

#include <string>

#include "backend.hpp"

namespace bp::opencl {

namespace {
// Few columns of b, or a small enough to stay in cache while matvec reads
// it once per column: packing and three launches would cost more.
constexpr int64_t kMatvecMaxN = 8;
constexpr int64_t kMatvecSmallN = 64;
constexpr int64_t kMatvecWideN = 8;
constexpr size_t kMatvecSmallA = size_t(2) << 20;

bool rows_dense(const bp_tensor *t) { return t->ne[0] == 1 || t->nb[0] == bp_type_size(t->type); }
}  // namespace

bool mul_mat_supported(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  return (a->type == BP_TYPE_F32 || a->type == BP_TYPE_F16) && b->type == BP_TYPE_F32 && t->type == BP_TYPE_F32 &&
         rows_dense(a) && rows_dense(b) && a->ne[0] == b->ne[0] && b->ne[2] % a->ne[2] == 0 &&
         b->ne[3] % a->ne[3] == 0 && t->ne[0] == a->ne[1] && t->ne[1] == b->ne[1] && t->ne[2] == b->ne[2] &&
         t->ne[3] == b->ne[3] && bp_tensor_is_contiguous(t);
}

bp_status mul_mat_run(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
  const cl_long r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  const size_t batches = static_cast<size_t>(t->ne[2] * t->ne[3]);
  const std::string opts_base = "-DA_TYPE=" + std::to_string(type_code(a->type));
  cl_kernel k = nullptr;
  const size_t a_bytes = static_cast<size_t>(K * M) * bp_type_size(a->type);
  if (N < kMatvecMaxN || (N < kMatvecSmallN && a_bytes <= kMatvecSmallA)) {
    // Four columns per work-item once there are columns enough to fill them.
    const int64_t cols = N >= kMatvecWideN ? 4 : 1;
    if (bp_status s = get_kernel(be, "matmul", opts_base, cols == 4 ? "matvec4" : "matvec", &k, err); s != BP_OK)
      return s;
    const int64_t n_items = (N + cols - 1) / cols;
    size_t g[3] = {static_cast<size_t>((M + 3) / 4), static_cast<size_t>(n_items), batches},
           l[3] = {16, n_items >= 8 ? size_t(8) : size_t(1), 1};
    return launch(be, k).tensor(a).tensor(b).tensor(t).arg(r2).arg(r3).run(3, g, l, t->name, err);
  }
  const int tn = be->matmul_tile;
  const std::string opts = opts_base + " -DTILE_N=" + std::to_string(tn);
  const int64_t m_tiles = (M + 15) / 16, n_tiles = (N + tn - 1) / tn;
  const cl_ulong a_stride = static_cast<cl_ulong>(m_tiles * 16 * K), b_stride = static_cast<cl_ulong>(n_tiles * tn * K);
  const size_t a_batches = static_cast<size_t>(a->ne[2] * a->ne[3]);
  cl_mem pa = nullptr, pb = nullptr;
  if (bp_status s = get_scratch(be, 0, a_stride * a_batches * sizeof(float), &pa, err); s != BP_OK) return s;
  if (bp_status s = get_scratch(be, 1, b_stride * batches * sizeof(float), &pb, err); s != BP_OK) return s;
  if (bp_status s = get_kernel(be, "matmul", opts, "pack_panels", &k, err); s != BP_OK) return s;
  size_t l[3] = {K >= 256 ? size_t(256) : K >= 64 ? size_t(64) : size_t(16), 1, 1};
  size_t ga[3] = {static_cast<size_t>(K), static_cast<size_t>(m_tiles * 16), a_batches};
  if (bp_status s =
          launch(be, k).tensor(a).mem(pa).arg(a_stride).arg(cl_int(16)).arg(cl_int(1)).run(3, ga, l, t->name, err);
      s != BP_OK)
    return s;
  size_t gb[3] = {static_cast<size_t>(K), static_cast<size_t>(n_tiles * tn), batches};
  if (bp_status s =
          launch(be, k).tensor(b).mem(pb).arg(b_stride).arg(cl_int(tn)).arg(cl_int(0)).run(3, gb, l, t->name, err);
      s != BP_OK)
    return s;
  if (bp_status s = get_kernel(be, "matmul", opts, "gemm", &k, err); s != BP_OK) return s;
  size_t g[3] = {static_cast<size_t>(m_tiles), static_cast<size_t>(n_tiles), batches}, lg[3] = {1, 1, 1};
  return launch(be, k)
      .mem(pa)
      .mem(pb)
      .arg(cl_long(K))
      .arg(a_stride)
      .arg(b_stride)
      .arg(cl_long(a->ne[2]))
      .arg(r2)
      .arg(r3)
      .tensor(t)
      .run(3, g, lg, t->name, err);
}

}  // namespace bp::opencl
