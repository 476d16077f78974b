// sequences.cpp: the sequence entry points of model.h: the batch eval, its
// logits rows and the operations on a sequence's cells (kv_cells.hpp).
#include <cstring>

#include "context.hpp"
#include "report.hpp"

using namespace bp::model;

namespace bp::model {
namespace {

bp_status check_seq(const bp_model_context *c, const char *fn, uint32_t seq) {
  const uint32_t n = c->cells.n_seq();
  if (seq >= n)
    return failf(BP_ERR_INVALID_ARGUMENT,
                 "%s: sequence %u is out of range: the context holds %u sequence%s (0..%u); create it with a larger "
                 "n_seq in bp_model_context_options",
                 fn, seq, n, n == 1 ? "" : "s", n - 1);
  return BP_OK;
}

}  // namespace

bp_status seq_rewind(bp_model_context *c, const char *fn, uint32_t seq, uint32_t position) {
  if (bp_status st = check_seq(c, fn, seq)) return st;
  const uint32_t length = c->cells.next_position(seq);
  if (position > length)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: position %u is past the %u positions sequence %u holds", fn, position,
                 length, seq);
  c->cells.remove(seq, position, UINT32_MAX);
  return BP_OK;
}

}  // namespace bp::model

extern "C" {

BP_API bp_status bp_model_context_eval_batch(bp_model_context *context, const bp_model_batch *batch) {
  begin_call();
  const char *fn = "bp_model_context_eval_batch";
  if (bp_status st = check_context(context, fn)) return st;
  if (!batch) return failf(BP_ERR_INVALID_ARGUMENT, "%s: batch is NULL", fn);
  // A smaller struct_size (an older header) leaves the later fields NULL,
  // which mean "counted" and "the defaults".
  bp_model_batch b{};
  if (batch->struct_size < sizeof(uint32_t) || batch->struct_size > sizeof b)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: batch->struct_size = %u: set it to sizeof(bp_model_batch)", fn,
                 batch->struct_size);
  std::memcpy(&b, batch, batch->struct_size);
  return context_eval_batch(context, b);
}

BP_API const float *bp_model_context_batch_logits(const bp_model_context *context, size_t i) {
  begin_call();
  if (check_context(context, "bp_model_context_batch_logits")) return nullptr;
  if (i >= context->logit_row.size() || context->logit_row[i] < 0) return nullptr;
  const size_t n_vocab = static_cast<size_t>(context->model->hp.n_vocab);
  return context->logits.data() + static_cast<size_t>(context->logit_row[i]) * n_vocab;
}

BP_API uint32_t bp_model_context_seq_count(const bp_model_context *context) {
  begin_call();
  return check_context(context, "bp_model_context_seq_count") ? 0 : context->cells.n_seq();
}

BP_API uint32_t bp_model_context_cells_used(const bp_model_context *context) {
  begin_call();
  return check_context(context, "bp_model_context_cells_used") ? 0 : context->cells.used();
}

BP_API bp_status bp_model_context_seq_length(const bp_model_context *context, uint32_t seq, uint32_t *out_length) {
  begin_call();
  const char *fn = "bp_model_context_seq_length";
  if (out_length) *out_length = 0;
  if (bp_status st = check_context(context, fn)) return st;
  if (!out_length) return failf(BP_ERR_INVALID_ARGUMENT, "%s: out_length is NULL", fn);
  if (bp_status st = check_seq(context, fn, seq)) return st;
  *out_length = context->cells.next_position(seq);
  return BP_OK;
}

BP_API bp_status bp_model_context_seq_remove(bp_model_context *context, uint32_t seq, uint32_t p0, uint32_t p1) {
  begin_call();
  const char *fn = "bp_model_context_seq_remove";
  if (bp_status st = check_context(context, fn)) return st;
  if (bp_status st = check_seq(context, fn, seq)) return st;
  if (p0 > p1) return failf(BP_ERR_INVALID_ARGUMENT, "%s: p0 = %u is past p1 = %u: the range is [p0, p1)", fn, p0, p1);
  context->cells.remove(seq, p0, p1);
  return BP_OK;
}

BP_API bp_status bp_model_context_seq_clear(bp_model_context *context, uint32_t seq) {
  begin_call();
  const char *fn = "bp_model_context_seq_clear";
  if (bp_status st = check_context(context, fn)) return st;
  if (bp_status st = check_seq(context, fn, seq)) return st;
  context->cells.remove(seq, 0, UINT32_MAX);
  return BP_OK;
}

BP_API bp_status bp_model_context_seq_rewind(bp_model_context *context, uint32_t seq, uint32_t position) {
  begin_call();
  if (bp_status st = check_context(context, "bp_model_context_seq_rewind")) return st;
  return seq_rewind(context, "bp_model_context_seq_rewind", seq, position);
}

BP_API bp_status bp_model_context_seq_copy(bp_model_context *context, uint32_t src, uint32_t dst, uint32_t end) {
  begin_call();
  const char *fn = "bp_model_context_seq_copy";
  if (bp_status st = check_context(context, fn)) return st;
  if (bp_status st = check_seq(context, fn, src)) return st;
  if (bp_status st = check_seq(context, fn, dst)) return st;
  if (src == dst)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: src and dst are both sequence %u: copy to another sequence", fn, src);
  const uint32_t length = context->cells.next_position(src);
  if (end > length)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: end = %u is past the %u positions sequence %u holds", fn, end, length,
                 src);
  context->cells.copy(src, dst, end);
  return BP_OK;
}

}  // extern "C"
