// batch.cpp: plan_batch (batch.hpp).
#include "batch.hpp"

#include <algorithm>
#include <limits>

#include "report.hpp"

namespace bp::model {
namespace {

bp_status check_tokens(const bp_model_context *c, const char *fn, const bp_model_batch &b) {
  if (b.n_tokens == 0) return failf(BP_ERR_INVALID_ARGUMENT, "%s: the batch has no tokens: pass at least one", fn);
  if (!b.tokens) return failf(BP_ERR_INVALID_ARGUMENT, "%s: tokens is NULL", fn);
  const int32_t n_vocab = c->model->hp.n_vocab;
  for (size_t i = 0; i < b.n_tokens; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= n_vocab)
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: tokens[%zu] = %d is not in the vocabulary (0..%d)", fn, i, b.tokens[i],
                   n_vocab - 1);
  }
  return BP_OK;
}

// Each token's sequence and position. A sequence's tokens take its next
// positions in batch order: a position is where its keys meet the mask, so
// a gap would leave a hole no token fills and an overlap two cells with one
// position, and either is a caller's bookkeeping error better named now.
bp_status place_tokens(const bp_model_context *c, const char *fn, const bp_model_batch &b, batch_plan *p) {
  const kv_cells &cells = c->cells;
  std::vector<uint32_t> next(cells.n_seq());
  for (uint32_t s = 0; s < cells.n_seq(); ++s) next[s] = cells.next_position(s);
  p->seq.resize(b.n_tokens);
  p->pos.resize(b.n_tokens);
  for (size_t i = 0; i < b.n_tokens; ++i) {
    const uint32_t s = b.seq_ids ? b.seq_ids[i] : 0;
    if (s >= cells.n_seq())
      return failf(BP_ERR_INVALID_ARGUMENT,
                   "%s: seq_ids[%zu] = %u is out of range: the context holds %u sequence%s (0..%u); create it with "
                   "a larger n_seq in bp_model_context_options",
                   fn, i, s, cells.n_seq(), cells.n_seq() == 1 ? "" : "s", cells.n_seq() - 1);
    const uint32_t want = b.positions ? b.positions[i] : next[s];
    if (want != next[s])
      return failf(BP_ERR_INVALID_ARGUMENT,
                   "%s: positions[%zu] = %u, but sequence %u continues at position %u: a sequence's tokens take "
                   "its next positions in order, without gaps (pass positions NULL to have them counted, or "
                   "bp_model_context_seq_rewind the sequence to go back)",
                   fn, i, want, s, next[s]);
    if (want > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()))
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: token %zu would be at position %u, past the largest, %d", fn, i, want,
                   std::numeric_limits<int32_t>::max());
    p->seq[i] = s;
    p->pos[i] = static_cast<int32_t>(want);
    ++next[s];
  }
  return BP_OK;
}

void choose_logits(const bp_model_batch &b, keep_logits keep, batch_plan *p) {
  p->keep.assign(b.n_tokens, keep == keep_logits::all ? 1 : 0);
  if (keep == keep_logits::listed && b.logits) {
    for (size_t i = 0; i < b.n_tokens; ++i) p->keep[i] = b.logits[i] ? 1 : 0;
  } else if (keep != keep_logits::all) {
    std::vector<bool> seen(k_max_seq, false);
    for (size_t i = b.n_tokens; i-- > 0;) {
      if (seen[p->seq[i]]) continue;
      seen[p->seq[i]] = true;
      p->keep[i] = 1;
    }
  }
}

}  // namespace

bp_status plan_batch(const bp_model_context *c, const char *fn, const bp_model_batch &b, keep_logits keep,
                     batch_plan *out) {
  batch_plan &p = *out;
  if (bp_status st = check_tokens(c, fn, b)) return st;
  if (bp_status st = place_tokens(c, fn, b, &p)) return st;
  choose_logits(b, keep, &p);
  p.tokens = b.tokens;
  p.n = b.n_tokens;
  p.sizes.clear();
  for (size_t done = 0; done < p.n; done += p.sizes.back())
    p.sizes.push_back(static_cast<uint32_t>(std::min<size_t>(c->n_batch, p.n - done)));
  const kv_cells &cells = c->cells;
  const uint32_t left = cells.size() - cells.used();
  if (p.n > left)
    return failf(BP_ERR_RESOURCE_EXHAUSTED,
                 "%s: %zu tokens do not fit: the context holds %u positions and %u are used, so %u are left (create "
                 "the context with a larger n_ctx, or free cells with bp_model_context_rewind, _seq_rewind or "
                 "_seq_clear)",
                 fn, p.n, cells.size(), cells.used(), left);
  // The transposed V cache (unfused attention) is written through one view
  // per graph, so each graph needs consecutive free cells; rewinding one
  // sequence among others can leave the free cells scattered.
  if (!cells.plan(p.sizes, !c->kv.fused, &p.cell))
    return failf(BP_ERR_RESOURCE_EXHAUSTED,
                 "%s: %zu tokens do not fit: %u cells are free, but unfused attention writes each graph of up to %u "
                 "tokens into consecutive free cells and there is no such run (use the fused attention, a smaller "
                 "n_batch, or free cells with bp_model_context_seq_clear)",
                 fn, p.n, left, c->n_batch);
  return BP_OK;
}

}  // namespace bp::model
