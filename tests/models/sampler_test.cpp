// sampler_test.cpp: bp_sampler (model.h) against references computed here in
// double precision: greedy, top-k, top-p, min-p, temperature, the seeded
// draw's frequencies, the repetition penalty, and option checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "backplane/model.h"
#include "common/splitmix64.hpp"

namespace {

struct sampler_ptr {
  bp_sampler *s = nullptr;
  ~sampler_ptr() { bp_sampler_free(s); }
};

bp_sampler_options opts(float temperature, int32_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f,
                        uint64_t seed = 1) {
  bp_sampler_options o = bp_sampler_default_options();
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.seed = seed;
  return o;
}

void make(const bp_sampler_options &o, sampler_ptr &p) {
  ASSERT_EQ(bp_sampler_new(&o, &p.s), BP_OK) << bp_last_error();
  ASSERT_NE(p.s, nullptr);
}

bp_token sample(bp_sampler *s, const std::vector<float> &logits) {
  bp_token t = -2;
  EXPECT_EQ(bp_sampler_sample(s, logits.data(), static_cast<int32_t>(logits.size()), &t), BP_OK) << bp_last_error();
  return t;
}

// A test-local generator (not the sampler's) for random logits in [lo, hi).
using rng = bp::tools::splitmix64;
float uniform(rng &r, float lo, float hi) { return lo + (hi - lo) * static_cast<float>(r.unit()); }

std::vector<double> softmax(const std::vector<double> &l) {
  double m = *std::max_element(l.begin(), l.end()), sum = 0.0;
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp(l[i] - m);
  for (double &x : p) x /= sum;
  return p;
}

// The ids in order of decreasing logit (ties by id).
std::vector<int> order(const std::vector<float> &l) {
  std::vector<int> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return l[a] > l[b]; });
  return ids;
}

// Draws |n| tokens; returns counts per id.
std::vector<int> histogram(bp_sampler *s, const std::vector<float> &logits, int n) {
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    bp_token t = sample(s, logits);
    if (t < 0 || t >= static_cast<bp_token>(logits.size())) {
      ADD_FAILURE() << "token " << t << " outside the vocabulary";
      break;
    }
    ++count[static_cast<size_t>(t)];
  }
  return count;
}

// Pearson's chi-square of |count| against |p| (ids with p == 0 must have no
// draws at all).
double chi_square(const std::vector<int> &count, const std::vector<double> &p, int n) {
  double chi = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    double e = p[i] * n;
    chi += (count[i] - e) * (count[i] - e) / e;
  }
  return chi;
}

TEST(Sampler, DefaultsAreTheDocumentedOnes) {
  bp_sampler_options o = bp_sampler_default_options();
  EXPECT_EQ(o.struct_size, sizeof(bp_sampler_options));
  EXPECT_LE(o.temperature, 0.0f);
  EXPECT_EQ(o.top_k, 40);
  EXPECT_FLOAT_EQ(o.top_p, 0.95f);
  EXPECT_FLOAT_EQ(o.min_p, 0.05f);
  EXPECT_FLOAT_EQ(o.repeat_penalty, 1.0f);
  EXPECT_EQ(o.seed, 0u);
  sampler_ptr p;
  make(o, p);
}

TEST(Sampler, GreedyPicksTheArgmaxAndTheLowestIdOnTies) {
  sampler_ptr p;
  make(opts(0.0f), p);
  EXPECT_EQ(sample(p.s, {0.1f, 3.0f, -1.0f, 2.9f}), 1);
  EXPECT_EQ(sample(p.s, {1.0f, 5.0f, 5.0f, 5.0f}), 1);
  EXPECT_EQ(sample(p.s, {-std::numeric_limits<float>::infinity(), -7.0f}), 1);
  rng r{7};
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> l(1000);
    for (float &x : l) x = uniform(r, -10, 10);
    EXPECT_EQ(sample(p.s, l), std::max_element(l.begin(), l.end()) - l.begin());
  }
  // A negative temperature is greedy too.
  sampler_ptr q;
  make(opts(-1.0f), q);
  EXPECT_EQ(sample(q.s, {0.1f, 3.0f, -1.0f, 2.9f}), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  rng r{11};
  for (float t : {0.1f, 0.7f, 1.0f, 2.0f, 100.0f}) {
    sampler_ptr p;
    make(opts(t, 1, 1.0f, 0.0f, 1234), p);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> l(257);
      for (float &x : l) x = uniform(r, -3, 3);
      EXPECT_EQ(sample(p.s, l), std::max_element(l.begin(), l.end()) - l.begin()) << "temperature " << t;
    }
  }
}

