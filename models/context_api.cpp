// context_api.cpp: the context entry points of model.h.
#include <algorithm>
#include <cstring>

#include "context.hpp"
#include "report.hpp"

using namespace bp::model;

namespace bp::model {

bp_status check_context(const bp_model_context *c, const char *fn) {
  if (!c) return failf(BP_ERR_INVALID_ARGUMENT, "%s: context is NULL", fn);
  if (c->magic != k_context_magic)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: %p is not a live bp_model_context (freed, or another object)", fn,
                 static_cast<const void *>(c));
  return BP_OK;
}

}  // namespace bp::model

extern "C" {

BP_API bp_status bp_model_context_new(bp_model *model, const bp_model_context_options *options,
                                      bp_model_context **out_context) {
  begin_call();
  if (!out_context) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_context_new: out_context is NULL");
  *out_context = nullptr;
  if (bp_status st = check_model(model, "bp_model_context_new")) return st;
  bp_model_context_options opt{};
  opt.struct_size = sizeof opt;
  if (options) {
    if (options->struct_size < sizeof(uint32_t) || options->struct_size > sizeof opt)
      return failf(BP_ERR_INVALID_ARGUMENT,
                   "bp_model_context_new: options->struct_size = %u: set it to sizeof(bp_model_context_options)",
                   options->struct_size);
    std::memcpy(&opt, options, options->struct_size);
  }
  constexpr uint32_t k_max_ctx = 1u << 20;
  if (opt.n_ctx > k_max_ctx)
    return failf(BP_ERR_INVALID_ARGUMENT, "bp_model_context_new: n_ctx = %u: at most %u positions", opt.n_ctx,
                 k_max_ctx);
  if (opt.n_batch > k_max_ctx)
    return failf(BP_ERR_INVALID_ARGUMENT, "bp_model_context_new: n_batch = %u: at most %u tokens", opt.n_batch,
                 k_max_ctx);
  if (opt.n_seq > k_max_seq)
    return failf(BP_ERR_INVALID_ARGUMENT, "bp_model_context_new: n_seq = %u: at most %u sequences", opt.n_seq,
                 k_max_seq);
  return context_create(model, opt, out_context);
}

BP_API void bp_model_context_free(bp_model_context *context) {
  begin_call();
  if (!context || check_context(context, "bp_model_context_free")) return;
  context_destroy(context);
}

BP_API bp_status bp_model_context_eval(bp_model_context *context, const bp_token *tokens, size_t n, bool all_logits) {
  begin_call();
  if (bp_status st = check_context(context, "bp_model_context_eval")) return st;
  if (!tokens && n) return fail(BP_ERR_INVALID_ARGUMENT, "bp_model_context_eval: tokens is NULL");
  return context_eval(context, tokens, n, all_logits);
}

BP_API const float *bp_model_context_logits(const bp_model_context *context, size_t *out_rows) {
  begin_call();
  if (out_rows) *out_rows = 0;
  if (check_context(context, "bp_model_context_logits")) return nullptr;
  if (context->logit_rows == 0) return nullptr;
  if (out_rows) *out_rows = context->logit_rows;
  return context->logits.data();
}

BP_API bp_token bp_model_context_argmax(const bp_model_context *context) {
  begin_call();
  if (check_context(context, "bp_model_context_argmax") || context->logit_rows == 0) return -1;
  const size_t nv = static_cast<size_t>(context->model->hp.n_vocab);
  const float *row = context->logits.data() + (context->logit_rows - 1) * nv;
  return static_cast<bp_token>(std::max_element(row, row + nv) - row);
}

BP_API uint32_t bp_model_context_position(const bp_model_context *context) {
  begin_call();
  return check_context(context, "bp_model_context_position") ? 0 : context->cells.next_position(0);
}

BP_API bp_status bp_model_context_graph_stats(const bp_model_context *context, uint64_t *out_builds,
                                              uint64_t *out_plans) {
  begin_call();
  if (out_builds) *out_builds = 0;
  if (out_plans) *out_plans = 0;
  if (bp_status st = check_context(context, "bp_model_context_graph_stats")) return st;
  if (out_builds) *out_builds = context->graph_builds;
  if (out_plans) *out_plans = context->graph_plans;
  return BP_OK;
}

BP_API uint32_t bp_model_context_size(const bp_model_context *context) {
  begin_call();
  return check_context(context, "bp_model_context_size") ? 0 : context->kv.n_ctx;
}

BP_API bp_status bp_model_context_rewind(bp_model_context *context, uint32_t position) {
  begin_call();
  if (bp_status st = check_context(context, "bp_model_context_rewind")) return st;
  if (bp_status st = seq_rewind(context, "bp_model_context_rewind", 0, position)) return st;
  // The logits belong to the forgotten end; a generator must not draw from them.
  forget_logits(context);
  return BP_OK;
}

BP_API uint64_t bp_model_context_memory(const bp_model_context *context) {
  begin_call();
  if (check_context(context, "bp_model_context_memory")) return 0;
  uint64_t total = 0;
  for (bp_buffer *b : context->kv_buf) total += b ? bp_buffer_size(b) : 0;
  for (bp_backend *be : context->backends) total += bp_sched_buffer_size(context->sched, be);
  return total;
}

}  // extern "C"
