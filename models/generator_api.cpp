// generator_api.cpp: the generation entry points of model.h: argument
// checks, and the failure that ends a generator.
#include <cstring>
#include <new>

#include "generator.hpp"
#include "report.hpp"

using namespace bp::model;

namespace {

bp_status check_generator(const bp_generator *g, const char *fn) {
  if (!g) return failf(BP_ERR_INVALID_ARGUMENT, "%s: generator is NULL", fn);
  if (g->magic != k_generator_magic)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: %p is not a live bp_generator (freed, or another object)", fn,
                 static_cast<const void *>(g));
  return BP_OK;
}

// The stop strings of |o| as bytes, or INVALID_ARGUMENT naming the bad one.
bp_status copy_stops(const bp_generator_options &o, std::vector<std::string> *out) {
  if (o.n_stops && !o.stops)
    return failf(BP_ERR_INVALID_ARGUMENT, "bp_generator_new: options->stops is NULL but n_stops = %zu", o.n_stops);
  for (size_t i = 0; i < o.n_stops; ++i) {
    if (!o.stops[i]) return failf(BP_ERR_INVALID_ARGUMENT, "bp_generator_new: options->stops[%zu] is NULL", i);
    const size_t len = o.stop_lengths ? o.stop_lengths[i] : std::strlen(o.stops[i]);
    if (len == 0)
      return failf(BP_ERR_INVALID_ARGUMENT,
                   "bp_generator_new: options->stops[%zu] is empty: a stop string needs at least one byte", i);
    out->emplace_back(o.stops[i], len);
  }
  return BP_OK;
}

// The checks bp_generator_next and bp_generator_draw share; clears |out_step|.
bp_status begin_step(bp_generator *generator, bp_generator_step *out_step, const char *fn) {
  if (bp_status st = check_generator(generator, fn)) return st;
  if (!out_step || out_step->struct_size < sizeof(bp_generator_step))
    return failf(BP_ERR_INVALID_ARGUMENT,
                 "%s: out_step is NULL or out_step->struct_size is not sizeof(bp_generator_step) (%zu)", fn,
                 sizeof(bp_generator_step));
  out_step->token = -1;
  out_step->text = "";
  out_step->text_len = 0;
  out_step->stop = BP_STOP_NONE;
  // A failed step may have run part of its work (a prompt's first batches),
  // so it is not retried: the caller learns of it, then ends the sequence.
  if (!generator->failure.empty())
    return failf(BP_ERR_FAILED_PRECONDITION, "%s: an earlier step failed (%s): free this generator", fn,
                 generator->failure.c_str());
  return check_context(generator->context, fn);
}

void end_step(const bp_generator *generator, bp_token token, bp_generator_step *out_step) {
  out_step->token = token;
  out_step->text = generator->out.c_str();
  out_step->text_len = generator->out.size();
  out_step->stop = generator->stop;
}

}  // namespace

