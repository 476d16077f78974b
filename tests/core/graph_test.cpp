// graph_test.cpp: graph building (order, dedup, leafs, limits, deep chains,
// cycles, building node by node) and validation of nodes edited after building.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/core_test_util.hpp"

namespace {

using bp_test::CoreTest;

std::vector<bp_tensor *> nodes_of(const bp_graph *g) {
  std::vector<bp_tensor *> out;
  for (size_t i = 0; i < bp_graph_node_count(g); ++i) out.push_back(bp_graph_node(g, i));
  return out;
}

std::vector<bp_tensor *> leafs_of(const bp_graph *g) {
  std::vector<bp_tensor *> out;
  for (size_t i = 0; i < bp_graph_leaf_count(g); ++i) out.push_back(bp_graph_leaf(g, i));
  return out;
}

class GraphTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    g = bp_graph_new(ctx, 0);
    ASSERT_NE(g, nullptr);
  }
  void TearDown() override {
    bp_graph_free(g);
    CoreTest::TearDown();
  }
  bp_graph *g = nullptr;
};

TEST_F(GraphTest, PostOrderWithSharedNodesOnce) {
  bp_tensor *x = f32(8, 4), *w = f32(8, 16), *bias = f32(16);
  bp_tensor *mm = bp_mul_mat(ctx, w, x);      // [16, 4]
  bp_tensor *h = bp_add(ctx, mm, bias);
  bp_tensor *act = bp_gelu(ctx, h);
  bp_tensor *out = bp_mul(ctx, act, h);      // h used twice
  ASSERT_NE(out, nullptr) << bp_last_error();
  ASSERT_EQ(bp_graph_build(g, out), BP_OK) << bp_last_error();
  EXPECT_EQ(nodes_of(g), (std::vector<bp_tensor *>{mm, h, act, out}));
  EXPECT_EQ(leafs_of(g), (std::vector<bp_tensor *>{w, x, bias}));
  EXPECT_TRUE(out->flags & BP_TENSOR_FLAG_OUTPUT);
  EXPECT_FALSE(h->flags & BP_TENSOR_FLAG_OUTPUT);
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_graph_node(g, 4), nullptr);
  EXPECT_EQ(bp_graph_leaf(g, 3), nullptr);
}

TEST_F(GraphTest, EveryNodeComesAfterItsSources) {
  // A diamond-rich graph: each node uses two earlier ones.
  std::vector<bp_tensor *> t = {f32(7, 3), f32(7, 3)};
  for (int i = 0; i < 40; ++i) {
    t.push_back(i % 3 == 0 ? bp_add(ctx, t[t.size() - 1], t[t.size() / 2])
                           : bp_sub(ctx, t[i], t[t.size() - 2]));
    ASSERT_NE(t.back(), nullptr) << bp_last_error();
  }
  ASSERT_EQ(bp_graph_build(g, t.back()), BP_OK);
  std::vector<bp_tensor *> order = nodes_of(g);
  std::vector<bp_tensor *> leafs = leafs_of(g);
  for (size_t i = 0; i < order.size(); ++i) {
    for (int s = 0; s < 2; ++s) {
      bp_tensor *src = order[i]->src[s];
      const bool is_leaf = std::find(leafs.begin(), leafs.end(), src) != leafs.end();
      const auto pos = std::find(order.begin(), order.end(), src);
      EXPECT_TRUE(is_leaf || pos < order.begin() + i);
    }
  }
  // No duplicates.
  std::vector<bp_tensor *> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
}

TEST_F(GraphTest, ViewsAreNodesAndCpyBringsItsDestination) {
  bp_tensor *a = f32(6, 4);
  bp_tensor *kv = f16(48);
  bp_tensor *slot = bp_view_1d(ctx, kv, 24, 48);
  bp_tensor *t = bp_transpose(ctx, a);
  bp_tensor *c = bp_cpy(ctx, bp_cont(ctx, t), slot);
  ASSERT_NE(c, nullptr) << bp_last_error();
  ASSERT_EQ(bp_graph_build(g, c), BP_OK);
  std::vector<bp_tensor *> n = nodes_of(g);
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(n[0], t);
  EXPECT_EQ(n[1]->op, BP_OP_CONT);
  EXPECT_EQ(n[2], slot);
  EXPECT_EQ(n[3], c);
  EXPECT_EQ(leafs_of(g), (std::vector<bp_tensor *>{a, kv}));
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
}

