// ops_fusion.cpp: two nodes of a graph in one launch (backend.hpp,
// find_fused_pair and run_fused): a norm and the MUL by its weight, a SILU
// and the MUL by the up projection (SwiGLU), and a MUL_MAT and the ADD, MUL
// or SILU of its product (a residual, SwiGLU's gate) in the product
// kernel's store (epilogue.h). On PoCL a launch costs more than these row
// ops themselves; on a GPU a decode step is hundreds of small launches. The
// first node's result is still written: other nodes (or the caller) may
// read it.
#include <CL/cl.h>

#include <string>

#include "backend.hpp"
#include "op_family.hpp"
#include "tensor_bytes.hpp"

namespace bp::opencl {
namespace {

// In the plugin's opaque address space distinct buffers never share an
// address, so two tensors overlap exactly when their byte ranges do.
bool overlap(const bp_tensor *x, const bp_tensor *y) { return plugins::bytes_overlap(x, y); }
bool dense_f32(const bp_tensor *t) { return t->type == BP_TYPE_F32 && bp_tensor_is_contiguous(t); }
// Same first byte and the same dense shape: element i of one is element i
// of the other, which a kernel reading and writing element by element may
// share.
bool same_dense(const bp_tensor *x, const bp_tensor *y) {
  return x->data == y->data && bp_tensor_same_shape(x, y) && bp_tensor_is_contiguous(x) && bp_tensor_is_contiguous(y);
}
bool apart_or_same(const bp_tensor *x, const bp_tensor *y) { return same_dense(x, y) || !overlap(x, y); }

// The MUL's operand that is not |first|, or NULL when it reads |first|
// twice or not at all.
const bp_tensor *other_operand(const bp_tensor *mul, const bp_tensor *first) {
  if (mul->op != BP_OP_MUL) return nullptr;
  if (mul->src[0] == first && mul->src[1] != first) return mul->src[1];
  if (mul->src[1] == first && mul->src[0] != first) return mul->src[0];
  return nullptr;
}

// NORM or RMS_NORM, then MUL(norm, w) with w one dense f32 row or dense of
// the norm's shape (src0 the norm: the weight broadcasts only as src1).
bool norm_pair(const bp_tensor *n, const bp_tensor *mul) {
  if ((n->op != BP_OP_NORM && n->op != BP_OP_RMS_NORM) || mul->op != BP_OP_MUL || mul->src[0] != n) return false;
  const bp_tensor *a = n->src[0], *w = mul->src[1];
  if (!w || w == n || !dense_f32(w) || !dense_f32(n) || !dense_f32(mul) || !bp_tensor_same_shape(n, mul)) return false;
  const bool row = w->ne[0] == n->ne[0] && bp_tensor_nelements(w) == w->ne[0];
  if (!row && !bp_tensor_same_shape(w, n)) return false;
  // Work-item r reads row r of a (all of it, before writing) and of w, and
  // writes row r of the norm and of the product. The product goes to its
  // own bytes or over the norm's; nothing else may share bytes with a
  // tensor another work-item writes.
  if (!same_dense(mul, n) && (overlap(mul, n) || overlap(mul, a) || overlap(mul, w))) return false;
  return !overlap(w, n);
}

// SILU(x) then MUL(silu, u), all dense f32 of one shape: work-item i reads
// x[i] and u[i] and writes element i of both results, so any two of them
// either share no byte or are the same elements.
bool silu_pair(const bp_tensor *s, const bp_tensor *mul) {
  if (s->op != BP_OP_SILU) return false;
  const bp_tensor *u = other_operand(mul, s), *x = s->src[0];
  if (!u || !x || !dense_f32(x) || !dense_f32(s) || !dense_f32(u) || !dense_f32(mul)) return false;
  if (!bp_tensor_same_shape(x, s) || !bp_tensor_same_shape(u, s) || !bp_tensor_same_shape(mul, s)) return false;
  const bp_tensor *all[] = {x, s, u, mul};
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j)
      if (!apart_or_same(all[i], all[j])) return false;
  return true;
}

// MUL_MAT, then ADD or MUL of its product with a dense f32 tensor of its
// shape (the product on either side), or SILU of it, into a dense f32
// result of that shape. Work-item by work-item the product kernel stores an
// element of the product, then reads the operand's and writes the result's
// same element (epilogue.h), while every work-item reads all of a and b:
// the result may be the product's or the operand's own elements but must
// share no byte with anything else; the operand none with the product.
bool product_pair(const bp_tensor *mm, const bp_tensor *next) {
  if (mm->op != BP_OP_MUL_MAT || !dense_f32(mm)) return false;
  const bool binary = (next->op == BP_OP_ADD || next->op == BP_OP_MUL) && (next->src[0] == mm) != (next->src[1] == mm);
  const bool silu = next->op == BP_OP_SILU && next->src[0] == mm;
  if (!binary && !silu) return false;
  const bp_tensor *operand = epilogue_operand(mm, next);
  if (!dense_f32(next) || !dense_f32(operand) || !bp_tensor_same_shape(next, mm) || !bp_tensor_same_shape(operand, mm))
    return false;  // a broadcast operand (a bias row) runs unfused
  if (!apart_or_same(next, mm) || !apart_or_same(next, operand) || !apart_or_same(operand, mm)) return false;
  return !overlap(next, mm->src[0]) && !overlap(next, mm->src[1]);
}

bool pair_fuses(const bp_tensor *first, const bp_tensor *second) {
  for (const bp_tensor *t : {first, second})
    for (int i = 0; i < plugins::n_sources(t->op); ++i)
      if (!t->src[i] || !buffer_of(t->src[i])) return false;
  if (!buffer_of(first) || !buffer_of(second)) return false;
  return norm_pair(first, second) || silu_pair(first, second) || product_pair(first, second);
}

// The pair's kind, which indexes backend_ctx::fusion_logged, and its name.
int fused_kind(const bp_tensor *first, const bp_tensor *second) {
  if (first->op != BP_OP_MUL_MAT) return first->op == BP_OP_SILU ? 1 : 0;
  return second->op == BP_OP_ADD ? 2 : second->op == BP_OP_MUL ? 3 : 4;
}
const char *fused_label(const bp_tensor *first, const bp_tensor *second) {
  switch (fused_kind(first, second)) {
    case 0:
      return first->op == BP_OP_NORM ? "NORM+MUL" : "RMS_NORM+MUL";
    case 1:
      return "SILU+MUL";
    case 2:
      return "MUL_MAT+ADD";
    case 3:
      return "MUL_MAT+MUL";
    default:
      return "MUL_MAT+SILU";
  }
}

}  // namespace

