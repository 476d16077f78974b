// plan_attention.cpp: the vulkan dispatches of ATTENTION (plan.hpp): one
// workgroup of kAttentionGroup invocations per query row (attention.comp),
// or of 128 per tile of 8 query rows of a head (attention_tile.comp), or
// several per row over runs of the keys with their partials merged by a
// second dispatch (attention.comp's SPLITS, attention_merge.comp); v and
// the mask at bindings 3 and 4 and their strides in the push constants the
// dense output's own would take.
#include <algorithm>
#include <utility>

#include "plan.hpp"

namespace bp::vk {

bool attention_supported(const device_state *dev, const bp_tensor *node) {
  const bp_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3];
  if (!dev->subgroup_arith || !k || !v) return false;
  if (node->type != BP_TYPE_F32 || q->type != BP_TYPE_F32 || !is_float(k->type) || k->type != v->type) return false;
  if (!bp_tensor_rows_contiguous(q) || !bp_tensor_rows_contiguous(k) || !bp_tensor_rows_contiguous(v) ||
      !bp_tensor_is_contiguous(node))
    return false;
  if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3] ||
      q->ne[2] % k->ne[2] != 0 || q->ne[3] % k->ne[3] != 0 || v->ne[0] > kAttentionGroup * kAttentionSlots)
    return false;
  if (node->ne[0] != v->ne[0] || node->ne[1] != q->ne[2] || node->ne[2] != q->ne[1] || node->ne[3] != q->ne[3])
    return false;
  return !mask || (mask->type == BP_TYPE_F32 && bp_tensor_rows_contiguous(mask) && mask->ne[0] == k->ne[1] &&
                   mask->ne[1] >= q->ne[1] && q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0);
}

namespace {

// attention_tile.comp's tile (BQ query rows) and limits (MAX_D, WG * ACC_N).
constexpr int64_t kTileRows = 8, kTileMaxD = 128, kTileMaxDv = 256;

// Whether the tile shader runs: attention=tile, or auto on a GPU for a
// prompt (more than one query row: a decode step's single row would leave
// 7 of the tile's 8 empty); and the head sizes fit its shared memory.
bool attention_tile_applies(const planner &p) {
  const bp_tensor *q = p.node->src[0], *v = p.node->src[2];
  if (q->ne[0] > kTileMaxD || v->ne[0] > kTileMaxDv) return false;
  const attention_mode mode = p.be->opt.attention;
  return mode == attention_mode::tile ||
         (mode == attention_mode::automatic && p.dev()->type != BP_DEVICE_TYPE_CPU && q->ne[1] > 1);
}

// Split attention: the backend's scratch buffer for the partials, and the
// most splits (one workgroup per run of at least one key block each).
constexpr size_t kScratchBytes = size_t{4} << 20;
constexpr int64_t kMaxSplits = 16;

// How many workgroups share a row (1: no split). attention=split: as many
// as there are key blocks, up to kMaxSplits; auto on a GPU: a decode step
// (one query row) over 512 keys or more, a run of 256 keys or more each. A
// split is dropped where the partials would not fit the scratch buffer.
uint32_t attention_splits(const planner &p) {
  const bp_tensor *q = p.node->src[0], *k = p.node->src[1], *v = p.node->src[2];
  const int64_t N = k->ne[1], blocks = (N + kAttentionGroup - 1) / kAttentionGroup;
  const attention_mode mode = p.be->opt.attention;
  int64_t splits = 1;
  if (mode == attention_mode::split)
    splits = std::min(blocks, kMaxSplits);
  else if (mode == attention_mode::automatic && p.dev()->type != BP_DEVICE_TYPE_CPU && q->ne[1] == 1 && N >= 512)
    splits = std::min(N / 256, kMaxSplits);
  const int64_t rows = q->ne[1] * q->ne[2] * q->ne[3];
  if (splits < 2 || static_cast<size_t>(rows * splits * (v->ne[0] + 2)) * sizeof(float) > kScratchBytes) return 1;
  return static_cast<uint32_t>(splits);
}

// The merge of |splits| partials per row from the scratch buffer into the
// node's output (attention_merge.comp).
bp_status plan_attention_merge(const planner &p, uint32_t splits, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *v = n->src[2];
  dispatch d;
  d.variant = "attention_merge";
  d.layout = layout_kind::ssbo;
  d.bind[0] = binding{p.be->scratch, 0, p.be->scratch->vk_size, VK_NULL_HANDLE};
  if (bp_status st = bind_ssbo(p, n, &d.bind[2], &d.pc.d_off); st != BP_OK) return st;
  d.reads.push_back(byte_range{p.be->scratch->buffer, 0, p.be->scratch->vk_size});
  add_range(d.writes, n);
  d.pc.d_ne[0] = static_cast<uint32_t>(v->ne[0]);
  d.pc.p[0] = splits;
  d.pc.n = static_cast<uint32_t>(bp_tensor_nrows(n->src[0]));
  grid_for(d, d.pc.n, 1);
  out.push_back(std::move(d));
  return BP_OK;
}

}  // namespace

