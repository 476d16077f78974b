// generator.hpp: what a generator holds (the bp_generator handle of
// model.h) and its step. Evaluating and drawing are separate functions: a
// server that evaluates many sequences in one batch (continuous batching)
// hands each generator its own logits row (bp_generator_draw).
#pragma once

#include <string>
#include <vector>

#include "context.hpp"
#include "text_stream.hpp"

struct bp_generator {
  uint32_t magic = 0;                   // k_generator_magic while alive
  bp_model_context *context = nullptr;  // borrowed
  bp_sampler *sampler = nullptr;        // owned
  std::vector<bp_token> prompt;         // evaluated by the first step, then cleared
  int64_t max_tokens = -1;
  int64_t drawn = 0;    // tokens drawn so far, an end token included
  bp_token unfed = -1;  // the last token drawn, evaluated by the next step
  bp::model::text_stream text;
  std::string out;  // the last step's text (bp_generator_step.text points here)
  bp_stop_reason stop = BP_STOP_NONE;
  std::string failure;  // the message of a failed step; later steps refuse
};

namespace bp::model {

constexpr uint32_t k_generator_magic = 0x47454e52u;  // "GENR"

// One step of bp_generator_next: evaluates what is pending, then draws.
// Sets g->out and g->stop; *out_token is the token drawn or -1.
bp_status generator_step(bp_generator *g, bp_token *out_token);

// Draws a token from |row| (n_vocab logits) and updates the text and the
// stop reason; the token is left for the next evaluation unless it stopped
// the generation.
bp_status generator_draw(bp_generator *g, const float *row, bp_token *out_token);

// bp_generator_draw's step: the stop checks of generator_step, then a draw
// from |row|; the token drawn is the caller's to evaluate (unfed stays -1).
bp_status generator_draw_row(bp_generator *g, const float *row, bp_token *out_token);

}  // namespace bp::model