TEST_F(GraphTest, BuildingSeveralOutputsAccumulates) {
  bp_tensor *a = f32(4);
  bp_tensor *x = bp_neg(ctx, a), *y = bp_exp(ctx, a);
  bp_tensor *z = bp_add(ctx, x, y);
  ASSERT_EQ(bp_graph_build(g, x), BP_OK);
  ASSERT_EQ(bp_graph_build(g, z), BP_OK);
  ASSERT_EQ(bp_graph_build(g, x), BP_OK);  // already there: nothing added
  EXPECT_EQ(nodes_of(g), (std::vector<bp_tensor *>{x, y, z}));
  EXPECT_EQ(bp_graph_leaf_count(g), 1u);
  EXPECT_TRUE(x->flags & BP_TENSOR_FLAG_OUTPUT);
  EXPECT_TRUE(z->flags & BP_TENSOR_FLAG_OUTPUT);
  bp_graph_clear(g);
  EXPECT_EQ(bp_graph_node_count(g), 0u);
  EXPECT_EQ(bp_graph_leaf_count(g), 0u);
  ASSERT_EQ(bp_graph_build(g, y), BP_OK);
  EXPECT_EQ(nodes_of(g), (std::vector<bp_tensor *>{y}));
}

TEST_F(GraphTest, ALeafAloneIsAGraphWithoutNodes) {
  bp_tensor *a = f32(3);
  ASSERT_EQ(bp_graph_build(g, a), BP_OK);
  EXPECT_EQ(bp_graph_node_count(g), 0u);
  EXPECT_EQ(leafs_of(g), (std::vector<bp_tensor *>{a}));
}

TEST_F(CoreTest, MaxNodesIsEnforcedAndLeavesTheGraphAsItWas) {
  bp_graph *g = bp_graph_new(ctx, 5);
  bp_tensor *x = f32(2);
  for (int i = 0; i < 5; ++i) x = bp_neg(ctx, x);
  ASSERT_EQ(bp_graph_build(g, x), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_graph_node_count(g), 5u);
  bp_tensor *y = bp_abs(ctx, x);
  bp_clear_error();
  EXPECT_EQ(bp_graph_build(g, y), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("more than 5 nodes (max_nodes)"), std::string::npos)
      << bp_last_error();
  EXPECT_EQ(bp_graph_node_count(g), 5u);
  EXPECT_FALSE(y->flags & BP_TENSOR_FLAG_OUTPUT);
  bp_graph_free(g);

  // Leafs are capped too.
  g = bp_graph_new(ctx, 2);
  bp_tensor *s = bp_add(ctx, bp_add(ctx, f32(2), f32(2)), f32(2));
  EXPECT_EQ(bp_graph_build(g, s), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("leafs"), std::string::npos) << bp_last_error();
  EXPECT_EQ(bp_graph_leaf_count(g), 0u);
  bp_graph_free(g);
}

TEST(GraphLimitsTest, DeepChainsDoNotUseTheCallStack) {
  bp_context *ctx = bp_context_new(0);
  bp_tensor *x = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1);
  const int depth = 100000;
  for (int i = 0; i < depth; ++i) x = bp_neg(ctx, x);
  bp_graph *g = bp_graph_new(ctx, depth);
  ASSERT_EQ(bp_graph_build(g, x), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_graph_node_count(g), size_t(depth));
  EXPECT_EQ(bp_graph_node(g, depth - 1), x);
  EXPECT_EQ(bp_graph_validate(g), BP_OK);
  bp_graph_free(g);
  bp_context_free(ctx);
}

