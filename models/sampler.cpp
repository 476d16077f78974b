// sampler.cpp: bp_sampler (model.h): repetition penalty, top-k, top-p, min-p,
// temperature and a seeded draw, in that order, as llama.cpp's default chain
// applies them.
//
// The draw uses splitmix64 and no <random> distribution, so a seed gives the
// same tokens with every standard library. Probabilities are computed in
// double, so the filters' cut-offs do not move with float rounding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <new>
#include <vector>

#include "backplane/model.h"
#include "report.hpp"

using bp::model::begin_call;
using bp::model::fail;
using bp::model::failf;

struct bp_sampler {
  bp_sampler_options options;
  uint64_t state;                // splitmix64
  std::deque<bp_token> history;  // the last repeat_last_n accepted tokens, oldest first
  struct candidate {
    bp_token id;
    double logit;
  };
  std::vector<candidate> cand;  // scratch, kept between calls
  std::vector<double> prob;     // scratch
};

namespace {

constexpr int32_t kDefaultRepeatLastN = 64;

uint64_t next_u64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// [0, 1) in steps of 2^-53.
double next_unit(uint64_t &state) { return static_cast<double>(next_u64(state) >> 11) * 0x1.0p-53; }

size_t history_limit(const bp_sampler_options &o) {
  return static_cast<size_t>(o.repeat_last_n > 0 ? o.repeat_last_n : kDefaultRepeatLastN);
}

bp_status check_options(const char *fn, const bp_sampler_options &o) {
  if (o.struct_size < sizeof(bp_sampler_options))
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: options->struct_size is %u; set it to sizeof(bp_sampler_options) (%zu)",
                 fn, o.struct_size, sizeof(bp_sampler_options));
  if (!std::isfinite(o.temperature))
    return failf(BP_ERR_INVALID_ARGUMENT,
                 "%s: temperature is %g; it must be a finite number (<= 0 for greedy decoding, else > 0)", fn,
                 static_cast<double>(o.temperature));
  if (!std::isfinite(o.top_p) || o.top_p < 0.0f)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: top_p is %g; it must be a finite number >= 0 (>= 1 keeps every token)",
                 fn, static_cast<double>(o.top_p));
  if (!std::isfinite(o.min_p) || o.min_p < 0.0f || o.min_p > 1.0f)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: min_p is %g; it must be in [0, 1] (0 keeps every token)", fn,
                 static_cast<double>(o.min_p));
  if (!std::isfinite(o.repeat_penalty) || o.repeat_penalty <= 0.0f)
    return failf(BP_ERR_INVALID_ARGUMENT,
                 "%s: repeat_penalty is %g; it must be a finite number > 0 (1 = no penalty, > 1 penalises repeats)", fn,
                 static_cast<double>(o.repeat_penalty));
  if (o.repeat_last_n < 0)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: repeat_last_n is %d; it must be >= 0 (0 = %d tokens)", fn,
                 o.repeat_last_n, kDefaultRepeatLastN);
  return BP_OK;
}

void remember(bp_sampler *s, bp_token token) {
  s->history.push_back(token);
  size_t limit = history_limit(s->options);
  while (s->history.size() > limit) s->history.pop_front();
}

// Lowest id among the largest logits.
bp_token argmax(const std::vector<bp_sampler::candidate> &cand) {
  size_t best = 0;
  for (size_t i = 1; i < cand.size(); ++i)
    if (cand[i].logit > cand[best].logit) best = i;
  return cand[best].id;
}

}  // namespace

