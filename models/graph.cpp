// graph.cpp: build_forward, the llama / qwen2 / qwen3 decoder.
//
// One layer, x being the residual stream [n_embd, T]:
//   h = rms_norm(x) * attn_norm
//   q, k, v = Wq h (+bq), Wk h (+bk), Wv h (+bv)      qwen2 has the biases
//   q, k = rms_norm_per_head(q) * q_norm, (k) * k_norm  qwen3 only
//   q, k = rope(q, pos), rope(k, pos)                   each token's position; NORMAL for llama, NEOX for qwen
//   the cache takes k and v at each token's cell
//   x += Wo softmax(q K^T / sqrt(d) + mask) V         K, V: cells 0 .. n_kv-1; the mask: kv_cells::fill_mask;
//                                                      one ATTENTION node where supported
//   h = rms_norm(x) * ffn_norm
//   x += Wdown (silu(Wgate h) * Wup h)
// then logits = Wout (rms_norm(x[rows]) * output_norm), rows = every token,
// the last one, or the ones inp.out_ids picks.
//
// The tokens of a batch may belong to several sequences: nothing but the
// mask tells them apart, so T tokens of T sequences are one graph whose
// products have T columns.
#include "graph.hpp"

#include <cmath>
#include <string>

#include "report.hpp"

