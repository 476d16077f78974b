// context.cpp: KV cache allocation, graph reuse and evaluation of a planned
// batch (batch.hpp), one graph per n_batch tokens.
#include "context.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "batch.hpp"
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
    if (c->graphs[i].shape == s) {
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
  c->cells.reset(c->kv.n_ctx, opt.n_seq ? opt.n_seq : 1);
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

// The rows of logits |g| computes for tokens [at, at + T) of |p|, and the
// shape that computes them: every token's, the last one's, or those
// inp.out_ids picks. A graph with none wanted computes the last row anyway
// (and it is dropped), so a long prompt's graphs share one shape.
void choose_rows(const batch_plan &p, size_t at, uint32_t T, batch_shape *s, std::vector<int32_t> *rows) {
  rows->clear();
  for (uint32_t i = 0; i < T; ++i)
    if (p.keep[at + i]) rows->push_back(static_cast<int32_t>(i));
  s->picked = false;
  if (rows->size() == T) {
    s->n_out = T;
  } else if (rows->empty() || (rows->size() == 1 && rows->front() == static_cast<int32_t>(T - 1))) {
    s->n_out = 1;
  } else {
    s->n_out = static_cast<uint32_t>(rows->size());
    s->picked = true;
  }
}

forward_graph *graph_for(bp_model_context *c, const batch_shape &s) {
  if (forward_graph *g = find_graph(c, s)) return g;
  if (c->graphs.size() >= k_max_graphs) {
    if (c->allocated == c->graphs.front().graph) c->allocated = nullptr;
    free_forward(&c->graphs.front());
    c->graphs.erase(c->graphs.begin());
  }
  forward_graph fg;
  if (build_forward(c->model->hp, c->model->w, c->kv, s, &fg) != BP_OK) return nullptr;
  ++c->graph_builds;
  c->graphs.push_back(fg);
  return &c->graphs.back();
}

// Runs tokens [at, at + T) of |p| as one graph. Their cells are taken
// first, since the mask must let each token see itself and the tokens of
// its sequence before it in the same graph; a graph that fails gives them
// back.
bp_status eval_graph(bp_model_context *c, const batch_plan &p, size_t at, uint32_t T) {
  const hparams &hp = c->model->hp;
  const uint32_t *cells = p.cell.data() + at;
  for (uint32_t i = 0; i < T; ++i) c->cells.put(cells[i], p.seq[at + i], p.pos[at + i]);
  auto give_back = [&] { c->cells.release(cells, T); };
  batch_shape s;
  s.n_tokens = T;
  // A fused cache is written at the cells the graph reads from inp.cells,
  // so one graph serves every step of a shape: decode steps reuse theirs
  // until n_kv grows. Otherwise the first cell is part of the graph, so a
  // decode step's graph is new each token (cheap to build; the scheduler's
  // buffers are kept) and prompts reuse theirs on rewind.
  s.c0 = c->kv.fused ? 0 : cells[0];
  s.n_kv = std::min(c->kv.n_ctx, (c->cells.end() + k_kv_pad - 1) / k_kv_pad * k_kv_pad);
  std::vector<int32_t> &rows = c->host_out;
  choose_rows(p, at, T, &s, &rows);
  forward_graph *g = graph_for(c, s);
  if (!g) return fail_after(bp_last_status(), give_back);
  if (c->allocated != g->graph) {
    bp_sched_reset(c->sched);
    if (bp_sched_alloc_graph(c->sched, g->graph) != BP_OK) {
      const bp_status st = fail(bp_last_status(), std::string("scheduling the model's graph: ") + bp_last_error());
      return fail_after(st, give_back);
    }
    ++c->graph_plans;
    c->allocated = g->graph;
  }
  c->host_mask.resize(static_cast<size_t>(s.n_kv) * T);
  c->cells.fill_mask(p.seq.data() + at, p.pos.data() + at, T, s.n_kv, c->host_mask.data());
  c->host_cells.assign(cells, cells + T);
  bp_status st = BP_OK;
  if ((st = bp_tensor_set(g->ids, p.tokens + at, 0, T * sizeof(int32_t))) ||
      (st = bp_tensor_set(g->pos, p.pos.data() + at, 0, T * sizeof(int32_t))) ||
      (g->cells && (st = bp_tensor_set(g->cells, c->host_cells.data(), 0, T * sizeof(int32_t)))) ||
      (g->out_ids && (st = bp_tensor_set(g->out_ids, rows.data(), 0, rows.size() * sizeof(int32_t)))) ||
      (st = bp_tensor_set(g->mask, c->host_mask.data(), 0, c->host_mask.size() * sizeof(float)))) {
    return fail_after(fail(st, std::string("setting the graph's inputs: ") + bp_last_error()), give_back);
  }
  if (bp_sched_graph_compute(c->sched, g->graph) != BP_OK || bp_sched_synchronize(c->sched) != BP_OK)
    return fail_after(fail(bp_last_status(), std::string("computing the model's graph: ") + bp_last_error()),
                      give_back);
  if (rows.empty()) return BP_OK;  // the last row was computed only to keep one shape
  const size_t n_rows = static_cast<size_t>(g->logits->ne[1]);
  const size_t row_floats = static_cast<size_t>(hp.n_vocab);
  const size_t first = c->logit_rows;
  c->logits.resize((first + n_rows) * row_floats);
  if (bp_tensor_get(g->logits, c->logits.data() + first * row_floats, 0, n_rows * row_floats * sizeof(float)) != BP_OK)
    return fail(bp_last_status(), std::string("reading the logits: ") + bp_last_error());
  for (size_t r = 0; r < n_rows; ++r) c->logit_row[at + rows[r]] = static_cast<int32_t>(first + r);
  c->logit_rows += n_rows;
  return BP_OK;
}

bp_status run_plan(bp_model_context *c, const batch_plan &p) {
  forget_logits(c);
  c->logit_row.assign(p.n, -1);
  size_t at = 0;
  for (uint32_t T : p.sizes) {
    if (bp_status st = eval_graph(c, p, at, T)) {
      forget_logits(c);
      return st;
    }
    at += T;
  }
  return BP_OK;
}

}  // namespace

void forget_logits(bp_model_context *c) {
  c->logits.clear();
  c->logit_rows = 0;
  c->logit_row.clear();
}

bp_status context_eval(bp_model_context *c, const int32_t *tokens, size_t n, bool all_logits) {
  bp_model_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = n;
  b.tokens = tokens;
  batch_plan p;
  if (bp_status st =
          plan_batch(c, "bp_model_context_eval", b, all_logits ? keep_logits::all : keep_logits::last_of_each, &p))
    return st;
  return run_plan(c, p);
}

bp_status context_eval_batch(bp_model_context *c, const bp_model_batch &b) {
  batch_plan p;
  if (bp_status st = plan_batch(c, "bp_model_context_eval_batch", b, keep_logits::listed, &p)) return st;
  return run_plan(c, p);
}

}  // namespace bp::model
