// sequence_errors_test.cpp: what a bad batch or sequence call gets (model.h,
// "Sequences"): a status and a message naming the cause and the fix, with
// nothing run and the context as it was; and the one-sequence defaults.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "backplane/model.h"
#include "tiny_model.hpp"

namespace {

struct fixture {
  bp_model *model = nullptr;
  bp_model_context *ctx = nullptr;
  int n_vocab = 0;
  ~fixture() {
    bp_model_context_free(ctx);
    bp_model_free(model);
  }
};

void open(fixture *f, uint32_t n_seq, uint32_t n_ctx, bool unfused = false, uint32_t n_batch = 0) {
  bp::test::tiny_config cfg;
  bp::test::tiny_weights w;
  const std::string path = bp::test::temp_dir() + "/m.gguf";
  ASSERT_EQ(bp::test::write_tiny_model(cfg, path, &w), "");
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &f->model), BP_OK) << bp_last_error();
  bp_model_context_options o{};
  o.struct_size = sizeof o;
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;
  o.unfused_attention = unfused;
  o.n_seq = n_seq;
  ASSERT_EQ(bp_model_context_new(f->model, &o, &f->ctx), BP_OK) << bp_last_error();
  f->n_vocab = cfg.n_vocab();
}

bp_status eval(bp_model_context *c, const std::vector<int32_t> &ids, const std::vector<uint32_t> &seq,
               const std::vector<uint32_t> &pos = {}) {
  bp_model_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = ids.size();
  b.tokens = ids.data();
  b.seq_ids = seq.data();
  b.positions = pos.empty() ? nullptr : pos.data();
  return bp_model_context_eval_batch(c, &b);
}

bool says(const char *what) { return std::string(bp_last_error()).find(what) != std::string::npos; }

uint32_t length_of(const bp_model_context *c, uint32_t seq) {
  uint32_t n = 0;
  EXPECT_EQ(bp_model_context_seq_length(c, seq, &n), BP_OK) << bp_last_error();
  return n;
}

