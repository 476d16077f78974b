// plan.cpp: liveness planning (see plan.hpp).
//
// The rules, in order, for each step of the request:
//  1. Every leaf root the buffer must hold is placed before the first step
//     and never freed: the caller writes leafs before compute, so no
//     intermediate may ever share their bytes.
//  2. A view produces nothing; it keeps its root alive until the view's own
//     last reader.
//  3. A node takes the memory of source k (k = op_inplace_src) when that
//     source's root is ours, dies at this very step, is not protected, starts
//     where the source starts, is not read through another source of the
//     node, and is at least as large. Otherwise it gets a best-fit range.
//  4. After the node is placed, every root read at this step whose last
//     reader this was goes back to the free list, unless protected (leafs,
//     INPUT, OUTPUT, |keep|, or viewed by an OUTPUT view).
#include "core/alloc/plan.hpp"

#include <algorithm>
#include <unordered_map>

#include "core/alloc/free_list.hpp"
#include "core/errors.hpp"
#include "core/ops_internal.hpp"  // op_inplace_src

namespace bp::core {
namespace {

struct block {
  size_t offset = 0, size = 0;
};

struct planner {
  const alloc_request &req;
  const bp_buffer_type *buft;
  free_list ranges;
  std::unordered_map<const bp_tensor *, int> last_use;  // root -> last step reading it
  std::unordered_set<const bp_tensor *> produced;       // roots some step produces
  std::unordered_set<const bp_tensor *> protect;        // never freed
  std::unordered_map<const bp_tensor *, block> blocks;  // roots holding memory now or before
  std::unordered_set<const bp_tensor *> released;       // roots whose block went back or moved on
  alloc_plan *out;

  planner(const alloc_request &r, const bp_buffer_type *b, alloc_plan *o)
      : req(r), buft(b), ranges(bp_buffer_type_alignment(b)), out(o) {}

  bool mine(const bp_tensor *root) const { return req.mine && req.mine(root); }

  void place(bp_tensor *root) {
    if (blocks.count(root)) return;
    size_t size = ranges.aligned(bp_buffer_type_alloc_size(buft, root));
    block b{ranges.alloc(size), size};
    blocks[root] = b;
    out->placements.emplace_back(root, b.offset);
  }

  void note_use(bp_tensor *t, int step) {
    bp_tensor *root = alloc_root(t);
    auto it = last_use.find(root);
    if (it == last_use.end() || it->second < step) last_use[root] = step;
  }

  // Steps 1-2 of the rules: who is read when, what is protected.
  void scan() {
    for (const alloc_step &s : req.steps) {
      if (!s.t->view_src) produced.insert(s.t);
    }
    for (const bp_tensor *t : req.keep) protect.insert(t);
    for (int i = 0; i < (int)req.steps.size(); ++i) {
      const alloc_step &s = req.steps[(size_t)i];
      if (s.t->view_src) note_use(s.t, i);
      if (s.t->flags & (BP_TENSOR_FLAG_INPUT | BP_TENSOR_FLAG_OUTPUT)) protect.insert(alloc_root(s.t));
      for (bp_tensor *src : s.src)
        if (src) {
          note_use(src, i);
          bp_tensor *root = alloc_root(src);
          if (!produced.count(root)) protect.insert(root);  // a leaf
          if (src->flags & (BP_TENSOR_FLAG_INPUT | BP_TENSOR_FLAG_OUTPUT)) protect.insert(root);
        }
    }
    for (bp_tensor *leaf : req.leafs)
      if (leaf) protect.insert(alloc_root(leaf));
  }

  void place_leafs() {
    // INPUT tensors first (they are written before compute), then the other
    // leafs in the order the graph reads them, then unread graph leafs.
    auto place_if = [&](bp_tensor *t, bool inputs_only) {
      bp_tensor *root = alloc_root(t);
      if (!root || produced.count(root) || !mine(root)) return;
      if (inputs_only && !((t->flags | root->flags) & BP_TENSOR_FLAG_INPUT)) return;
      place(root);
    };
    for (int pass = 0; pass < 2; ++pass) {
      bool inputs_only = pass == 0;
      for (bp_tensor *leaf : req.leafs)
        if (leaf) place_if(leaf, inputs_only);
      for (const alloc_step &s : req.steps) {
        for (bp_tensor *src : s.src)
          if (src) place_if(src, inputs_only);
        if (s.t->view_src) place_if(s.t, inputs_only);
      }
    }
  }

  // Rule 3: the source whose block |t| may take over at step |i|, or null.
  bp_tensor *inplace_parent(const alloc_step &s, int i, size_t need) {
    if (!s.allow_inplace) return nullptr;
    int k = op_inplace_src(s.t);
    if (k < 0 || k >= BP_MAX_SRC || !s.src[k]) return nullptr;
    bp_tensor *p = s.src[k];
    bp_tensor *root = alloc_root(p);
    if (!mine(root) || protect.count(root) || released.count(root)) return nullptr;
    auto b = blocks.find(root);
    if (b == blocks.end() || b->second.size < need) return nullptr;
    if (p != root && p->view_offs != 0) return nullptr;
    auto lu = last_use.find(root);
    if (lu == last_use.end() || lu->second != i) return nullptr;
    for (int j = 0; j < BP_MAX_SRC; ++j)
      if (j != k && s.src[j] && alloc_root(s.src[j]) == root) return nullptr;
    return root;
  }

  void run_step(const alloc_step &s, int i) {
    bp_tensor *t = s.t;
    if (t->view_src) {
      bp_tensor *root = alloc_root(t);
      // Ours, or someone else's memory that this view does not point at
      // yet. A root another allocator has still to place is left to it.
      bool root_has_memory = root->data || root->buffer;
      if (mine(root) || (!t->data && root_has_memory)) out->views.push_back(t);
    } else if (mine(t) && !blocks.count(t)) {
      size_t need = ranges.aligned(bp_buffer_type_alloc_size(buft, t));
      if (bp_tensor *parent = inplace_parent(s, i, need)) {
        blocks[t] = blocks[parent];
        released.insert(parent);
        out->placements.emplace_back(t, blocks[t].offset);
        ++out->n_inplace;
      } else {
        place(t);
      }
    }
    // Rule 4: free what died here.
    bp_tensor *dying[BP_MAX_SRC + 1] = {};
    int n = 0;
    for (bp_tensor *src : s.src)
      if (src) dying[n++] = alloc_root(src);
    if (t->view_src) dying[n++] = alloc_root(t);
    for (int a = 0; a < n; ++a) {
      bp_tensor *root = dying[a];
      if (std::find(dying, dying + a, root) != dying + a) continue;  // read twice
      if (protect.count(root) || released.count(root) || !blocks.count(root)) continue;
      if (last_use[root] != i) continue;
      ranges.release(blocks[root].offset, blocks[root].size);
      released.insert(root);
    }
  }
};

}  // namespace

bp_status plan_memory(const alloc_request &req, const bp_buffer_type *buft, alloc_plan *out) {
  *out = alloc_plan{};
  for (size_t i = 0; i < req.steps.size(); ++i)
    if (!req.steps[i].t) return set_errorf(BP_ERR_INVALID_ARGUMENT, "graph allocator: node %zu is NULL", i);
  planner p(req, buft, out);
  p.scan();
  p.place_leafs();
  for (int i = 0; i < (int)req.steps.size(); ++i) p.run_step(req.steps[(size_t)i], i);
  out->size = p.ranges.peak();
  return BP_OK;
}

}  // namespace bp::core