extern "C" {

BP_API const char *bp_stop_reason_name(bp_stop_reason reason) {
  // Read as an integer: a caller may pass any number, and loading one that
  // is not an enumerator as the enum is undefined behaviour.
  int value;
  std::memcpy(&value, &reason, sizeof value);
  switch (value) {
    case BP_STOP_NONE:
      return "none";
    case BP_STOP_END:
      return "end";
    case BP_STOP_STRING:
      return "stop";
    case BP_STOP_LENGTH:
      return "length";
    case BP_STOP_CONTEXT:
      return "context";
  }
  return "unknown";
}

BP_API bp_generator_options bp_generator_default_options(void) {
  bp_generator_options o{};
  o.struct_size = sizeof o;
  o.max_tokens = -1;
  return o;
}

BP_API bp_status bp_generator_new(bp_model_context *context, const bp_generator_options *options,
                                  bp_generator **out_generator) {
  begin_call();
  if (!out_generator) return fail(BP_ERR_INVALID_ARGUMENT, "bp_generator_new: out_generator is NULL");
  *out_generator = nullptr;
  if (bp_status st = check_context(context, "bp_generator_new")) return st;
  bp_generator_options opt = bp_generator_default_options();
  if (options) {
    // As bp_model_load: a smaller struct (an older header's) leaves the later
    // fields at their defaults.
    if (options->struct_size < sizeof(uint32_t) || options->struct_size > sizeof opt)
      return failf(BP_ERR_INVALID_ARGUMENT,
                   "bp_generator_new: options->struct_size = %u: set it to sizeof(bp_generator_options) (%zu)",
                   options->struct_size, sizeof opt);
    std::memcpy(&opt, options, options->struct_size);
  }
  if (opt.n_prompt && !opt.prompt)
    return failf(BP_ERR_INVALID_ARGUMENT, "bp_generator_new: options->prompt is NULL but n_prompt = %zu", opt.n_prompt);
  const int32_t n_vocab = context->model->hp.n_vocab;
  for (size_t i = 0; i < opt.n_prompt; ++i)
    if (opt.prompt[i] < 0 || opt.prompt[i] >= n_vocab)
      return failf(BP_ERR_INVALID_ARGUMENT, "bp_generator_new: prompt[%zu] = %d is not in the vocabulary (0..%d)", i,
                   opt.prompt[i], n_vocab - 1);
  std::vector<std::string> stops;
  if (bp_status st = copy_stops(opt, &stops)) return st;
  if ((opt.n_prompt == 0 || opt.prompt_evaluated) && context->logit_rows == 0)
    return fail(BP_ERR_FAILED_PRECONDITION,
                "bp_generator_new: there is no prompt to evaluate and the context has no logits to draw the first "
                "token from: pass the prompt, or evaluate it first");
  auto *g = new (std::nothrow) bp_generator;
  if (!g) return fail(BP_ERR_OUT_OF_HOST_MEMORY, "bp_generator_new: allocating the generator");
  const bp_sampler_options so = opt.sampler ? *opt.sampler : bp_sampler_default_options();
  if (bp_status st = bp_sampler_new(&so, &g->sampler)) {
    delete g;
    return fail(st, std::string("bp_generator_new: ") + bp_last_error());
  }
  for (size_t i = 0; i < opt.n_prompt; ++i) bp_sampler_accept(g->sampler, opt.prompt[i]);
  if (!opt.prompt_evaluated) g->prompt.assign(opt.prompt, opt.prompt + opt.n_prompt);
  g->magic = k_generator_magic;
  g->context = context;
  g->max_tokens = opt.max_tokens;
  g->text = text_stream(std::move(stops));
  *out_generator = g;
  return BP_OK;
}

BP_API void bp_generator_free(bp_generator *generator) {
  begin_call();
  if (!generator || check_generator(generator, "bp_generator_free")) return;
  bp_sampler_free(generator->sampler);
  generator->magic = 0;
  delete generator;
}

BP_API bp_status bp_generator_next(bp_generator *generator, bp_generator_step *out_step) {
  begin_call();
  if (bp_status st = begin_step(generator, out_step, "bp_generator_next")) return st;
  bp_token token = -1;
  if (bp_status st = generator_step(generator, &token)) {
    generator->failure = bp_last_error();
    return st;
  }
  end_step(generator, token, out_step);
  return BP_OK;
}

BP_API bp_status bp_generator_draw(bp_generator *generator, const float *logits, bp_generator_step *out_step) {
  begin_call();
  if (bp_status st = begin_step(generator, out_step, "bp_generator_draw")) return st;
  if (!logits) return fail(BP_ERR_INVALID_ARGUMENT, "bp_generator_draw: logits is NULL");
  if (!generator->prompt.empty())
    return fail(BP_ERR_FAILED_PRECONDITION,
                "bp_generator_draw: the generator still holds a prompt to evaluate: evaluate it yourself and make "
                "the generator with prompt_evaluated");
  bp_token token = -1;
  if (bp_status st = generator_draw_row(generator, logits, &token)) {
    generator->failure = bp_last_error();
    return st;
  }
  end_step(generator, token, out_step);
  return BP_OK;
}

}  // extern "C"
