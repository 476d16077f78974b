// generator.cpp: a generation's step: evaluate what is pending, draw a
// token, and decide whether it stops (generator.hpp).
#include "generator.hpp"

#include "report.hpp"

namespace bp::model {
namespace {

// Ends the generation: whatever the text stream still holds (an unfinished
// character, the start of a stop string that never came) is printed now.
void finish(bp_generator *g, bp_stop_reason reason) {
  g->out += g->text.finish();
  g->stop = reason;
}

}  // namespace

bp_status generator_step(bp_generator *g, bp_token *out_token) {
  *out_token = -1;
  g->out.clear();
  if (g->stop != BP_STOP_NONE) return BP_OK;
  // Only max_tokens 0 gets here: otherwise the draw that reaches the limit stops.
  if (g->max_tokens >= 0 && g->drawn >= g->max_tokens) {
    finish(g, BP_STOP_LENGTH);
    return BP_OK;
  }
  bp_model_context *c = g->context;
  // A token is fed back only when the next one is wanted, so the one that
  // stops a generation is never evaluated (no eval is wasted on it, and the
  // context ends on the last token the caller may want to continue from).
  if (!g->prompt.empty()) {
    if (bp_status st = context_eval(c, g->prompt.data(), g->prompt.size(), false))
      return fail(st, std::string("bp_generator_next: evaluating the prompt: ") + bp_last_error());
    g->prompt.clear();
  } else if (g->unfed >= 0) {
    if (bp_status st = context_eval(c, &g->unfed, 1, false))
      return fail(st, std::string("bp_generator_next: evaluating the last token drawn: ") + bp_last_error());
    g->unfed = -1;
  }
  if (c->logit_rows == 0)
    return fail(BP_ERR_FAILED_PRECONDITION,
                "bp_generator_next: the context has no logits to draw from (it was rewound, or evaluated with no "
                "tokens, since the last step)");
  const size_t n_vocab = static_cast<size_t>(c->model->hp.n_vocab);
  return generator_draw(g, c->logits.data() + (c->logit_rows - 1) * n_vocab, out_token);
}

bp_status generator_draw_row(bp_generator *g, const float *row, bp_token *out_token) {
  *out_token = -1;
  g->out.clear();
  if (g->stop != BP_STOP_NONE) return BP_OK;
  if (g->max_tokens >= 0 && g->drawn >= g->max_tokens) {
    finish(g, BP_STOP_LENGTH);
    return BP_OK;
  }
  if (bp_status st = generator_draw(g, row, out_token)) return st;
  g->unfed = -1;  // the caller evaluates it, in its own sequence
  return BP_OK;
}

bp_status generator_draw(bp_generator *g, const float *row, bp_token *out_token) {
  const bp_model_context *c = g->context;
  const bp_model *m = c->model;
  bp_token tok = -1;
  if (bp_status st = bp_sampler_sample(g->sampler, row, m->hp.n_vocab, &tok)) return st;
  ++g->drawn;
  *out_token = tok;
  if (m->tok->is_end(tok)) {
    finish(g, BP_STOP_END);
    return BP_OK;
  }
  g->out = g->text.push(m->tok->token_text(tok));
  // The order of the checks is the order of the reasons' priority: an end
  // token or a stop string says more about the text than a limit does.
  if (g->text.stopped())
    g->stop = BP_STOP_STRING;
  else if (g->max_tokens >= 0 && g->drawn >= g->max_tokens)
    finish(g, BP_STOP_LENGTH);
  else if (c->cells.used() >= c->cells.size())  // no free cell for the token
    finish(g, BP_STOP_CONTEXT);
  else
    g->unfed = tok;
  return BP_OK;
}

}  // namespace bp::model
