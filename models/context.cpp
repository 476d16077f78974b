// context.cpp: KV cache allocation, graph reuse and evaluation.
#include "context.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "report.hpp"

namespace bp::model {
namespace {

// Graphs kept per context: a prompt shape, the decode shape and a few more.
constexpr size_t k_max_graphs = 4;

bp_status alloc_kv(bp_model_context *c) {
  bp_model *m = c->model;
  const hparams &hp = m->hp;
  const size_t nb = c->backends.size();
  c->kv_ctx.assign(nb, nullptr);
  c->kv_buf.assign(nb, nullptr);
  c->kv.k.assign(hp.n_layer, nullptr);
  c->kv.v.assign(hp.n_layer, nullptr);
  const int64_t n = static_cast<int64_t>(c->kv.n_ctx) * hp.n_embd_kv();
  for (int il = 0; il < hp.n_layer; ++il) {
    const size_t b = m->w.layers[il].backend;
    if (!c->kv_ctx[b] && !(c->kv_ctx[b] = bp_context_new(0)))
      return fail(BP_ERR_OUT_OF_HOST_MEMORY, "creating the KV cache's tensor context");
    const std::string name = "cache.k." + std::to_string(il), vname = "cache.v." + std::to_string(il);
    c->kv.k[il] = bp_tensor_set_name(bp_tensor_new_1d(c->kv_ctx[b], c->kv.type, n), name.c_str());
    c->kv.v[il] = bp_tensor_set_name(bp_tensor_new_1d(c->kv_ctx[b], c->kv.type, n), vname.c_str());
    if (!c->kv.k[il] || !c->kv.v[il]) return fail(bp_last_status(), std::string("KV cache: ") + bp_last_error());
  }
  for (size_t b = 0; b < nb; ++b) {
    if (!c->kv_ctx[b]) continue;
    if (bp_context_alloc_tensors(c->kv_ctx[b], c->backends[b], &c->kv_buf[b]) != BP_OK)
      return fail(bp_last_status(), "allocating the KV cache (" + std::to_string(c->kv.n_ctx) + " positions) on " +
                                        m->backend_names[b] + ": " + bp_last_error() +
                                        " (a smaller n_ctx or kv_f32 = false needs less)");
    // Positions never written are read (and masked): zeros keep them finite,
    // since a masked weight of 0 times a NaN would still be NaN.
    if (bp_buffer_clear(c->kv_buf[b], 0) != BP_OK)
      return fail(bp_last_status(), std::string("clearing the KV cache: ") + bp_last_error());
  }
  return BP_OK;
}

// Whether |be| runs the fused layout's two nodes for this model's shapes,
// the ATTENTION and the cache write (SET_ROWS): asked of nodes built for the
// question (one token, two cached positions).
bool runs_fused_attention(bp_backend *be, const hparams &hp, bp_type kv_type) {
  bp_context *x = bp_context_new(0);
  if (!x) return false;
  bp_tensor *q = bp_tensor_new_3d(x, BP_TYPE_F32, hp.head_dim, 1, hp.n_head);
  bp_tensor *k = bp_tensor_new_3d(x, kv_type, hp.head_dim, 2, hp.n_head_kv);
  bp_tensor *v = bp_tensor_new_3d(x, kv_type, hp.head_dim, 2, hp.n_head_kv);
  bp_tensor *mask = bp_tensor_new_2d(x, BP_TYPE_F32, 2, 1);
  bp_tensor *attention = q && k && v && mask ? bp_attention(x, q, k, v, mask, 1.0f) : nullptr;
  bp_tensor *cache = bp_tensor_new_2d(x, kv_type, hp.n_embd_kv(), 2);
  bp_tensor *row = bp_tensor_new_2d(x, BP_TYPE_F32, hp.n_embd_kv(), 1);
  bp_tensor *pos = bp_tensor_new_1d(x, BP_TYPE_I32, 1);
  bp_tensor *write = cache && row && pos ? bp_set_rows(x, cache, row, pos) : nullptr;
  const bool ok = attention && write && bp_backend_supports_op(be, attention) && bp_backend_supports_op(be, write);
  bp_context_free(x);
  return ok;
}

// The fused op unless the caller asked otherwise or a backend that holds a
// layer (and so its cache) lacks it: the scheduler would then move every
// layer's cache to another device each step.
bool pick_fused_attention(const bp_model_context *c, const bp_model_context_options &opt) {
  if (opt.unfused_attention) return false;
  const bp_model *m = c->model;
  std::vector<bool> asked(c->backends.size(), false);
  for (const layer_weights &L : m->w.layers) {
    if (asked[L.backend]) continue;
    asked[L.backend] = true;
    if (!runs_fused_attention(c->backends[L.backend], m->hp, c->kv.type)) return false;
  }
  return true;
}

bp_status open_backends(bp_model_context *c) {
  const bp_model *m = c->model;
  std::vector<bp_backend *> buf(m->backends.size() + 1, nullptr);
  size_t n = 0;
  if (bp_backend_new_list(m->devices.c_str(), buf.data(), buf.size(), &n) != BP_OK)
    return fail(bp_last_status(), "opening the context's backends on \"" + m->devices + "\": " + bp_last_error());
  c->backends.assign(buf.begin(), buf.begin() + n);
  if (n != m->backends.size())
    return failf(BP_ERR_UNAVAILABLE, "the device list \"%s\" gave %zu backends for the context but %zu for the model",
                 m->devices.c_str(), n, m->backends.size());
  return BP_OK;
}

forward_graph *find_graph(bp_model_context *c, const batch_shape &s) {
  for (size_t i = 0; i < c->graphs.size(); ++i) {
    const batch_shape &g = c->graphs[i].shape;
    if (g.n_tokens == s.n_tokens && g.n_kv == s.n_kv && g.all_logits == s.all_logits && g.p0 == s.p0) {
      std::rotate(c->graphs.begin() + i, c->graphs.begin() + i + 1, c->graphs.end());
      return &c->graphs.back();
    }
  }
  return nullptr;
}

}  // namespace

void context_destroy(bp_model_context *c) {
  if (!c) return;
  for (forward_graph &g : c->graphs) free_forward(&g);
  bp_sched_free(c->sched);
  for (bp_buffer *b : c->kv_buf) bp_buffer_free(b);
  for (bp_context *x : c->kv_ctx) bp_context_free(x);
  for (bp_backend *b : c->backends) bp_backend_free(b);
  if (c->model) c->model->n_contexts.fetch_sub(1);
  c->magic = 0;
  delete c;
}

bp_status context_create(bp_model *m, const bp_model_context_options &opt, bp_model_context **out) {
  auto *c = new (std::nothrow) bp_model_context;
  if (!c) return fail(BP_ERR_OUT_OF_HOST_MEMORY, "allocating a model context");
  c->magic = k_context_magic;
  c->model = m;
  m->n_contexts.fetch_add(1);
  c->kv.n_ctx = opt.n_ctx ? opt.n_ctx : static_cast<uint32_t>(std::min(m->hp.n_ctx_train, 4096));
  c->n_batch = opt.n_batch ? opt.n_batch : 512;
  c->kv.type = opt.kv_f32 ? BP_TYPE_F32 : BP_TYPE_F16;
  bp_status st = open_backends(c);
  if (st == BP_OK) {
    c->kv.fused = pick_fused_attention(c, opt);
    st = alloc_kv(c);
  }
  if (st == BP_OK) {
    c->sched = bp_sched_new(c->backends.data(), nullptr, c->backends.size(), graph_capacity(m->hp) + 16, false);
    if (!c->sched) st = fail(bp_last_status(), std::string("creating the scheduler: ") + bp_last_error());
  }
  if (st != BP_OK) return fail_after(st, [&] { context_destroy(c); });
  *out = c;
  return BP_OK;
}

namespace {

bp_status eval_batch(bp_model_context *c, const int32_t *tokens, uint32_t T, bool all_logits) {
  const hparams &hp = c->model->hp;
  batch_shape s;
  s.n_tokens = T;
  const uint32_t p0 = c->position;
  // A fused cache is written at the positions the graph reads from inp.pos,
  // so one graph serves every step of a shape: decode steps reuse theirs
  // until n_kv grows. Otherwise the cache slot is part of the graph, so a
  // decode step's graph is new each token (cheap to build; the scheduler's
  // buffers are kept) and prompts reuse theirs on rewind.
  s.p0 = c->kv.fused ? 0 : p0;
  const uint32_t end = p0 + T;
  s.n_kv = std::min(c->kv.n_ctx, (end + k_kv_pad - 1) / k_kv_pad * k_kv_pad);
  s.all_logits = all_logits;
  forward_graph *g = find_graph(c, s);
  if (!g) {
    if (c->graphs.size() >= k_max_graphs) {
      if (c->allocated == &c->graphs.front()) c->allocated = nullptr;
      free_forward(&c->graphs.front());
      c->graphs.erase(c->graphs.begin());
      c->allocated = nullptr;  // addresses moved
    }
    forward_graph fg;
    bp_status st = build_forward(hp, c->model->w, c->kv, s, &fg);
    if (st != BP_OK) return st;
    ++c->graph_builds;
    c->graphs.push_back(fg);
    c->allocated = nullptr;
    g = &c->graphs.back();
  }
  if (c->allocated != g) {
    bp_sched_reset(c->sched);
    if (bp_sched_alloc_graph(c->sched, g->graph) != BP_OK)
      return fail(bp_last_status(), std::string("scheduling the model's graph: ") + bp_last_error());
    ++c->graph_plans;
    c->allocated = g;
  }
  c->host_pos.resize(T);
  for (uint32_t i = 0; i < T; ++i) c->host_pos[i] = static_cast<int32_t>(p0 + i);
  c->host_mask.assign(static_cast<size_t>(s.n_kv) * T, -std::numeric_limits<float>::infinity());
  for (uint32_t i = 0; i < T; ++i) {
    float *row = c->host_mask.data() + static_cast<size_t>(i) * s.n_kv;
    std::fill(row, row + p0 + i + 1, 0.0f);  // causal: every earlier position and itself
  }
  bp_status st = BP_OK;
  if ((st = bp_tensor_set(g->ids, tokens, 0, T * sizeof(int32_t))) ||
      (st = bp_tensor_set(g->pos, c->host_pos.data(), 0, T * sizeof(int32_t))) ||
      (st = bp_tensor_set(g->mask, c->host_mask.data(), 0, c->host_mask.size() * sizeof(float)))) {
    return fail(st, std::string("setting the graph's inputs: ") + bp_last_error());
  }
  if (bp_sched_graph_compute(c->sched, g->graph) != BP_OK || bp_sched_synchronize(c->sched) != BP_OK)
    return fail(bp_last_status(), std::string("computing the model's graph: ") + bp_last_error());
  const size_t rows = static_cast<size_t>(g->logits->ne[1]);
  const size_t row_floats = static_cast<size_t>(hp.n_vocab);
  const size_t at = c->logit_rows * row_floats;
  c->logits.resize(at + rows * row_floats);
  if (bp_tensor_get(g->logits, c->logits.data() + at, 0, rows * row_floats * sizeof(float)) != BP_OK)
    return fail(bp_last_status(), std::string("reading the logits: ") + bp_last_error());
  c->logit_rows += rows;
  c->position = end;
  return BP_OK;
}

}  // namespace

bp_status context_eval(bp_model_context *c, const int32_t *tokens, size_t n, bool all_logits) {
  const hparams &hp = c->model->hp;
  if (n == 0) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_context_eval: n = 0: pass at least one token");
  if (n > c->kv.n_ctx - c->position)
    return failf(BP_ERR_RESOURCE_EXHAUSTED,
                 "bp_model_context_eval: %zu tokens do not fit: the context holds %u positions and %u are used, so "
                 "%u are left (create the context with a larger n_ctx, or bp_model_context_rewind)",
                 n, c->kv.n_ctx, c->position, c->kv.n_ctx - c->position);
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= hp.n_vocab)
      return failf(BP_ERR_INVALID_ARGUMENT, "bp_model_context_eval: tokens[%zu] = %d is not in the vocabulary (0..%d)",
                   i, tokens[i], hp.n_vocab - 1);
  }
  c->logits.clear();
  c->logit_rows = 0;
  for (size_t done = 0; done < n;) {
    const uint32_t T = static_cast<uint32_t>(std::min<size_t>(c->n_batch, n - done));
    const bool last = done + T == n;
    bp_status st = eval_batch(c, tokens + done, T, all_logits);
    if (st != BP_OK) {
      c->logits.clear();
      c->logit_rows = 0;
      return st;
    }
    if (!all_logits && !last) {
      c->logits.clear();  // only the last batch's last row is kept
      c->logit_rows = 0;
    }
    done += T;
  }
  return BP_OK;
}

}  // namespace bp::model