TEST(SequenceErrors, ABadBatchIsRefusedWholeAndSaysWhy) {
  fixture f;
  open(&f, 2, 16);
  if (::testing::Test::HasFatalFailure()) return;
  bp_model_context *c = f.ctx;
  ASSERT_EQ(eval(c, {5, 6, 7}, {0, 1, 0}), BP_OK) << bp_last_error();

  EXPECT_EQ(eval(c, {5, 6}, {0, 2}), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("seq_ids[1] = 2 is out of range") && says("larger n_seq")) << bp_last_error();
  // Sequence 0 continues at 2: a gap, and an overlap, are refused.
  EXPECT_EQ(eval(c, {5}, {0}, {3}), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("sequence 0 continues at position 2") && says("bp_model_context_seq_rewind")) << bp_last_error();
  EXPECT_EQ(eval(c, {5}, {0}, {1}), BP_ERR_INVALID_ARGUMENT);
  // Two tokens of one sequence at one position, within a batch.
  EXPECT_EQ(eval(c, {5, 6}, {1, 1}, {1, 1}), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("positions[1] = 1, but sequence 1 continues at position 2")) << bp_last_error();
  EXPECT_EQ(eval(c, {5, f.n_vocab}, {0, 1}), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("tokens[1]") && says("not in the vocabulary")) << bp_last_error();
  EXPECT_EQ(eval(c, {}, {}), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("no tokens")) << bp_last_error();
  EXPECT_EQ(bp_model_context_eval_batch(c, nullptr), BP_ERR_INVALID_ARGUMENT);
  bp_model_batch unset{};
  EXPECT_EQ(bp_model_context_eval_batch(c, &unset), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("sizeof(bp_model_batch)")) << bp_last_error();
  EXPECT_EQ(bp_model_context_eval_batch(nullptr, &unset), BP_ERR_INVALID_ARGUMENT);

  // 13 cells are free: 14 tokens do not fit, and nothing of them is run.
  std::vector<int32_t> ids(14, 9);
  std::vector<uint32_t> seq(14, 1);
  EXPECT_EQ(eval(c, ids, seq), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_TRUE(says("13 are left") && says("_seq_clear")) << bp_last_error();
  EXPECT_EQ(bp_model_context_cells_used(c), 3u);
  EXPECT_EQ(length_of(c, 0), 2u);
  EXPECT_EQ(length_of(c, 1), 1u);
  // The refused batches left the last good eval's logits.
  EXPECT_NE(bp_model_context_batch_logits(c, 1), nullptr);  // sequence 1's last token
  EXPECT_NE(bp_model_context_batch_logits(c, 2), nullptr);  // sequence 0's last token
  EXPECT_EQ(bp_model_context_batch_logits(c, 0), nullptr);  // not the last of its sequence
  EXPECT_EQ(bp_model_context_batch_logits(c, 3), nullptr);  // past the batch
  ids.resize(13);
  seq.resize(13);
  EXPECT_EQ(eval(c, ids, seq), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_model_context_cells_used(c), 16u);
}

TEST(SequenceErrors, BadSequenceCallsSayWhy) {
  fixture f;
  open(&f, 2, 16);
  if (::testing::Test::HasFatalFailure()) return;
  bp_model_context *c = f.ctx;
  ASSERT_EQ(eval(c, {5, 6, 7}, {0, 0, 0}), BP_OK) << bp_last_error();
  uint32_t n = 7;
  EXPECT_EQ(bp_model_context_seq_length(c, 2, &n), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(says("sequence 2 is out of range") && says("n_seq")) << bp_last_error();
  EXPECT_EQ(bp_model_context_seq_length(c, 0, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_context_seq_clear(c, 2), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_context_seq_rewind(c, 2, 0), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_context_seq_rewind(c, 0, 4), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("position 4 is past the 3 positions sequence 0 holds")) << bp_last_error();
  EXPECT_EQ(bp_model_context_seq_remove(c, 0, 2, 1), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("[p0, p1)")) << bp_last_error();
  EXPECT_EQ(bp_model_context_seq_remove(c, 2, 0, 1), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_context_seq_copy(c, 0, 0, 1), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("both sequence 0")) << bp_last_error();
  EXPECT_EQ(bp_model_context_seq_copy(c, 0, 1, 4), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("end = 4 is past the 3 positions sequence 0 holds")) << bp_last_error();
  EXPECT_EQ(bp_model_context_seq_copy(c, 0, 2, 1), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_context_seq_copy(c, 2, 1, 0), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_context_seq_clear(nullptr, 0), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_model_context_cells_used(nullptr), 0u);
  EXPECT_EQ(bp_model_context_seq_count(nullptr), 0u);
  // None of them changed anything.
  EXPECT_EQ(length_of(c, 0), 3u);
  EXPECT_EQ(length_of(c, 1), 0u);
  EXPECT_EQ(bp_model_context_cells_used(c), 3u);
  // A remove past the end is to the end; an empty range removes nothing.
  EXPECT_EQ(bp_model_context_seq_remove(c, 0, 1, 1), BP_OK);
  EXPECT_EQ(bp_model_context_cells_used(c), 3u);
  EXPECT_EQ(bp_model_context_seq_remove(c, 0, 2, 1000), BP_OK);
  EXPECT_EQ(length_of(c, 0), 2u);
}

// The transposed V cache of unfused attention takes each graph's tokens in
// consecutive cells: free cells scattered by rewinds are a clear error
// there, where the fused cache takes them.
TEST(SequenceErrors, ScatteredFreeCellsAreNamedForUnfusedAttention) {
  for (bool unfused : {true, false}) {
    SCOPED_TRACE(unfused ? "unfused" : "fused");
    fixture f;
    open(&f, 2, 8, unfused);
    if (::testing::Test::HasFatalFailure()) return;
    bp_model_context *c = f.ctx;
    ASSERT_EQ(eval(c, {1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 0, 0, 1, 1, 1, 1}), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_model_context_seq_rewind(c, 0, 3), BP_OK);  // frees cell 3
    ASSERT_EQ(bp_model_context_seq_rewind(c, 1, 3), BP_OK);  // frees cell 7
    const bp_status st = eval(c, {9, 10}, {0, 0});
    if (unfused) {
      EXPECT_EQ(st, BP_ERR_RESOURCE_EXHAUSTED);
      EXPECT_TRUE(says("2 cells are free") && says("consecutive")) << bp_last_error();
      EXPECT_EQ(bp_model_context_cells_used(c), 6u);
    } else {
      EXPECT_EQ(st, BP_OK) << bp_last_error();
      EXPECT_EQ(bp_model_context_cells_used(c), 8u);
    }
  }
}

TEST(SequenceErrors, ContextOptionsAndTheOneSequenceDefault) {
  bp::test::tiny_config cfg;
  bp::test::tiny_weights w;
  const std::string path = bp::test::temp_dir() + "/m.gguf";
  ASSERT_EQ(bp::test::write_tiny_model(cfg, path, &w), "");
  fixture f;
  ASSERT_EQ(bp_model_load(path.c_str(), nullptr, &f.model), BP_OK) << bp_last_error();
  bp_model_context_options o{};
  o.struct_size = sizeof o;
  o.n_ctx = 16;
  o.n_seq = 257;
  EXPECT_EQ(bp_model_context_new(f.model, &o, &f.ctx), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("at most 256 sequences")) << bp_last_error();
  // An options struct from before n_seq (a smaller struct_size) gets one sequence.
  o.struct_size = offsetof(bp_model_context_options, n_seq);
  ASSERT_EQ(bp_model_context_new(f.model, &o, &f.ctx), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_model_context_seq_count(f.ctx), 1u);
  // The single-sequence eval is sequence 0 of the batch path.
  const std::vector<int32_t> ids = {3, 4, 5};
  ASSERT_EQ(bp_model_context_eval(f.ctx, ids.data(), ids.size(), false), BP_OK) << bp_last_error();
  EXPECT_EQ(length_of(f.ctx, 0), 3u);
  EXPECT_EQ(bp_model_context_position(f.ctx), 3u);
  EXPECT_EQ(bp_model_context_cells_used(f.ctx), 3u);
  EXPECT_EQ(bp_model_context_batch_logits(f.ctx, 2), bp_model_context_logits(f.ctx, nullptr));
  EXPECT_EQ(eval(f.ctx, {6}, {1}), BP_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("holds 1 sequence (0..0)")) << bp_last_error();
}

}  // namespace