namespace bp::model {

size_t graph_capacity(const hparams &hp) { return 64 * static_cast<size_t>(hp.n_layer) + 64; }

void free_forward(forward_graph *g) {
  bp_graph_free(g->graph);
  bp_context_free(g->ctx);
  *g = forward_graph{};
}

namespace {

bp_tensor *rope(bp_context *c, const hparams &hp, const model_weights &w, bp_tensor *t, bp_tensor *pos) {
  return bp_rope_ext(c, t, pos, w.rope_freqs, hp.n_rot, hp.rope_mode, hp.rope_base, hp.rope_scale);
}

}  // namespace

bp_status build_forward(const hparams &hp, const model_weights &w, const kv_cache &kv, const batch_shape &shape,
                        forward_graph *g) {
  *g = forward_graph{};
  g->shape = shape;
  g->ctx = bp_context_new(0);
  if (!g->ctx) return fail(BP_ERR_OUT_OF_HOST_MEMORY, "creating the graph's tensor context");
  g->graph = bp_graph_new(g->ctx, graph_capacity(hp));
  if (!g->graph) return fail_after(bp_last_status(), [&] { free_forward(g); });
  bp_context *c = g->ctx;
  const int64_t T = shape.n_tokens, n_kv = shape.n_kv, hd = hp.head_dim, H = hp.n_head, Hkv = hp.n_head_kv;
  const int64_t E = hp.n_embd, Ekv = hp.n_embd_kv();
  const size_t kv_es = bp_type_size(kv.type);

  g->ids =
      bp_tensor_set_flags(bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, T), "inp.ids"), BP_TENSOR_FLAG_INPUT);
  g->pos =
      bp_tensor_set_flags(bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, T), "inp.pos"), BP_TENSOR_FLAG_INPUT);
  if (kv.fused) {
    g->cells =
        bp_tensor_set_flags(bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, T), "inp.cells"), BP_TENSOR_FLAG_INPUT);
  }
  g->mask = bp_tensor_set_flags(bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, n_kv, T), "inp.mask"),
                                BP_TENSOR_FLAG_INPUT);
  if (shape.picked) {
    g->out_ids = bp_tensor_set_flags(bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, shape.n_out), "inp.out_ids"),
                                     BP_TENSOR_FLAG_INPUT);
  }
  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(hd));

  bp_tensor *x = bp_get_rows(c, w.tok_embd, g->ids);
  for (int il = 0; il < hp.n_layer; ++il) {
    const layer_weights &L = w.layers[il];
    bp_tensor *h = bp_mul(c, bp_rms_norm(c, x, hp.norm_eps), L.attn_norm);
    bp_tensor *q = bp_mul_mat(c, L.wq, h);
    bp_tensor *k = bp_mul_mat(c, L.wk, h);
    bp_tensor *v = bp_mul_mat(c, L.wv, h);
    if (L.bq) q = bp_add(c, q, L.bq);
    if (L.bk) k = bp_add(c, k, L.bk);
    if (L.bv) v = bp_add(c, v, L.bv);
    q = bp_reshape_3d(c, q, hd, H, T);
    k = bp_reshape_3d(c, k, hd, Hkv, T);
    if (L.q_norm) q = bp_mul(c, bp_rms_norm(c, q, hp.norm_eps), L.q_norm);
    if (L.k_norm) k = bp_mul(c, bp_rms_norm(c, k, hp.norm_eps), L.k_norm);
    q = rope(c, hp, w, q, g->pos);
    k = rope(c, hp, w, k, g->pos);

    // Into the cache first: the attention below reads the cache, and the
    // graph runs its nodes in the order they were added. K is stored
    // position-major ([Ekv, n_ctx]); V the same for the fused op, else
    // transposed ([n_ctx, Ekv], each channel's positions together) so the
    // second product reads dense rows and no per-step transpose of the whole
    // cache is needed.
    // The fused layout writes rows at the cells (inp.cells) with SET_ROWS,
    // so the graph does not depend on where the batch goes and decode steps
    // reuse one graph; the transposed V is written through views at c0, so
    // its batches take a run of consecutive cells.
    bp_tensor *k_into = nullptr, *v_into = nullptr;
    if (kv.fused) {
      const size_t row = static_cast<size_t>(Ekv) * kv_es;
      k_into = bp_set_rows(c, bp_view_2d(c, kv.k[il], Ekv, kv.n_ctx, row, 0), bp_reshape_2d(c, k, Ekv, T), g->cells);
      v_into = bp_set_rows(c, bp_view_2d(c, kv.v[il], Ekv, kv.n_ctx, row, 0), bp_reshape_2d(c, v, Ekv, T), g->cells);
    } else {
      const int64_t flat = T * Ekv;
      k_into = bp_cpy(c, bp_reshape(c, k, 1, &flat),
                      bp_view_1d(c, kv.k[il], flat, static_cast<size_t>(shape.c0) * Ekv * kv_es));
      bp_tensor *v_slot =
          bp_view_2d(c, kv.v[il], T, Ekv, static_cast<size_t>(kv.n_ctx) * kv_es, static_cast<size_t>(shape.c0) * kv_es);
      v_into = bp_cpy(c, T == 1 ? bp_reshape_2d(c, v, 1, Ekv) : bp_transpose(c, v), v_slot);
    }
    bp_status st = BP_OK;
    if ((st = bp_graph_build(g->graph, k_into)) || (st = bp_graph_build(g->graph, v_into))) {
      return fail_after(st, [&] { free_forward(g); });
    }

    // K as [hd, n_kv, Hkv]; query heads share key/value heads in groups of
    // H / Hkv (ATTENTION and MUL_MAT both broadcast dim 2).
    bp_tensor *K = bp_view_3d(c, kv.k[il], hd, n_kv, Hkv, Ekv * kv_es, hd * kv_es, 0);
    bp_tensor *Q = bp_permute(c, q, 0, 2, 1, 3);  // [hd, T, H]
    bp_tensor *merged = nullptr;
    if (kv.fused) {
      bp_tensor *V = bp_view_3d(c, kv.v[il], hd, n_kv, Hkv, Ekv * kv_es, hd * kv_es, 0);
      merged = bp_reshape_2d(c, bp_attention(c, Q, K, V, g->mask, kq_scale), hd * H, T);  // [hd, H, T]
    } else {
      // V as [n_kv, hd, Hkv].
      bp_tensor *Vt = bp_view_3d(c, kv.v[il], n_kv, hd, Hkv, kv.n_ctx * kv_es, kv.n_ctx * hd * kv_es, 0);
      bp_tensor *kq = bp_soft_max(c, bp_mul_mat(c, K, Q), g->mask, kq_scale);  // [n_kv, T, H]
      bp_tensor *kqv = bp_mul_mat(c, Vt, kq);                                  // [hd, T, H]
      merged = bp_reshape_2d(c, bp_cont(c, bp_permute(c, kqv, 0, 2, 1, 3)), hd * H, T);
    }
    x = bp_add(c, x, bp_mul_mat(c, L.wo, merged));

    h = bp_mul(c, bp_rms_norm(c, x, hp.norm_eps), L.ffn_norm);
    bp_tensor *ff = bp_mul(c, bp_silu(c, bp_mul_mat(c, L.w_gate, h)), bp_mul_mat(c, L.w_up, h));
    x = bp_add(c, x, bp_mul_mat(c, L.w_down, ff));
  }
  // Only the rows whose logits are wanted go through the output product,
  // the largest of the graph's products for a small model.
  if (shape.picked) {
    x = bp_get_rows(c, x, g->out_ids);
  } else if (shape.n_out < T) {
    x = bp_view_2d(c, x, E, 1, x ? x->nb[1] : 0, x ? static_cast<size_t>(T - 1) * x->nb[1] : 0);
  }
  x = bp_mul(c, bp_rms_norm(c, x, hp.norm_eps), w.output_norm);
  g->logits = bp_tensor_set_flags(bp_tensor_set_name(bp_mul_mat(c, w.output, x), "out.logits"), BP_TENSOR_FLAG_OUTPUT);
  bp_status st = bp_graph_build(g->graph, g->logits);
  if (st != BP_OK) {
    st = fail(st, std::string("building the model's graph: ") + bp_last_error());
    return fail_after(st, [&] { free_forward(g); });
  }
  return BP_OK;
}

}  // namespace bp::model