std::vector<bp_token> draws(uint64_t seed, const std::vector<float> &l, int n) {
  sampler_ptr p;
  make(opts(1.0f, 0, 1.0f, 0.0f, seed), p);
  std::vector<bp_token> out;
  for (int i = 0; i < n; ++i) out.push_back(sample(p.s, l));
  return out;
}

TEST(Sampler, ASeedGivesOneSequenceAndAnotherSeedAnother) {
  std::vector<float> l(16);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 0.01f * static_cast<float>(i);
  auto a = draws(42, l, 64), b = draws(42, l, 64), c = draws(43, l, 64);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);

  // reset restarts the sequence from the seed.
  sampler_ptr p;
  make(opts(1.0f, 0, 1.0f, 0.0f, 42), p);
  for (int i = 0; i < 10; ++i) sample(p.s, l);
  bp_sampler_reset(p.s);
  EXPECT_EQ(bp_last_status(), BP_OK);
  std::vector<bp_token> again;
  for (int i = 0; i < 64; ++i) again.push_back(sample(p.s, l));
  EXPECT_EQ(again, a);
}

// 7 degrees of freedom: P(chi-square > 40) is about 1e-6.
TEST(Sampler, FrequenciesMatchSoftmaxOverTemperature) {
  const std::vector<float> l = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -0.5f, 0.25f};
  const int n = 200000;
  for (float t : {0.5f, 1.0f, 1.7f}) {
    sampler_ptr p;
    make(opts(t, 0, 1.0f, 0.0f, 99), p);
    std::vector<double> scaled(l.size());
    for (size_t i = 0; i < l.size(); ++i) scaled[i] = static_cast<double>(l[i]) / t;
    auto count = histogram(p.s, l, n);
    EXPECT_LT(chi_square(count, softmax(scaled), n), 40.0) << "temperature " << t;
  }
}

// Top-k keeps the k largest, then temperature spreads the rest.
TEST(Sampler, FrequenciesAfterTopKAreTheRenormalisedSoftmax) {
  const std::vector<float> l = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -0.5f, 0.25f};
  const int n = 200000;
  const float t = 1.3f;
  sampler_ptr p;
  make(opts(t, 3, 1.0f, 0.0f, 5), p);
  std::vector<double> scaled(l.size(), -std::numeric_limits<double>::infinity());
  for (int id : {2, 5, 0}) scaled[static_cast<size_t>(id)] = static_cast<double>(l[static_cast<size_t>(id)]) / t;
  auto count = histogram(p.s, l, n);
  // 2 degrees of freedom: P(chi-square > 28) is about 1e-6.
  EXPECT_LT(chi_square(count, softmax(scaled), n), 28.0);
}

// The tokens a filter keeps, from the set of tokens drawn at a high
// temperature (every kept token is then likely enough to appear).
std::set<int> drawn(const bp_sampler_options &o, const std::vector<float> &l, int n) {
  sampler_ptr p;
  make(o, p);
  auto count = histogram(p.s, l, n);
  std::set<int> ids;
  for (size_t i = 0; i < count.size(); ++i)
    if (count[i] > 0) ids.insert(static_cast<int>(i));
  return ids;
}

// Top-p: the smallest prefix (most likely first, at temperature 1) whose
// cumulative probability reaches p.
std::set<int> top_p_reference(const std::vector<float> &l, double top_p) {
  std::vector<double> d(l.begin(), l.end());
  auto prob = softmax(d);
  std::set<int> keep;
  double cum = 0.0;
  for (int id : order(l)) {
    keep.insert(id);
    cum += prob[static_cast<size_t>(id)];
    if (cum >= top_p) break;
  }
  return keep;
}

// Min-p: p_i >= min_p * p_max.
std::set<int> min_p_reference(const std::vector<float> &l, double min_p) {
  std::vector<double> d(l.begin(), l.end());
  auto prob = softmax(d);
  double pmax = *std::max_element(prob.begin(), prob.end());
  std::set<int> keep;
  for (size_t i = 0; i < prob.size(); ++i)
    if (prob[i] >= min_p * pmax) keep.insert(static_cast<int>(i));
  return keep;
}