bp_status plan_attention(const planner &p, std::vector<dispatch> &out) {
  const bp_tensor *n = p.node, *q = n->src[0], *k = n->src[1], *v = n->src[2], *mask = n->src[3];
  const bool tile = attention_tile_applies(p);
  const uint32_t splits = tile ? 1 : attention_splits(p);
  if (splits > 1 && !p.be->scratch)
    if (bp_status st = buffer_create(p.dev(), kScratchBytes, false, &p.be->scratch, p.err); st != BP_OK) return st;
  const bool f16 = k->type == BP_TYPE_F16;
  dispatch d;
  d.spec[0] = static_cast<uint32_t>(kAttentionGroup);
  d.spec[1] = 1;  // MULTI: the reductions combine subgroups through shared memory
  d.spec[2] = mask ? 1u : 0u;
  d.n_spec = 3;
  const char *variant =
      tile ? (f16 ? "attention_tile_f16" : "attention_tile_f32") : (f16 ? "attention_f16" : "attention_f32");
  if (bp_status st = general(p, variant, n, q, k, d); st != BP_OK) return st;
  const size_t kv_size = bp_type_size(v->type);
  if (bp_status st = bind_ssbo(p, v, &d.bind[3], &d.pc.p[1]); st != BP_OK) return st;
  add_range(d.reads, v);
  d.pc.d_ne[0] = static_cast<uint32_t>(v->ne[0]);
  for (int i = 1; i < 4; ++i) d.pc.d_ne[i] = static_cast<uint32_t>(v->nb[i] / kv_size);
  d.pc.p[2] = d.pc.p[3] = 1;
  for (int i = 0; i < 4; ++i) d.pc.d_nb[i] = 0;
  if (mask) {
    if (bp_status st = bind_ssbo(p, mask, &d.bind[4], &d.pc.d_nb[3]); st != BP_OK) return st;
    add_range(d.reads, mask);
    for (int i = 1; i < 4; ++i) d.pc.d_nb[i - 1] = static_cast<uint32_t>(mask->nb[i] / sizeof(float));
    d.pc.p[2] = static_cast<uint32_t>(mask->ne[2]);
    d.pc.p[3] = static_cast<uint32_t>(mask->ne[3]);
  }
  copy_params(d, n, 0, 1);
  // Workgroups: one per query row, or per tile of rows of one head, or
  // |splits| per row.
  d.pc.n =
      static_cast<uint32_t>(tile ? q->ne[2] * ((q->ne[1] + kTileRows - 1) / kTileRows) * q->ne[3] : bp_tensor_nrows(q));
  grid_for(d, static_cast<uint64_t>(d.pc.n) * splits, 1);
  if (splits > 1) {
    // The partials go to the scratch buffer instead of the output.
    d.spec[3] = splits;
    d.n_spec = 4;
    d.bind[2] = binding{p.be->scratch, 0, p.be->scratch->vk_size, VK_NULL_HANDLE};
    d.writes.clear();
    d.writes.push_back(byte_range{p.be->scratch->buffer, 0, p.be->scratch->vk_size});
  }
  out.push_back(std::move(d));
  return splits > 1 ? plan_attention_merge(p, splits, out) : BP_OK;
}

}  // namespace bp::vk