TEST_F(GraphTest, BadArguments) {
  EXPECT_EQ(bp_graph_build(nullptr, f32(1)), BP_ERR_INVALID_ARGUMENT);
  bp_clear_error();
  EXPECT_EQ(bp_graph_build(g, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(bp_graph_validate(nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_graph_node_count(nullptr), 0u);
  EXPECT_EQ(bp_graph_node(nullptr, 0), nullptr);
  bp_graph_clear(nullptr);
  bp_graph_free(nullptr);
}

TEST_F(GraphTest, CyclesAreRejected) {
  bp_tensor *a = f32(4);
  bp_tensor *x = bp_tensor_set_name(bp_neg(ctx, a), "x");
  bp_tensor *y = bp_exp(ctx, x);
  x->src[0] = y;  // an edit that makes a cycle
  EXPECT_EQ(bp_graph_build(g, y), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("cycle"), std::string::npos) << bp_last_error();
  EXPECT_EQ(bp_graph_node_count(g), 0u);
}

// ---- building by many calls ------------------------------------------------
// A client may list every node and build once per node (bp-serve does); the
// graph remembers what it holds, so each call walks only what is new.

// A DAG where node i uses node i-1 and node i/2, over two leafs.
std::vector<bp_tensor *> dag_of(bp_context *ctx, int n) {
  std::vector<bp_tensor *> t;
  bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 3), *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 3);
  for (int i = 0; i < n; ++i) {
    bp_tensor *prev = i ? t.back() : a;
    bp_tensor *far = i ? t[(size_t)i / 2] : b;
    t.push_back(i % 4 == 3 ? bp_mul(ctx, bp_exp(ctx, prev), far) : bp_add(ctx, prev, far));
  }
  return t;
}

TEST_F(GraphTest, BuildingNodeByNodeGivesTheSameGraphAsOneCall) {
  std::vector<bp_tensor *> t = dag_of(ctx, 60);
  ASSERT_NE(t.back(), nullptr) << bp_last_error();
  for (bp_tensor *x : t) ASSERT_EQ(bp_graph_build(g, x), BP_OK) << bp_last_error();
  bp_graph *once = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(once, t.back()), BP_OK) << bp_last_error();
  EXPECT_EQ(nodes_of(g), nodes_of(once));
  EXPECT_EQ(leafs_of(g), leafs_of(once));
  EXPECT_EQ(bp_graph_node_count(g), 75u);  // 60 listed, 15 EXPs only reached through src[]
  EXPECT_EQ(bp_graph_leaf_count(g), 2u);
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
  for (bp_tensor *x : t) EXPECT_TRUE(x->flags & BP_TENSOR_FLAG_OUTPUT);
  bp_graph_free(once);
}

TEST_F(GraphTest, BuildingWhatTheGraphHoldsAddsNothing) {
  std::vector<bp_tensor *> t = dag_of(ctx, 20);
  ASSERT_EQ(bp_graph_build(g, t.back()), BP_OK) << bp_last_error();
  const std::vector<bp_tensor *> nodes = nodes_of(g), leafs = leafs_of(g);
  EXPECT_FALSE(t[5]->flags & BP_TENSOR_FLAG_OUTPUT);
  for (bp_tensor *x : {t[5], t.front(), t.back(), t[5]->src[0], leafs[0]})
    EXPECT_EQ(bp_graph_build(g, x), BP_OK) << bp_last_error();
  EXPECT_EQ(nodes_of(g), nodes);
  EXPECT_EQ(leafs_of(g), leafs);
  EXPECT_TRUE(t[5]->flags & BP_TENSOR_FLAG_OUTPUT);  // still flagged as an output
  // After a clear the graph holds nothing: building again walks it all.
  bp_graph_clear(g);
  ASSERT_EQ(bp_graph_build(g, t[5]), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_graph_node(g, bp_graph_node_count(g) - 1), t[5]);
  EXPECT_EQ(bp_graph_leaf_count(g), 2u);
  ASSERT_EQ(bp_graph_build(g, t.back()), BP_OK) << bp_last_error();
  EXPECT_EQ(nodes_of(g).size(), nodes.size());
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
}

