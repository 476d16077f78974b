// graph_fuzz_test.cpp: random graph building against the core's validation
// (docs/failures.md #11: plugins may not abort on what the core passes them, so
// the core must never pass them a malformed node).
//
// Each round makes random leaves (types, shapes, some bad), then tries random
// ops, views and parameters on random operands (some NULL, some of the wrong
// type or shape). Every call either returns NULL with a message, or a tensor
// whose memory lies inside its source. Every accepted node then goes through
// bp_graph_validate and is computed on the cpu plugin with random data
// (ids partly out of range): the answer is OK or, for an id out of range
// only, an error with a message; never a crash. The ASan + UBSan pass of the test suite runs this too, so an
// out-of-bounds access by a kernel on a node the core let through fails it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace {

class GraphFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_registry_add_path(BP_TEST_PLUGIN_DIR);
    ASSERT_EQ(bp_backend_new("cpu:threads=2", &cpu_), BP_OK) << bp_last_error();
  }
  void TearDown() override { bp_backend_free(cpu_); }

  bp_backend *cpu_ = nullptr;
};

struct round_state {
  std::mt19937 rng;
  bp_context *ctx = nullptr;
  std::vector<bp_tensor *> pool;  // leaves, views and nodes accepted so far
  int refused = 0, accepted = 0;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  bool chance(int percent) { return pick(0, 99) < percent; }
  // Mostly small positive sizes; sometimes 0 or negative.
  int64_t dim() {
    static const int64_t sizes[] = {1, 1, 2, 3, 4, 5, 7, 8, 0, -1};
    return sizes[pick(0, chance(95) ? 7 : 9)];
  }
  bp_tensor *operand() {
    if (pool.empty() || chance(3)) return nullptr;
    return pool[static_cast<size_t>(pick(0, static_cast<int>(pool.size()) - 1))];
  }
  bp_type type() {
    if (chance(3)) return static_cast<bp_type>(pick(3, 9));  // not a type
    static const bp_type types[] = {BP_TYPE_F32, BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_I32};
    return types[pick(0, 3)];
  }
};

// A view's bytes lie inside the tensor whose memory it aliases.
void expect_inside_source(const bp_tensor *t) {
  size_t offs = 0;
  const bp_tensor *root = t;
  while (root->view_src) {
    offs += root->view_offs;
    root = root->view_src;
  }
  if (root == t || bp_tensor_nelements(t) == 0) return;
  EXPECT_LE(offs + bp_tensor_nbytes(t), bp_tensor_nbytes(root))
      << "view '" << t->name << "' (" << bp_op_name(t->op) << ") reaches past '" << root->name << "'";
}

// One random construction call on random operands.
bp_tensor *random_op(round_state &s) {
  bp_context *ctx = s.ctx;
  bp_tensor *a = s.operand(), *b = s.operand();
  const float f = std::uniform_real_distribution<float>(-2.0f, 2.0f)(s.rng);
  switch (s.pick(0, 24)) {
    case 0:
      return bp_add(ctx, a, b);
    case 1:
      return bp_sub(ctx, a, b);
    case 2:
      return bp_mul(ctx, a, b);
    case 3:
      return bp_div(ctx, a, b);
    case 4:
      return bp_scale(ctx, a, f);
    case 5:
      return bp_clamp(ctx, a, f, f + static_cast<float>(s.pick(-1, 2)));
    case 6:
      return bp_unary(ctx, a, static_cast<bp_op>(s.pick(0, 60)));  // often not a unary op
    case 7:
      return s.chance(50) ? bp_sum_rows(ctx, a) : bp_mean(ctx, a);
    case 8:
      return bp_argmax(ctx, a);
    case 9:
      return s.chance(50) ? bp_norm(ctx, a, 1e-5f) : bp_rms_norm(ctx, a, s.chance(90) ? 1e-5f : -1.0f);
    case 10:
      return bp_soft_max(ctx, a, s.chance(50) ? b : nullptr, f);
    case 11:
    case 12:
      return bp_mul_mat(ctx, a, b);
    case 13:
      return bp_get_rows(ctx, a, b);
    case 14:
      return bp_cpy(ctx, a, b);
    case 15:
      return s.chance(50) ? bp_cont(ctx, a) : bp_cast(ctx, a, s.type());
    case 16:
      return bp_concat(ctx, a, b, s.pick(-1, 4));
    case 17:
      return bp_rope(ctx, a, b, s.pick(-2, 8),
                     s.chance(80) ? (s.chance(50) ? BP_ROPE_NORMAL : BP_ROPE_NEOX) : s.pick(0, 5), 10000.0f,
                     s.chance(90) ? 1.0f : 0.0f);
    case 18:
      return bp_permute(ctx, a, s.pick(-1, 3), s.pick(0, 4), s.pick(0, 3), s.pick(0, 3));
    case 19:
      return bp_transpose(ctx, a);
    case 20: {
      int64_t ne[4] = {s.dim(), s.dim(), s.dim(), s.dim()};
      return bp_reshape(ctx, a, s.pick(0, 5), ne);
    }
    case 21: {
      if (!a) return bp_view_1d(ctx, a, 1, 0);
      const int64_t n = bp_tensor_nelements(a);
      return bp_view_1d(ctx, a, s.pick(-1, static_cast<int>(n) + 1),
                        static_cast<size_t>(s.pick(0, 3)) * bp_type_size(a->type));
    }
    case 22: {
      if (!a) return bp_view_2d(ctx, a, 1, 1, 4, 0);
      const size_t es = bp_type_size(a->type);
      return bp_view_2d(ctx, a, s.dim(), s.dim(), es * static_cast<size_t>(s.pick(0, 9)),
                        es * static_cast<size_t>(s.pick(0, 4)) + (s.chance(10) ? 1 : 0));
    }
    case 23: {
      if (!a) return bp_view_4d(ctx, a, 1, 1, 1, 1, 4, 4, 4, 0);
      const size_t es = bp_type_size(a->type);
      return bp_view_4d(ctx, a, s.dim(), s.dim(), s.dim(), s.dim(), es * static_cast<size_t>(s.pick(0, 9)),
                        es * static_cast<size_t>(s.pick(0, 40)), es * static_cast<size_t>(s.pick(0, 120)),
                        es * static_cast<size_t>(s.pick(0, 4)));
    }
    default: {
      int64_t ne[4] = {s.dim(), s.dim(), s.dim(), s.dim()};
      return bp_tensor_new(ctx, s.type(), s.pick(0, 5), ne);
    }
  }
}

