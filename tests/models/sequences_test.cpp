// sequences_test.cpp: several sequences in one context (model.h,
// "Sequences"): a batch of tokens from several sequences, shared prefixes,
// rewinds and interleaved decode steps give the logits each sequence gives
// run alone in a context of its own; and the errors of bad batches and
// sequence calls.
//
// Tolerance (largest logit difference over the logits' rms): a token's
// logits in a shared batch and alone come from the same weights, positions
// and cached keys and values. What differs is where its cells are, how many
// masked cells the attention passes over and how many columns each product
// has, which can change the order in which the cpu kernels add: f32
// rounding, measured at most 1.4e-6 with an f32 cache (3e-6 with f16), so
// 1e-5. With an f16 cache, such a difference in a key or value can also
// flip its rounding to f16 (one f16 unit is 2^-11 = 4.9e-4 of the value),
// for a few values of the thousands a token reads: measured at most 3.5e-5,
// so 2e-4. A mask that let a token see another sequence's cells moves its
// logits by far more (see docs/models.md, "Sequences").
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backplane/model.h"
#include "backplane/trace.h"
#include "tiny_model.hpp"

namespace {

using bp::test::tiny_config;
using bp::test::tiny_weights;
using tokens = std::vector<int32_t>;
using ctx_ptr = std::unique_ptr<bp_model_context, decltype(&bp_model_context_free)>;

tokens prompt(int n, int n_vocab, uint32_t seed) {
  tokens ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((seed * 2654435761u + i * 40503u) % n_vocab));
  return ids;
}