const std::vector<float> kFilterLogits = {0.3f, 2.0f, -1.2f, 1.1f, 0.9f, -0.4f, 1.6f, 0.0f, -2.5f, 0.6f};

TEST(Sampler, TopPKeepsExactlyTheReferencePrefix) {
  for (float top_p : {0.05f, 0.3f, 0.5f, 0.7f, 0.9f, 0.99f}) {
    auto want = top_p_reference(kFilterLogits, top_p);
    // Temperature 10 after the filter: every kept token gets >= 1/20 or so.
    auto got = drawn(opts(10.0f, 0, top_p, 0.0f, 3), kFilterLogits, 20000);
    EXPECT_EQ(got, want) << "top_p " << top_p;
  }
  // top_p >= 1 keeps everything.
  EXPECT_EQ(drawn(opts(10.0f, 0, 1.0f, 0.0f, 3), kFilterLogits, 20000).size(), kFilterLogits.size());
}

TEST(Sampler, MinPKeepsExactlyTheReferenceSet) {
  for (float min_p : {0.01f, 0.05f, 0.1f, 0.2f, 0.4f, 0.6f, 1.0f}) {
    auto want = min_p_reference(kFilterLogits, min_p);
    auto got = drawn(opts(10.0f, 0, 1.0f, min_p, 4), kFilterLogits, 20000);
    EXPECT_EQ(got, want) << "min_p " << min_p;
  }
}