// Correctness at bp-serve's node limit, one call per node (no timing here:
// bp-bench's graph/build_per_node measures it).
TEST(GraphLimitsTest, AChainOfSixtyFiveThousandNodesBuildsOneCallPerNode) {
  bp_context *ctx = bp_context_new(0);
  const size_t n = 65536;
  std::vector<bp_tensor *> chain;
  bp_tensor *x = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1);
  for (size_t i = 0; i < n; ++i) chain.push_back(x = bp_neg(ctx, x));
  ASSERT_NE(x, nullptr) << bp_last_error();
  bp_graph *g = bp_graph_new(ctx, n);
  for (bp_tensor *t : chain) ASSERT_EQ(bp_graph_build(g, t), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_graph_node_count(g), n);
  EXPECT_EQ(bp_graph_leaf_count(g), 1u);
  EXPECT_EQ(bp_graph_node(g, 0), chain.front());
  EXPECT_EQ(bp_graph_node(g, n - 1), chain.back());
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
  // One more is past max_nodes, and changes nothing.
  bp_tensor *over = bp_neg(ctx, x);
  EXPECT_EQ(bp_graph_build(g, over), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("more than 65536 nodes (max_nodes)"), std::string::npos)
      << bp_last_error();
  EXPECT_EQ(bp_graph_node_count(g), n);
  bp_graph_free(g);
  bp_context_free(ctx);
}

TEST_F(CoreTest, AFailedBuildOnAGrownGraphLeavesItAsItWas) {
  bp_graph *g = bp_graph_new(ctx, 8);
  bp_tensor *a = f32(4);
  std::vector<bp_tensor *> chain;
  for (bp_tensor *x = a; chain.size() < 6;) chain.push_back(x = bp_neg(ctx, x));
  for (bp_tensor *x : chain) ASSERT_EQ(bp_graph_build(g, x), BP_OK) << bp_last_error();
  const std::vector<bp_tensor *> nodes = nodes_of(g), leafs = leafs_of(g);

  // Three new nodes on top of six: past max_nodes = 8.
  bp_tensor *y = bp_exp(ctx, bp_abs(ctx, bp_neg(ctx, chain.back())));
  bp_clear_error();
  EXPECT_EQ(bp_graph_build(g, y), BP_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(bp_last_error()).find("more than 8 nodes (max_nodes)"), std::string::npos) << bp_last_error();
  EXPECT_EQ(nodes_of(g), nodes);
  EXPECT_EQ(leafs_of(g), leafs);
  EXPECT_FALSE(y->flags & BP_TENSOR_FLAG_OUTPUT);

  // A cycle among new tensors above the graph.
  bp_tensor *p = bp_sqr(ctx, chain.back());
  bp_tensor *q = bp_tensor_set_name(bp_sqrt(ctx, p), "q");
  p->src[1] = q;  // an edit that makes a cycle
  bp_clear_error();
  EXPECT_EQ(bp_graph_build(g, q), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("tensor 'q' depends on itself (a cycle through src[])"),
            std::string::npos)
      << bp_last_error();
  EXPECT_EQ(nodes_of(g), nodes);
  EXPECT_EQ(leafs_of(g), leafs);

  // The failed walks left nothing behind: what fits still builds, in order.
  p->src[1] = nullptr;
  ASSERT_EQ(bp_graph_build(g, q), BP_OK) << bp_last_error();
  std::vector<bp_tensor *> want = nodes;
  want.insert(want.end(), {p, q});
  EXPECT_EQ(nodes_of(g), want);
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
  bp_graph_free(g);
}