// Random contents for every leaf with memory: values in [-2, 2], ids in
// [-1, 8] (some out of range for GET_ROWS); a quantized leaf gets a float's
// bytes at the start of each block, whatever they decode to.
void fill_leaves(round_state &s, const bp_graph *g) {
  for (size_t i = 0; i < bp_graph_leaf_count(g); ++i) {
    bp_tensor *t = bp_graph_leaf(g, i);
    if (!t->data || t->view_src) continue;
    std::vector<unsigned char> bytes(bp_tensor_nbytes(t));
    const size_t es = bp_type_size(t->type);
    for (size_t off = 0; off + es <= bytes.size(); off += es) {
      if (t->type == BP_TYPE_I32) {
        int32_t v = s.pick(-1, 8);
        std::memcpy(&bytes[off], &v, 4);
      } else if (t->type == BP_TYPE_F16) {
        uint16_t v = bp_fp32_to_fp16(std::uniform_real_distribution<float>(-2.0f, 2.0f)(s.rng));
        std::memcpy(&bytes[off], &v, 2);
      } else if (es < 4) {
        // BF16 (2 bytes): the top half of a float is a valid bf16 value.
        const float f = std::uniform_real_distribution<float>(-2.0f, 2.0f)(s.rng);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        const uint16_t v = static_cast<uint16_t>(u >> 16);
        std::memcpy(&bytes[off], &v, 2);
      } else {
        float v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(s.rng);
        std::memcpy(&bytes[off], &v, 4);
      }
    }
    ASSERT_EQ(bp_tensor_set(t, bytes.data(), 0, bytes.size()), BP_OK) << bp_last_error();
  }
}

TEST_F(GraphFuzz, RandomGraphsAreRefusedWithAMessageOrComputeWithoutCrashing) {
  int refused = 0, accepted = 0, computed = 0, compute_errors = 0;
  for (unsigned round = 0; round < 2000; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    round_state s;
    s.rng.seed(round);
    s.ctx = bp_context_new(0);
    ASSERT_NE(s.ctx, nullptr);
    for (int i = 0; i < 6; ++i) {
      int64_t ne[4] = {s.dim(), s.dim(), s.dim(), s.dim()};
      bp_clear_error();
      if (bp_tensor *t = bp_tensor_new(s.ctx, s.type(), s.pick(1, 4), ne)) s.pool.push_back(t);
    }
    std::vector<bp_tensor *> nodes;
    for (int i = 0; i < 30; ++i) {
      bp_clear_error();
      bp_tensor *t = random_op(s);
      if (!t) {
        ++refused;
        ASSERT_STRNE(bp_last_error(), "") << "a refused call must say why";
        continue;
      }
      ++accepted;
      for (int d = 0; d < BP_MAX_DIMS; ++d) ASSERT_GE(t->ne[d], 0) << bp_op_name(t->op);
      expect_inside_source(t);
      s.pool.push_back(t);
      if (t->op != BP_OP_NONE) nodes.push_back(t);
    }
    if (nodes.empty()) {
      bp_context_free(s.ctx);
      continue;
    }
    bp_graph *g = bp_graph_new(s.ctx, 0);
    ASSERT_NE(g, nullptr);
    for (bp_tensor *t : nodes) ASSERT_EQ(bp_graph_build(g, t), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
    bp_buffer *buf = nullptr;
    ASSERT_EQ(bp_context_alloc_tensors(s.ctx, cpu_, &buf), BP_OK) << bp_last_error();
    fill_leaves(s, g);
    bp_clear_error();
    if (bp_backend_graph_compute(cpu_, g) == BP_OK) {
      ++computed;
    } else {
      // Data is the only thing the core cannot check before compute: every
      // node it accepted, the cpu backend runs, so the one error left is an
      // id out of range, reported with a message.
      ++compute_errors;
      EXPECT_NE(std::strstr(bp_last_error(), "is out of range"), nullptr) << bp_last_error();
    }
    bp_buffer_free(buf);
    bp_graph_free(g);
    bp_context_free(s.ctx);
  }
  // The generator must reach both sides, or it tests nothing.
  EXPECT_GT(refused, 5000);
  EXPECT_GT(accepted, 5000);
  EXPECT_GT(computed, 500);
  std::printf("graph fuzz: %d calls refused, %d accepted; %d graphs computed, %d refused at compute\n", refused,
              accepted, computed, compute_errors);
}

}  // namespace