TEST(Sampler, TopKThenTopPThenMinPCompose) {
  // top_k 6 keeps {1, 6, 3, 4, 9, 0}; top-p 0.9 of those (renormalised);
  // then min-p 0.3 of what is left.
  std::vector<float> l = kFilterLogits;
  std::vector<float> k6(l.size(), -std::numeric_limits<float>::infinity());
  for (int id : {1, 6, 3, 4, 9, 0}) k6[static_cast<size_t>(id)] = l[static_cast<size_t>(id)];
  auto after_p = top_p_reference(k6, 0.9);
  std::vector<float> kp(l.size(), -std::numeric_limits<float>::infinity());
  for (int id : after_p) kp[static_cast<size_t>(id)] = l[static_cast<size_t>(id)];
  auto want = min_p_reference(kp, 0.3);
  auto got = drawn(opts(10.0f, 6, 0.9f, 0.3f, 8), l, 20000);
  EXPECT_EQ(got, want);
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> l = {ninf, 0.0f, ninf, 0.0f, ninf};
  auto got = drawn(opts(1.0f, 0, 1.0f, 0.0f, 9), l, 2000);
  EXPECT_EQ(got, (std::set<int>{1, 3}));
  got = drawn(opts(1.0f, 4, 0.95f, 0.05f, 9), l, 2000);
  EXPECT_EQ(got, (std::set<int>{1, 3}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  bp_sampler_options o = opts(0.0f);
  o.repeat_penalty = 1.2f;
  {
    sampler_ptr p;
    make(o, p);
    // 1.0 / 1.2 = 0.833 < 0.9: the argmax moves from 0 to 1.
    bp_sampler_accept(p.s, 0);
    EXPECT_EQ(sample(p.s, {1.0f, 0.9f, -3.0f}), 1);
  }
  {
    sampler_ptr p;
    make(o, p);
    // -0.5 * 1.2 = -0.6 < -0.55: the argmax moves from 0 to 1.
    bp_sampler_accept(p.s, 0);
    EXPECT_EQ(sample(p.s, {-0.5f, -0.55f, -3.0f}), 1);
  }
  {
    // Once per distinct token: 0 accepted three times is still 1.0 / 1.2.
    sampler_ptr p;
    make(o, p);
    for (int i = 0; i < 3; ++i) bp_sampler_accept(p.s, 0);
    EXPECT_EQ(sample(p.s, {1.0f, 0.8f}), 0);
  }
  {
    // Only the last repeat_last_n tokens count.
    bp_sampler_options w = o;
    w.repeat_last_n = 2;
    sampler_ptr p;
    make(w, p);
    bp_sampler_accept(p.s, 0);
    bp_sampler_accept(p.s, 2);
    bp_sampler_accept(p.s, 2);
    EXPECT_EQ(sample(p.s, {1.0f, 0.9f, -3.0f}), 0);
  }
  {
    // Sampled tokens are remembered too: with a window of one, greedy
    // alternates between two close logits.
    bp_sampler_options w = o;
    w.repeat_penalty = 2.0f;
    w.repeat_last_n = 1;
    sampler_ptr p;
    make(w, p);
    std::vector<bp_token> seq;
    for (int i = 0; i < 6; ++i) seq.push_back(sample(p.s, {1.0f, 0.9f, 0.0f}));
    EXPECT_EQ(seq, (std::vector<bp_token>{0, 1, 0, 1, 0, 1}));
    // reset forgets the history.
    bp_sampler_reset(p.s);
    EXPECT_EQ(sample(p.s, {1.0f, 0.9f, 0.0f}), 0);
  }
  {
    // Out-of-vocabulary history is ignored.
    sampler_ptr p;
    make(o, p);
    bp_sampler_accept(p.s, 1000);
    bp_sampler_accept(p.s, -1);
    EXPECT_EQ(sample(p.s, {1.0f, 0.9f}), 0);
  }
}

void expect_bad(bp_sampler_options o, const std::string &words) {
  bp_sampler *s = reinterpret_cast<bp_sampler *>(1);
  EXPECT_EQ(bp_sampler_new(&o, &s), BP_ERR_INVALID_ARGUMENT) << words;
  EXPECT_EQ(s, nullptr);
  std::string msg = bp_last_error();
  EXPECT_NE(msg.find(words), std::string::npos) << msg;
}

TEST(Sampler, BadOptionsAreErrorsThatSayTheRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  bp_sampler_options o = bp_sampler_default_options();
  o.temperature = nan;
  expect_bad(o, "temperature");
  o.temperature = inf;
  expect_bad(o, "finite");
  o = bp_sampler_default_options();
  o.top_p = -0.1f;
  expect_bad(o, "top_p is -0.1; it must be a finite number >= 0");
  o.top_p = nan;
  expect_bad(o, "top_p");
  o = bp_sampler_default_options();
  o.min_p = 1.5f;
  expect_bad(o, "[0, 1]");
  o.min_p = -0.01f;
  expect_bad(o, "min_p");
  o = bp_sampler_default_options();
  o.repeat_penalty = 0.0f;
  expect_bad(o, "repeat_penalty is 0; it must be a finite number > 0");
  o.repeat_penalty = nan;
  expect_bad(o, "repeat_penalty");
  o = bp_sampler_default_options();
  o.repeat_last_n = -1;
  expect_bad(o, "repeat_last_n is -1; it must be >= 0");
  o = bp_sampler_default_options();
  o.struct_size = 0;
  expect_bad(o, "sizeof(bp_sampler_options)");

  // Good options at the edges.
  o = bp_sampler_default_options();
  o.temperature = -2.0f;
  o.top_p = 0.0f;
  o.min_p = 1.0f;
  o.repeat_penalty = 0.5f;
  o.top_k = -5;
  sampler_ptr p;
  make(o, p);
}

TEST(Sampler, NullPointersAndBadLogitsAreErrors) {
  bp_sampler_options o = bp_sampler_default_options();
  EXPECT_EQ(bp_sampler_new(&o, nullptr), BP_ERR_INVALID_ARGUMENT);
  bp_sampler *s = nullptr;
  EXPECT_EQ(bp_sampler_new(nullptr, &s), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("options is NULL"), std::string::npos);

  sampler_ptr p;
  make(opts(1.0f), p);
  std::vector<float> l = {0.0f, 1.0f};
  bp_token t;
  EXPECT_EQ(bp_sampler_sample(nullptr, l.data(), 2, &t), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sampler_sample(p.s, nullptr, 2, &t), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sampler_sample(p.s, l.data(), 2, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_sampler_sample(p.s, l.data(), 0, &t), BP_ERR_INVALID_ARGUMENT);
  l[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(bp_sampler_sample(p.s, l.data(), 2, &t), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("logits[1]"), std::string::npos) << bp_last_error();
  l = {-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(bp_sampler_sample(p.s, l.data(), 2, &t), BP_ERR_INVALID_ARGUMENT);

  bp_sampler_accept(nullptr, 0);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  bp_sampler_reset(nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  bp_sampler_free(nullptr);
  EXPECT_EQ(bp_last_status(), BP_OK);

  // A success clears the last error.
  l = {0.0f, 1.0f};
  EXPECT_EQ(bp_sampler_sample(p.s, l.data(), 2, &t), BP_OK);
  EXPECT_EQ(bp_last_status(), BP_OK);
}

}  // namespace