tokens cat(tokens a, const tokens &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Largest |got - want| relative to the rms of |want|.
double rel_diff(const float *got, const float *want, size_t n) {
  double ss = 0, worst = 0;
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(want[i]) * want[i];
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  return worst / std::sqrt(ss / static_cast<double>(n));
}

struct variant {
  bool unfused;
  bool kv_f32;
};

class Sequences : public ::testing::TestWithParam<variant> {
 protected:
  void SetUp() override {
    path_ = bp::test::temp_dir() + "/m.gguf";
    ASSERT_EQ(bp::test::write_tiny_model(cfg_, path_, &w_), "");
    ASSERT_EQ(bp_model_load(path_.c_str(), nullptr, &model_), BP_OK) << bp_last_error();
  }
  void TearDown() override { EXPECT_EQ(bp_model_free(model_), BP_OK) << "a context was left alive"; }

  ctx_ptr context(uint32_t n_seq, uint32_t n_ctx = 128, uint32_t n_batch = 0) {
    bp_model_context_options o{};
    o.struct_size = sizeof o;
    o.n_ctx = n_ctx;
    o.n_batch = n_batch;
    o.kv_f32 = GetParam().kv_f32;
    o.unfused_attention = GetParam().unfused;
    o.n_seq = n_seq;
    bp_model_context *c = nullptr;
    EXPECT_EQ(bp_model_context_new(model_, &o, &c), BP_OK) << bp_last_error();
    return ctx_ptr(c, bp_model_context_free);
  }

  size_t n_vocab() const { return static_cast<size_t>(cfg_.n_vocab()); }
  double tol() const { return GetParam().kv_f32 ? 1e-5 : 2e-4; }

  // Every row of |ids| run alone from position 0 in a one-sequence context.
  std::vector<float> alone(const tokens &ids) {
    ctx_ptr c = context(1);
    if (!c) return {};
    EXPECT_EQ(bp_model_context_eval(c.get(), ids.data(), ids.size(), true), BP_OK) << bp_last_error();
    size_t rows = 0;
    const float *p = bp_model_context_logits(c.get(), &rows);
    EXPECT_EQ(rows, ids.size());
    return p ? std::vector<float>(p, p + rows * n_vocab()) : std::vector<float>{};
  }

  // Token |i| of the last batch has the logits of row |row| of |want|.
  void expect_row(const bp_model_context *c, size_t i, const std::vector<float> &want, size_t row) {
    const float *got = bp_model_context_batch_logits(c, i);
    ASSERT_NE(got, nullptr) << "batch token " << i << " has no logits";
    ASSERT_LE((row + 1) * n_vocab(), want.size());
    EXPECT_LT(rel_diff(got, want.data() + row * n_vocab(), n_vocab()), tol()) << "batch token " << i << ", row " << row;
  }

  tiny_config cfg_;
  tiny_weights w_;
  std::string path_;
  bp_model *model_ = nullptr;
};

// A batch as parallel arrays.
struct batch {
  tokens ids;
  std::vector<uint32_t> seq, pos;
  std::unique_ptr<bool[]> keep;  // std::vector<bool> has no data()
  void add(int32_t id, uint32_t s, uint32_t p) {
    ids.push_back(id);
    seq.push_back(s);
    pos.push_back(p);
  }
  bp_status eval(bp_model_context *c, bool all_logits, bool with_positions = true) {
    keep.reset(new bool[ids.size()]);
    for (size_t i = 0; i < ids.size(); ++i) keep[i] = true;
    bp_model_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = ids.size();
    b.tokens = ids.data();
    b.seq_ids = seq.data();
    b.positions = with_positions ? pos.data() : nullptr;
    b.logits = all_logits ? keep.get() : nullptr;
    return bp_model_context_eval_batch(c, &b);
  }
};

uint32_t length_of(const bp_model_context *c, uint32_t seq) {
  uint32_t n = 0;
  EXPECT_EQ(bp_model_context_seq_length(c, seq, &n), BP_OK) << bp_last_error();
  return n;
}

// Three sequences, their tokens interleaved in one batch, give each token
// the logits it has when its sequence runs alone; in one graph and split
// over graphs mid-sequence, with positions given and counted.
TEST_P(Sequences, ABatchOfSequencesGivesEachTheLogitsItHasAlone) {
  const std::vector<tokens> seqs = {prompt(7, cfg_.n_vocab(), 1), prompt(4, cfg_.n_vocab(), 2),
                                    prompt(9, cfg_.n_vocab(), 3)};
  std::vector<std::vector<float>> want;
  for (const tokens &s : seqs) want.push_back(alone(s));
  for (uint32_t n_batch : {0u, 6u}) {
    for (bool with_positions : {true, false}) {
      SCOPED_TRACE("n_batch " + std::to_string(n_batch) + (with_positions ? ", positions given" : ", counted"));
      ctx_ptr c = context(3, 64, n_batch);
      ASSERT_TRUE(c);
      batch b;
      for (size_t p = 0; p < 9; ++p)
        for (uint32_t s = 0; s < 3; ++s)
          if (p < seqs[s].size()) b.add(seqs[s][p], s, static_cast<uint32_t>(p));
      ASSERT_EQ(b.eval(c.get(), true, with_positions), BP_OK) << bp_last_error();
      size_t rows = 0;
      ASSERT_NE(bp_model_context_logits(c.get(), &rows), nullptr);
      EXPECT_EQ(rows, b.ids.size());
      for (size_t i = 0; i < b.ids.size(); ++i) expect_row(c.get(), i, want[b.seq[i]], b.pos[i]);
      for (uint32_t s = 0; s < 3; ++s) EXPECT_EQ(length_of(c.get(), s), seqs[s].size());
      EXPECT_EQ(bp_model_context_cells_used(c.get()), b.ids.size());
    }
  }
}

// A prompt evaluated once in sequence 0 and copied (whole, and its first
// four positions) to two more sequences, which continue differently in one
// batch: each continuation has the logits of its full text run alone, the
// prompt's cells are shared (held once), and freeing one sequence keeps the
// cells the others still hold.
TEST_P(Sequences, ACopiedPrefixContinuesAsTheFullTextAlone) {
  const int V = cfg_.n_vocab();
  const tokens P = prompt(6, V, 4), A = prompt(3, V, 5), B = prompt(2, V, 6), C = prompt(4, V, 7);
  const tokens P4(P.begin(), P.begin() + 4);
  ctx_ptr c = context(3, 64);
  ASSERT_TRUE(c);
  batch first;
  for (size_t i = 0; i < P.size(); ++i) first.add(P[i], 0, static_cast<uint32_t>(i));
  ASSERT_EQ(first.eval(c.get(), false), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_model_context_seq_copy(c.get(), 0, 1, 6), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_model_context_seq_copy(c.get(), 0, 2, 4), BP_OK) << bp_last_error();
  EXPECT_EQ(length_of(c.get(), 1), 6u);
  EXPECT_EQ(length_of(c.get(), 2), 4u);
  EXPECT_EQ(bp_model_context_cells_used(c.get()), 6u);  // shared, not copied

  batch next;
  const tokens *cont[3] = {&A, &B, &C};
  const uint32_t start[3] = {6, 6, 4};
  for (size_t k = 0; k < 4; ++k)
    for (uint32_t s = 0; s < 3; ++s)
      if (k < cont[s]->size()) next.add((*cont[s])[k], s, start[s] + static_cast<uint32_t>(k));
  ASSERT_EQ(next.eval(c.get(), true), BP_OK) << bp_last_error();
  const std::vector<float> want[3] = {alone(cat(P, A)), alone(cat(P, B)), alone(cat(P4, C))};
  for (size_t i = 0; i < next.ids.size(); ++i) expect_row(c.get(), i, want[next.seq[i]], next.pos[i]);
  EXPECT_EQ(bp_model_context_cells_used(c.get()), 6u + 9u);

  // Sequence 0 goes: its own three cells are freed, the prompt's stay.
  ASSERT_EQ(bp_model_context_seq_clear(c.get(), 0), BP_OK);
  EXPECT_EQ(length_of(c.get(), 0), 0u);
  EXPECT_EQ(bp_model_context_cells_used(c.get()), 12u);
  // Sequence 1 goes: only sequence 2's cells stay (the first four of P, and C).
  ASSERT_EQ(bp_model_context_seq_clear(c.get(), 1), BP_OK);
  EXPECT_EQ(bp_model_context_cells_used(c.get()), 8u);
  // Sequence 2 goes on into the freed cells as its text alone does.
  const tokens D = prompt(3, V, 8);
  batch more;
  for (size_t k = 0; k < D.size(); ++k) more.add(D[k], 2, 8 + static_cast<uint32_t>(k));
  ASSERT_EQ(more.eval(c.get(), true), BP_OK) << bp_last_error();
  const std::vector<float> want2 = alone(cat(cat(P4, C), D));
  for (size_t i = 0; i < D.size(); ++i) expect_row(c.get(), i, want2, 8 + i);
}

// Rewinding one sequence and evaluating other tokens gives the logits of a
// fresh run of the new text, and leaves the other sequence as it was.
TEST_P(Sequences, ARewoundSequenceEqualsAFreshRun) {
  const int V = cfg_.n_vocab();
  const tokens X = prompt(10, V, 9), Y = prompt(8, V, 10), Z = prompt(5, V, 11), W = prompt(2, V, 12);
  ctx_ptr c = context(2, 64);
  ASSERT_TRUE(c);
  batch first;
  for (size_t i = 0; i < 10; ++i) {
    first.add(X[i], 0, static_cast<uint32_t>(i));
    if (i < Y.size()) first.add(Y[i], 1, static_cast<uint32_t>(i));
  }
  ASSERT_EQ(first.eval(c.get(), false), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_model_context_seq_rewind(c.get(), 1, 3), BP_OK) << bp_last_error();
  EXPECT_EQ(length_of(c.get(), 1), 3u);
  EXPECT_EQ(bp_model_context_cells_used(c.get()), 13u);
  size_t rows = 0;
  EXPECT_NE(bp_model_context_logits(c.get(), &rows), nullptr) << "seq_rewind keeps the last eval's logits";

  batch next;
  for (size_t k = 0; k < Z.size(); ++k) {
    next.add(Z[k], 1, 3 + static_cast<uint32_t>(k));
    if (k < W.size()) next.add(W[k], 0, 10 + static_cast<uint32_t>(k));
  }
  ASSERT_EQ(next.eval(c.get(), true), BP_OK) << bp_last_error();
  const std::vector<float> want[2] = {alone(cat(X, W)), alone(cat(tokens(Y.begin(), Y.begin() + 3), Z))};
  for (size_t i = 0; i < next.ids.size(); ++i) expect_row(c.get(), i, want[next.seq[i]], next.pos[i]);

  // The single-sequence calls act on sequence 0: bp_model_context_rewind
  // forgets its positions and the logits, and leaves sequence 1 alone.
  ASSERT_EQ(bp_model_context_rewind(c.get(), 4), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_model_context_position(c.get()), 4u);
  EXPECT_EQ(length_of(c.get(), 1), 8u);
  EXPECT_EQ(bp_model_context_logits(c.get(), &rows), nullptr);
  ASSERT_EQ(bp_model_context_eval(c.get(), &X[4], 6, true), BP_OK) << bp_last_error();
  const std::vector<float> want_x = alone(X);
  for (size_t i = 0; i < 6; ++i) expect_row(c.get(), i, want_x, 4 + i);

  // A range out of the middle: the cells go, the sequence goes on after its highest position.
  ASSERT_EQ(bp_model_context_seq_remove(c.get(), 0, 2, 5), BP_OK) << bp_last_error();
  EXPECT_EQ(length_of(c.get(), 0), 10u);
  EXPECT_EQ(bp_model_context_cells_used(c.get()), 10u - 3u + 8u);
}

// Continuous batching's shape: sequences of different lengths decode one
// token per step in one batch, and a new prompt joins a running batch. Each
// sequence draws the same greedy tokens, with the same logits, as alone.
TEST_P(Sequences, InterleavedDecodeStepsMatchEachSequenceAlone) {
  const int V = cfg_.n_vocab();
  const std::vector<tokens> prompts = {prompt(1, V, 13), prompt(5, V, 14), prompt(9, V, 15), prompt(13, V, 16)};
  constexpr int k_steps = 6, k_join = 2;  // sequence 3 joins at step 2
  // Alone: the prompt, then greedy decode one token at a time.
  std::vector<std::vector<std::vector<float>>> want(4);
  std::vector<tokens> want_tokens(4);
  for (uint32_t s = 0; s < 4; ++s) {
    ctx_ptr a = context(1);
    ASSERT_TRUE(a);
    ASSERT_EQ(bp_model_context_eval(a.get(), prompts[s].data(), prompts[s].size(), false), BP_OK);
    const int steps = s == 3 ? k_steps - k_join : k_steps;
    for (int k = 0; k < steps; ++k) {
      size_t rows = 0;
      const float *p = bp_model_context_logits(a.get(), &rows);
      want[s].emplace_back(p, p + n_vocab());
      const bp_token t = bp_model_context_argmax(a.get());
      want_tokens[s].push_back(t);
      ASSERT_EQ(bp_model_context_eval(a.get(), &t, 1, false), BP_OK);
    }
  }

  ctx_ptr c = context(4, 128);
  ASSERT_TRUE(c);
  batch b;
  for (uint32_t s = 0; s < 3; ++s)
    for (size_t i = 0; i < prompts[s].size(); ++i) b.add(prompts[s][i], s, static_cast<uint32_t>(i));
  ASSERT_EQ(b.eval(c.get(), false, false), BP_OK) << bp_last_error();
  std::vector<int> last(4, -1);  // each sequence's last token in the batch
  for (size_t i = 0; i < b.ids.size(); ++i) last[b.seq[i]] = static_cast<int>(i);
  std::vector<tokens> got_tokens(4);
  for (int step = 0; step <= k_steps; ++step) {
    batch nb;
    for (uint32_t s = 0; s < 4; ++s) {
      if (last[s] < 0) continue;
      const int k = static_cast<int>(got_tokens[s].size());
      const float *row = bp_model_context_batch_logits(c.get(), static_cast<size_t>(last[s]));
      ASSERT_NE(row, nullptr) << "sequence " << s << " step " << step;
      if (k >= static_cast<int>(want[s].size())) continue;
      EXPECT_LT(rel_diff(row, want[s][k].data(), n_vocab()), tol()) << "sequence " << s << " step " << step;
      const bp_token t = static_cast<bp_token>(std::max_element(row, row + n_vocab()) - row);
      got_tokens[s].push_back(t);
      nb.add(t, s, length_of(c.get(), s));
    }
    if (step == k_join)
      for (size_t i = 0; i < prompts[3].size(); ++i) nb.add(prompts[3][i], 3, static_cast<uint32_t>(i));
    if (nb.ids.empty()) break;
    ASSERT_EQ(nb.eval(c.get(), false, false), BP_OK) << bp_last_error();
    std::fill(last.begin(), last.end(), -1);
    for (size_t i = 0; i < nb.ids.size(); ++i) last[nb.seq[i]] = static_cast<int>(i);
  }
  for (uint32_t s = 0; s < 4; ++s) EXPECT_EQ(got_tokens[s], want_tokens[s]) << "sequence " << s;
}

// ATTENTION (fused) or MUL_MAT (unfused) nodes recorded since bp_trace_start.
uint64_t nodes_of(bp_op op) {
  bp_trace_op_stat stats[64];
  size_t n = 0;
  if (bp_trace_op_stats(stats, 64, &n) != BP_OK) return 0;
  uint64_t count = 0;
  for (size_t i = 0; i < n && i < 64; ++i)
    if (stats[i].op == op) count += stats[i].count;
  return count;
}

// A decode step for 16 sequences is one graph (one attention node per
// layer, or one set of products), not 16, and gives each its own logits.
TEST_P(Sequences, ADecodeStepOfSixteenSequencesIsOneGraph) {
  const int V = cfg_.n_vocab();
  constexpr uint32_t k_n = 16;
  ctx_ptr c = context(k_n, 128);
  ASSERT_TRUE(c);
  std::vector<tokens> texts;
  batch b;
  for (uint32_t s = 0; s < k_n; ++s) {
    texts.push_back(prompt(2 + static_cast<int>(s % 3), V, 20 + s));
    for (size_t i = 0; i < texts[s].size(); ++i) b.add(texts[s][i], s, static_cast<uint32_t>(i));
  }
  ASSERT_EQ(b.eval(c.get(), false), BP_OK) << bp_last_error();
  batch step;
  for (uint32_t s = 0; s < k_n; ++s) {
    const bp_token t = static_cast<bp_token>((7 * s + 3) % static_cast<uint32_t>(V));
    step.add(t, s, static_cast<uint32_t>(texts[s].size()));
    texts[s].push_back(t);
  }
  ASSERT_EQ(bp_trace_start(nullptr), BP_OK);
  ASSERT_EQ(step.eval(c.get(), false), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_trace_stop(), BP_OK);
  const uint64_t layers = static_cast<uint64_t>(cfg_.n_layer);
  if (GetParam().unfused)
    EXPECT_EQ(nodes_of(BP_OP_MUL_MAT), layers * 9 + 1);  // q k v, two for attention, o, gate up down; output
  else
    EXPECT_EQ(nodes_of(BP_OP_ATTENTION), layers);
  size_t rows = 0;
  ASSERT_NE(bp_model_context_logits(c.get(), &rows), nullptr);
  EXPECT_EQ(rows, k_n);
  for (uint32_t s = 0; s < k_n; ++s) expect_row(c.get(), s, alone(texts[s]), texts[s].size() - 1);
}

INSTANTIATE_TEST_SUITE_P(Attention, Sequences,
                         ::testing::Values(variant{false, true}, variant{false, false}, variant{true, true},
                                           variant{true, false}),
                         [](const ::testing::TestParamInfo<variant> &i) {
                           return std::string(i.param.unfused ? "unfused" : "fused") +
                                  (i.param.kv_f32 ? "_kvf32" : "_kvf16");
                         });

}  // namespace