extern "C" {

bp_sampler_options bp_sampler_default_options(void) {
  begin_call();
  bp_sampler_options o{};
  o.struct_size = sizeof o;
  o.temperature = 0.0f;
  o.top_k = 40;
  o.top_p = 0.95f;
  o.min_p = 0.05f;
  o.repeat_penalty = 1.0f;
  o.repeat_last_n = kDefaultRepeatLastN;
  o.seed = 0;
  return o;
}

bp_status bp_sampler_new(const bp_sampler_options *options, bp_sampler **out_sampler) {
  begin_call();
  static const char fn[] = "bp_sampler_new";
  if (out_sampler == nullptr) return failf(BP_ERR_INVALID_ARGUMENT, "%s: out_sampler is NULL", fn);
  *out_sampler = nullptr;
  if (options == nullptr)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: options is NULL; start from bp_sampler_default_options()", fn);
  if (bp_status st = check_options(fn, *options); st != BP_OK) return st;
  auto *s = new (std::nothrow) bp_sampler{};
  if (s == nullptr) return failf(BP_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
  s->options = *options;
  s->options.struct_size = sizeof(bp_sampler_options);
  s->state = options->seed;
  *out_sampler = s;
  return BP_OK;
}

void bp_sampler_free(bp_sampler *sampler) {
  begin_call();
  delete sampler;
}

bp_status bp_sampler_sample(bp_sampler *sampler, const float *logits, int32_t n_vocab, bp_token *out_token) {
  begin_call();
  static const char fn[] = "bp_sampler_sample";
  if (sampler == nullptr) return failf(BP_ERR_INVALID_ARGUMENT, "%s: sampler is NULL", fn);
  if (logits == nullptr) return failf(BP_ERR_INVALID_ARGUMENT, "%s: logits is NULL", fn);
  if (out_token == nullptr) return failf(BP_ERR_INVALID_ARGUMENT, "%s: out_token is NULL", fn);
  if (n_vocab <= 0) return failf(BP_ERR_INVALID_ARGUMENT, "%s: n_vocab is %d; it must be > 0", fn, n_vocab);
  *out_token = -1;
  const bp_sampler_options &o = sampler->options;

  auto &cand = sampler->cand;
  cand.resize(static_cast<size_t>(n_vocab));
  bool any_finite = false;
  for (int32_t i = 0; i < n_vocab; ++i) {
    float l = logits[i];
    // -inf is a masked token; NaN and +inf have no probability.
    if (std::isnan(l) || l == std::numeric_limits<float>::infinity())
      return failf(BP_ERR_INVALID_ARGUMENT, "%s: logits[%d] is %g; logits must be finite or -inf (masked)", fn, i,
                   static_cast<double>(l));
    if (std::isfinite(l)) any_finite = true;
    cand[static_cast<size_t>(i)] = {i, static_cast<double>(l)};
  }
  if (!any_finite)
    return failf(BP_ERR_INVALID_ARGUMENT, "%s: all %d logits are -inf; at least one token must be possible", fn,
                 n_vocab);

  // Repetition penalty, once per distinct token of the window (llama.cpp):
  // a positive logit is divided by the penalty, any other multiplied.
  if (o.repeat_penalty != 1.0f && !sampler->history.empty()) {
    std::vector<bool> seen(static_cast<size_t>(n_vocab), false);
    const double pen = o.repeat_penalty;
    for (bp_token t : sampler->history) {
      if (t < 0 || t >= n_vocab || seen[static_cast<size_t>(t)]) continue;
      seen[static_cast<size_t>(t)] = true;
      double &l = cand[static_cast<size_t>(t)].logit;
      l = l > 0.0 ? l / pen : l * pen;
    }
  }

  bp_token chosen;
  if (o.temperature <= 0.0f) {
    chosen = argmax(cand);
  } else {
    // Most likely first; equal logits by id, so the order (and the draw) does
    // not depend on the sort's implementation.
    auto before = [](const bp_sampler::candidate &a, const bp_sampler::candidate &b) {
      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    size_t n = cand.size();
    if (o.top_k > 0 && static_cast<size_t>(o.top_k) < n) {
      n = static_cast<size_t>(o.top_k);
      std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), cand.end(), before);
    } else {
      std::sort(cand.begin(), cand.end(), before);
    }
    // Masked tokens never count.
    while (n > 1 && std::isinf(cand[n - 1].logit)) --n;

    auto &prob = sampler->prob;
    // Softmax of the first n (at temperature 1: the filters see the model's
    // distribution, as in llama.cpp's chain where temperature comes last).
    auto softmax = [&](size_t count, double inv_t) {
      prob.resize(count);
      double max = cand[0].logit, sum = 0.0;
      for (size_t i = 0; i < count; ++i) sum += prob[i] = std::exp((cand[i].logit - max) * inv_t);
      for (size_t i = 0; i < count; ++i) prob[i] /= sum;
    };
    if (o.top_p < 1.0f) {
      softmax(n, 1.0);
      double cum = 0.0, p = o.top_p;
      size_t keep = n;
      for (size_t i = 0; i < n; ++i) {
        cum += prob[i];
        if (cum >= p) {
          keep = i + 1;
          break;
        }
      }
      n = keep;
    }
    if (o.min_p > 0.0f) {
      // p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p; the first stays.
      const double max = cand[0].logit, min_p = o.min_p;
      size_t keep = 1;
      while (keep < n && std::exp(cand[keep].logit - max) >= min_p) ++keep;
      n = keep;
    }
    softmax(n, 1.0 / static_cast<double>(o.temperature));
    double u = next_unit(sampler->state), cum = 0.0;
    chosen = cand[n - 1].id;
    for (size_t i = 0; i < n; ++i) {
      cum += prob[i];
      if (u < cum) {
        chosen = cand[i].id;
        break;
      }
    }
  }
  remember(sampler, chosen);
  *out_token = chosen;
  return BP_OK;
}

void bp_sampler_accept(bp_sampler *sampler, bp_token token) {
  begin_call();
  if (sampler == nullptr) {
    fail(BP_ERR_INVALID_ARGUMENT, "bp_sampler_accept: sampler is NULL");
    return;
  }
  remember(sampler, token);
}

void bp_sampler_reset(bp_sampler *sampler) {
  begin_call();
  if (sampler == nullptr) {
    fail(BP_ERR_INVALID_ARGUMENT, "bp_sampler_reset: sampler is NULL");
    return;
  }
  sampler->history.clear();
  sampler->state = sampler->options.seed;
}

}  // extern "C"