fused_pair find_fused_pair(const bp_graph_desc *graph, uint32_t i) {
  const bp_tensor *first = graph->nodes[i];
  if (first->op == BP_OP_MUL_MAT) {
    // Only the very next node, as on vulkan: a decoder's residual ADD and
    // SwiGLU's SILU (or MUL by the up projection) follow their product.
    if (i + 1 < graph->n_nodes && pair_fuses(first, graph->nodes[i + 1])) return {i + 1, 0};
    return {};
  }
  if (first->op != BP_OP_NORM && first->op != BP_OP_RMS_NORM && first->op != BP_OP_SILU) return {};
  // The next computing node, or the one after a single independent node
  // (SwiGLU lists the up projection between the SILU and the MUL).
  uint32_t between = 0;
  for (uint32_t j = i + 1; j < graph->n_nodes; ++j) {
    const bp_tensor *t = graph->nodes[j];
    if (bp_op_is_view(t->op)) return {};  // a view of the first node could be read by the second
    if (pair_fuses(first, t)) return {j, between};
    if (between != 0 || !plugins::may_run_before(t, first)) return {};
    between = j;
  }
  return {};
}

bp_status run_fused(backend_ctx *be, const bp_tensor *first, const bp_tensor *second, bp_error *err) {
  const cl_buffer *bd = buffer_of(first), *bz = buffer_of(second);
  bool &logged = be->fusion_logged[fused_kind(first, second)];
  if (!logged) {
    logged = true;
    bp_host_logf(be->dev->plugin->host, BP_LOG_DEBUG, "fused %s ('%s', '%s') into one launch",
                 fused_label(first, second), first->name, second->name);
  }
  if (first->op == BP_OP_MUL_MAT) return mul_mat_run(be, first, second, err);
  if (first->op == BP_OP_SILU) {
    const bp_tensor *x = first->src[0], *u = other_operand(second, first);
    const cl_buffer *bx = buffer_of(x), *bu = buffer_of(u);
    cl_kernel k = nullptr;
    if (bp_status s = get_kernel(be, "elementwise", "-DA_TYPE=0 -DB_TYPE=0", "silu_mul_contig", &k, err); s != BP_OK)
      return s;
    const cl_ulong n = static_cast<cl_ulong>(bp_tensor_nelements(first));
    size_t g = n, l = 256;
    return launch(be, k)
        .mem(bx->mem)
        .arg(cl_ulong(offset_of(x, bx)))
        .mem(bd->mem)
        .arg(cl_ulong(offset_of(first, bd)))
        .mem(bu->mem)
        .arg(cl_ulong(offset_of(u, bu)))
        .mem(bz->mem)
        .arg(cl_ulong(offset_of(second, bz)))
        .arg(n)
        .run(1, &g, &l, second->name, err);
  }
  const bp_tensor *a = first->src[0], *w = second->src[1];
  const cl_buffer *bw = buffer_of(w);
  const bool row = bp_tensor_nelements(w) == w->ne[0];
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "rows", "-DMASK_TYPE=0", "norm_mul", &k, err); s != BP_OK) return s;
  size_t g = static_cast<size_t>(bp_tensor_nrows(a)), l = 4;
  return launch(be, k)
      .tensor(a)
      .tensor(first)
      .arg(cl_int(first->op == BP_OP_RMS_NORM ? 1 : 0))
      .arg(bp_tensor_param_f32(first, 0))
      .mem(bw->mem)
      .arg(cl_ulong(offset_of(w, bw)))
      .arg(cl_ulong(row ? 0 : first->ne[0]))
      .mem(bz->mem)
      .arg(cl_ulong(offset_of(second, bz)))
      .run(1, &g, &l, second->name, err);
}

}  // namespace bp::opencl