// validate re-runs the op table on nodes edited after building.
TEST_F(GraphTest, ValidateCatchesEditedNodes) {
  bp_tensor *a = f32(8, 4), *b = f32(8, 3);
  bp_tensor *mm = bp_tensor_set_name(bp_mul_mat(ctx, a, b), "scores");
  bp_tensor *sm = bp_soft_max(ctx, mm, nullptr, 1.0f);
  ASSERT_EQ(bp_graph_build(g, sm), BP_OK);
  ASSERT_EQ(bp_graph_validate(g), BP_OK);

  auto expect_invalid = [&](const char *part) {
    bp_clear_error();
    EXPECT_EQ(bp_graph_validate(g), BP_ERR_INVALID_ARGUMENT) << part;
    EXPECT_NE(std::string(bp_last_error()).find(part), std::string::npos)
        << "missing '" << part << "' in: " << bp_last_error();
  };

  b->ne[0] = 7;  // inner dims no longer match
  expect_invalid("MUL_MAT");
  b->ne[0] = 8;
  ASSERT_EQ(bp_graph_validate(g), BP_OK);
  b->ne[0] = 7;
  bp_clear_error();
  bp_graph_validate(g);
  EXPECT_NE(std::string(bp_last_error()).find("node 'scores' (MUL_MAT)"), std::string::npos) << bp_last_error();
  EXPECT_NE(std::string(bp_last_error()).find("graph node 0"), std::string::npos) << bp_last_error();
  EXPECT_NE(std::string(bp_last_error()).find("differ in dim 0 (8 vs 7)"), std::string::npos);
  b->ne[0] = 8;

  mm->ne[1] = 5;  // output shape no longer what the sources give
  expect_invalid("its sources give [4,3,1,1]");
  mm->ne[1] = 3;

  b->type = BP_TYPE_F16;
  expect_invalid("must be f32");
  b->type = BP_TYPE_F32;

  mm->src[1] = nullptr;
  expect_invalid("source 1 is NULL");
  mm->src[1] = b;

  sm->src[2] = a;
  expect_invalid("takes at most 2");
  sm->src[2] = nullptr;

  mm->nb[1] = 1000;  // op results are dense
  expect_invalid("contiguous");
  mm->nb[1] = 16;

  sm->op = (bp_op)77;
  expect_invalid("unknown op 77");
  sm->op = BP_OP_SOFT_MAX;

  a->ne[2] = 0;
  expect_invalid("ne[2] = 0");
  a->ne[2] = 1;

  float bad_scale = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&sm->op_params[0], &bad_scale, 4);
  expect_invalid("scale");
  float one = 1.0f;
  std::memcpy(&sm->op_params[0], &one, 4);
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
}

TEST_F(GraphTest, ValidateChecksViewsAndCopies) {
  bp_tensor *a = f32(8, 4);
  bp_tensor *v = bp_view_2d(ctx, a, 4, 4, 32, 16);
  bp_tensor *dst = f32(16);
  bp_tensor *c = bp_cpy(ctx, v, dst);
  ASSERT_EQ(bp_graph_build(g, c), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();

  auto expect_invalid = [&](const char *part) {
    bp_clear_error();
    EXPECT_EQ(bp_graph_validate(g), BP_ERR_INVALID_ARGUMENT) << part;
    EXPECT_NE(std::string(bp_last_error()).find(part), std::string::npos)
        << "missing '" << part << "' in: " << bp_last_error();
  };
  v->view_offs = 32;  // last row now runs past a's end
  expect_invalid("past the end");
  v->view_offs = 16;
  v->nb[1] = 6;
  expect_invalid("nb[1] = 6");
  v->nb[1] = 32;
  v->view_src = dst;
  expect_invalid("view_src");
  v->view_src = a;
  c->view_src = nullptr;
  expect_invalid("no longer aliases");
  c->view_src = dst;
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();

  bp_tensor *r = bp_reshape_2d(ctx, a, 4, 8);
  bp_graph_clear(g);
  ASSERT_EQ(bp_graph_build(g, r), BP_OK);
  r->ne[1] = 4;  // element count changes
  expect_invalid("same number of elements");
  r->ne[1] = 8;
  EXPECT_EQ(bp_graph_validate(g), BP_OK) << bp_last_error();
}

TEST_F(GraphTest, ValidateNeedsSourcesBeforeNodes) {
  bp_tensor *a = f32(4);
  bp_tensor *x = bp_neg(ctx, a);
  bp_tensor *y = bp_abs(ctx, a);
  ASSERT_EQ(bp_graph_build(g, x), BP_OK);
  x->src[0] = y;  // y is not in the graph
  bp_clear_error();
  EXPECT_EQ(bp_graph_validate(g), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bp_last_error()).find("not a leaf or an earlier node"), std::string::npos)
      << bp_last_error();
}

}  // namespace
