// ops_attention.cpp: ATTENTION launches (attention.cl): a work-group per
// query row (attention), a tile of query rows per work-group
// (attention_tile), or several work-groups per row over runs of the keys
// whose partials a second launch merges (attention_split, attention_merge),
// as backend_options::attention and the shape choose.
#include <CL/cl.h>

#include <algorithm>
#include <string>

#include "backend.hpp"

namespace bp::opencl {
namespace {

// One work-group of 64 per query row (attention.cl); each work-item keeps
// 4 output channels, so value rows of up to 256.
constexpr int64_t k_attention_group = 64, k_attention_max_dv = 256;
// attention_tile: 8 query rows of a head per work-group of 128, head sizes
// D <= 128 and Dv <= 256 (its TQ, TWG, TMAX_D, TWG * TACC).
constexpr int64_t k_tile_rows = 8, k_tile_group = 128, k_tile_max_d = 128;
// attention_split: the backend's scratch buffer for the partials (Dv + 2
// floats per row and run: a decode step of 64 heads of 128 in 16 runs takes
// 0.5 MiB), and the most runs per row.
constexpr size_t k_scratch_bytes = size_t{4} << 20;
constexpr int64_t k_max_splits = 16;

bool is_float(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16; }

// Whether attention_tile runs (backend_options::attention): forced, or on
// a GPU device for a prompt (a decode step's single row would leave 7 of
// the tile's 8 empty); and the head sizes fit its local memory.
bool attention_tile_applies(const backend_ctx *be, const bp_tensor *t) {
  const bp_tensor *q = t->src[0];
  if (q->ne[0] > k_tile_max_d) return false;
  return be->attention == attention_mode::tile ||
         (be->attention == attention_mode::automatic && be->dev->type != BP_DEVICE_TYPE_CPU && q->ne[1] > 1);
}

// How many work-groups share a query row (1: no split). attention=split: as
// many as there are key blocks, up to k_max_splits; auto on a GPU: a decode
// step (one query row) over 512 keys or more, runs of 256 keys or more, as
// vulkan does: the step's few rows would otherwise leave most of the GPU's
// compute units idle while each group walks the whole cache. Dropped where
// the partials would not fit the scratch buffer.
int64_t attention_splits(const backend_ctx *be, const bp_tensor *t) {
  const bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2];
  const int64_t N = k->ne[1], blocks = (N + k_attention_group - 1) / k_attention_group;
  int64_t splits = 1;
  if (be->attention == attention_mode::split)
    splits = std::min(blocks, k_max_splits);
  else if (be->attention == attention_mode::automatic && be->dev->type != BP_DEVICE_TYPE_CPU && q->ne[1] == 1 &&
           N >= 512)
    splits = std::min(N / 256, k_max_splits);
  const int64_t rows = q->ne[1] * q->ne[2] * q->ne[3];
  if (splits < 2 || static_cast<size_t>(rows * splits * (v->ne[0] + 2)) * sizeof(float) > k_scratch_bytes) return 1;
  return splits;
}

bp_status ensure_scratch(backend_ctx *be, bp_error *err) {
  if (be->scratch) return BP_OK;
  cl_int rc = CL_SUCCESS;
  be->scratch = clCreateBuffer(be->dev->context, CL_MEM_READ_WRITE, k_scratch_bytes, nullptr, &rc);
  if (!be->scratch || rc != CL_SUCCESS) {
    be->scratch = nullptr;
    return device_fail(be->dev, rc, cl_site::setup, "allocating the attention scratch buffer", err);
  }
  return BP_OK;
}

// |splits| work-groups per row write partials to the scratch buffer, then
// a work-group per row merges them into the output.
bp_status attention_split_run(backend_ctx *be, const bp_tensor *t, const std::string &opts, int64_t splits,
                              bp_error *err) {
  const bp_tensor *mask = t->src[3];
  if (bp_status s = ensure_scratch(be, err); s != BP_OK) return s;
  if (!be->split_logged) {
    be->split_logged = true;
    bp_host_logf(be->dev->plugin->host, BP_LOG_DEBUG, "split ATTENTION '%s' over %d runs of the keys", t->name,
                 static_cast<int>(splits));
  }
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "attention", opts, "attention_split", &k, err); s != BP_OK) return s;
  const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
  size_t g = static_cast<size_t>(rows * splits * k_attention_group), l = k_attention_group;
  launch part(be, k);
  part.tensor(t->src[0]).tensor(t->src[1]).tensor(t->src[2]);
  if (mask) part.tensor(mask);
  if (bp_status s =
          part.mem(be->scratch).arg(bp_tensor_param_f32(t, 0)).arg(cl_int(splits)).run(1, &g, &l, t->name, err);
      s != BP_OK)
    return s;
  if (bp_status s = get_kernel(be, "attention", opts, "attention_merge", &k, err); s != BP_OK) return s;
  g = static_cast<size_t>(rows * k_attention_group);
  return launch(be, k).mem(be->scratch).tensor(t).arg(cl_int(splits)).run(1, &g, &l, t->name, err);
}

}  // namespace

bool attention_supported(const bp_tensor *t) {
  const bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *mask = t->src[3];
  if (t->type != BP_TYPE_F32 || q->type != BP_TYPE_F32 || !is_float(k->type) || k->type != v->type) return false;
  if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || q->ne[2] % k->ne[2] != 0 || q->ne[3] % k->ne[3] != 0)
    return false;
  if (t->ne[0] != v->ne[0] || t->ne[1] != q->ne[2] || t->ne[2] != q->ne[1] || t->ne[3] != q->ne[3]) return false;
  if (v->ne[0] > k_attention_max_dv || !bp_tensor_is_contiguous(t)) return false;
  return !mask || (mask->type == BP_TYPE_F32 && mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] &&
                   q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0);
}

bp_status attention_run(backend_ctx *be, const bp_tensor *t, bp_error *err) {
  const bp_tensor *q = t->src[0], *mask = t->src[3];
  std::string opts = "-DKV_TYPE=" + std::to_string(type_code(t->src[1]->type));
  if (mask) opts += " -DHAS_MASK=1";
  const bool tile = attention_tile_applies(be, t);
  if (!tile)
    if (const int64_t splits = attention_splits(be, t); splits > 1)
      return attention_split_run(be, t, opts, splits, err);
  cl_kernel k = nullptr;
  if (bp_status s = get_kernel(be, "attention", opts, tile ? "attention_tile" : "attention", &k, err); s != BP_OK)
    return s;
  // Work-groups: one per query row, or per tile of rows of one head.
  const int64_t groups =
      tile ? q->ne[2] * ((q->ne[1] + k_tile_rows - 1) / k_tile_rows) * q->ne[3] : t->ne[1] * t->ne[2] * t->ne[3];
  const int64_t local = tile ? k_tile_group : k_attention_group;
  size_t g[1] = {static_cast<size_t>(groups * local)}, l[1] = {static_cast<size_t>(local)};
  launch l_att(be, k);
  l_att.tensor(t->src[0]).tensor(t->src[1]).tensor(t->src[2]);
  if (mask) l_att.tensor(mask);
  return l_att.tensor(t).arg(bp_tensor_param_f32(t, 0)).run(1, g, l, t->name, err);
}

}  // namespace bp::opencl
