// gallocr_test.cpp: the graph allocator (bp_gallocr_*) on the cpu plugin's
// buffer type.
//
// The allocator's placements are checked against a liveness model written
// here independently: for every tensor, the step that produces it and the
// last step that reads it (directly or through a view). Two tensors whose
// lifetimes overlap must not share bytes, unless the second is computed in
// place over the first at the first's last reader. The peak must stay
// within 10% of the largest live set that model finds.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backplane/backplane.h"

namespace {

std::string cpu_plugin() { return std::string(BP_TEST_PLUGIN_DIR) + "/libbp-cpu.so"; }

bool file_exists(const std::string &p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

const bp_tensor *root_of(const bp_tensor *t) {
  while (t->view_src) t = t->view_src;
  return t;
}

bool inplace_op(bp_op op) {
  return (op >= BP_OP_ADD && op <= BP_OP_SIGMOID) || op == BP_OP_NORM || op == BP_OP_RMS_NORM || op == BP_OP_SOFT_MAX ||
         op == BP_OP_ROPE;
}

// The independent liveness model of one graph.
struct liveness {
  struct life {
    int first = -1;  // producing step; -1 for leafs (alive from the start)
    int last = -1;   // last reading step; INT_MAX when never freed
    size_t bytes = 0;
  };
  std::map<const bp_tensor *, life> roots;                    // tensors that need memory
  std::map<const bp_tensor *, const bp_tensor *> inplace_on;  // node -> root it may overwrite
  size_t peak = 0;                                            // largest live set, in bytes
};

liveness model(const bp_graph *g, const bp_buffer_type *buft) {
  liveness m;
  const size_t align = bp_buffer_type_alignment(buft);
  auto bytes = [&](const bp_tensor *t) { return (bp_buffer_type_alloc_size(buft, t) + align - 1) / align * align; };
  const int n = (int)bp_graph_node_count(g);
  const int forever = 1 << 30;
  auto add_leaf = [&](const bp_tensor *t) {
    const bp_tensor *r = root_of(t);
    if (r->data || m.roots.count(r)) return;
    m.roots[r] = {-1, forever, bytes(r)};
  };
  for (size_t i = 0; i < bp_graph_leaf_count(g); ++i) add_leaf(bp_graph_leaf(g, i));
  for (int i = 0; i < n; ++i) {
    const bp_tensor *t = bp_graph_node(g, (size_t)i);
    if (!t->view_src && !t->data) m.roots[t] = {i, -1, bytes(t)};
  }
  for (int i = 0; i < n; ++i) {
    const bp_tensor *t = bp_graph_node(g, (size_t)i);
    std::vector<const bp_tensor *> read;
    for (const bp_tensor *s : t->src)
      if (s) read.push_back(s);
    if (t->view_src) read.push_back(t);
    for (const bp_tensor *s : read) {
      auto it = m.roots.find(root_of(s));
      if (it == m.roots.end()) continue;
      if (it->second.first < 0) continue;  // leafs live forever
      it->second.last = std::max(it->second.last, i);
      if (s->flags & (BP_TENSOR_FLAG_OUTPUT | BP_TENSOR_FLAG_INPUT)) it->second.last = forever;
    }
    if (t->flags & (BP_TENSOR_FLAG_OUTPUT | BP_TENSOR_FLAG_INPUT)) {
      auto it = m.roots.find(root_of(t));
      if (it != m.roots.end()) it->second.last = forever;
    }
  }
  for (auto &[t, l] : m.roots)
    if (l.last < l.first) l.last = forever;  // never read: kept (a result)
  // In place: an elementwise node over src0 of its own shape that dies here.
  for (int i = 0; i < n; ++i) {
    const bp_tensor *t = bp_graph_node(g, (size_t)i);
    if (t->view_src || !inplace_op(t->op) || !t->src[0] || !m.roots.count(t)) continue;
    const bp_tensor *a = t->src[0], *r = root_of(a);
    auto it = m.roots.find(r);
    if (it == m.roots.end() || it->second.first < 0 || it->second.last != i) continue;
    if (a->type != t->type || !bp_tensor_same_shape(a, t) || !bp_tensor_is_contiguous(a)) continue;
    if (a != r && a->view_offs != 0) continue;
    bool other_reads = false;
    for (int j = 1; j < BP_MAX_SRC; ++j)
      if (t->src[j] && root_of(t->src[j]) == r) other_reads = true;
    if (!other_reads) m.inplace_on[t] = r;
  }
  // Largest live set; an in-place pair counts once at the step they meet.
  for (int i = 0; i < n; ++i) {
    size_t live = 0;
    for (auto &[t, l] : m.roots)
      if (l.first <= i && i <= l.last) live += l.bytes;
    const bp_tensor *t = bp_graph_node(g, (size_t)i);
    auto ip = m.inplace_on.find(t);
    if (ip != m.inplace_on.end()) live -= std::min(m.roots[ip->second].bytes, m.roots[t].bytes);
    m.peak = std::max(m.peak, live);
  }
  if (n == 0)
    for (auto &[t, l] : m.roots) m.peak += l.bytes;
  return m;
}

class GallocrTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_clear_error();
    if (!file_exists(cpu_plugin())) GTEST_SKIP() << "missing " << cpu_plugin();
    bp_plugin *p = nullptr;
    ASSERT_EQ(bp_registry_load(cpu_plugin().c_str(), &p), BP_OK) << bp_last_error();
    ASSERT_GE(bp_plugin_device_count(p), 1u);
    ASSERT_EQ(bp_backend_new_on_device(bp_plugin_device(p, 0), "threads=2", &backend), BP_OK) << bp_last_error();
    buft = bp_backend_buffer_type(backend);
    ASSERT_NE(buft, nullptr);
    ctx = bp_context_new(0);
    graph = bp_graph_new(ctx, 0);
  }
  void TearDown() override {
    bp_gallocr_free(galloc);
    for (bp_buffer *b : buffers) bp_buffer_free(b);
    bp_graph_free(graph);
    bp_context_free(ctx);
    bp_backend_free(backend);
  }

  bp_tensor *f32(int64_t a, int64_t b = 1) { return bp_tensor_new_2d(ctx, BP_TYPE_F32, a, b); }
  size_t bytes(const bp_tensor *t) {
    size_t align = bp_buffer_type_alignment(buft);
    return (bp_buffer_type_alloc_size(buft, t) + align - 1) / align * align;
  }

  // Plans and places |graph|, then checks every placement against the model.
  void alloc_and_check() {
    if (!galloc) galloc = bp_gallocr_new(buft);
    ASSERT_NE(galloc, nullptr) << bp_last_error();
    liveness m = model(graph, buft);
    ASSERT_EQ(bp_gallocr_alloc_graph(galloc, graph), BP_OK) << bp_last_error();
    check_placements(m);
    size_t size = bp_gallocr_buffer_size(galloc);
    EXPECT_GE(size, m.peak) << "the allocator cannot beat the largest live set";
    EXPECT_LE(size, m.peak + m.peak / 10 + bp_buffer_type_alignment(buft)) << "peak more than 10% above live set";
    last_model = m;
  }

  void check_placements(const liveness &m) {
    const size_t align = bp_buffer_type_alignment(buft);
    size_t size = bp_gallocr_buffer_size(galloc);
    std::vector<std::pair<const bp_tensor *, liveness::life>> all(m.roots.begin(), m.roots.end());
    const char *base = nullptr;
    for (auto &[t, l] : all) {
      ASSERT_NE(t->data, nullptr) << "tensor '" << t->name << "' was not placed";
      ASSERT_NE(t->buffer, nullptr);
      if (!base) base = static_cast<const char *>(bp_buffer_base(t->buffer));
      ASSERT_EQ(bp_buffer_base(t->buffer), base) << "every tensor in the one buffer";
      size_t off = (size_t)(static_cast<const char *>(t->data) - base);
      EXPECT_EQ(off % align, 0u) << t->name;
      EXPECT_LE(off + bp_buffer_type_alloc_size(buft, t), size) << t->name << " outside the buffer";
    }
    for (size_t i = 0; i < all.size(); ++i)
      for (size_t j = i + 1; j < all.size(); ++j) {
        auto [a, la] = all[i];
        auto [b, lb] = all[j];
        bool overlap_time = la.first <= lb.last && lb.first <= la.last;
        if (!overlap_time) continue;
        auto shares = [&](const bp_tensor *x, const bp_tensor *y) {  // y computed in place over x
          auto it = m.inplace_on.find(y);
          return it != m.inplace_on.end() && it->second == x && x->data == y->data;
        };
        if (shares(a, b) || shares(b, a)) continue;
        const char *pa = static_cast<const char *>(a->data), *pb = static_cast<const char *>(b->data);
        bool overlap_bytes = pa < pb + bp_tensor_nbytes(b) && pb < pa + bp_tensor_nbytes(a);
        EXPECT_FALSE(overlap_bytes) << "'" << a->name << "' [" << la.first << "," << la.last << "] and '" << b->name
                                    << "' [" << lb.first << "," << lb.last << "] share bytes while both alive";
      }
    // Views point into their roots.
    for (size_t i = 0; i < bp_graph_node_count(graph); ++i) {
      const bp_tensor *t = bp_graph_node(graph, i);
      if (t->view_src) {
        EXPECT_EQ(t->data, static_cast<const char *>(t->view_src->data) + t->view_offs) << t->name;
      }
    }
  }

  bp_backend *backend = nullptr;
  bp_buffer_type *buft = nullptr;
  bp_context *ctx = nullptr;
  bp_graph *graph = nullptr;
  bp_gallocr *galloc = nullptr;
  std::vector<bp_buffer *> buffers;
  liveness last_model;
};

TEST_F(GallocrTest, InPlaceChainPeaksAtTwoTensors) {
  bp_tensor *x = bp_tensor_set_name(f32(256, 4), "x");  // a leaf: kept for the whole graph
  bp_tensor *t = x;
  for (int i = 0; i < 8; ++i) t = (i % 2) ? bp_relu(ctx, t) : bp_scale(ctx, t, 0.5f);
  ASSERT_EQ(bp_graph_build(graph, t), BP_OK) << bp_last_error();
  alloc_and_check();
  EXPECT_EQ(bp_gallocr_buffer_size(galloc), 2 * bytes(x));
  // Every node after the first one reuses the first one's memory.
  for (size_t i = 1; i < bp_graph_node_count(graph); ++i)
    EXPECT_EQ(bp_graph_node(graph, i)->data, bp_graph_node(graph, 0)->data);
  EXPECT_NE(bp_graph_node(graph, 0)->data, x->data) << "a leaf is never overwritten";
}

TEST_F(GallocrTest, DiamondKeepsBothBranchesAlive) {
  bp_tensor *x = f32(33, 7);
  bp_tensor *a = bp_exp(ctx, bp_scale(ctx, x, 2.0f));  // branch 1
  bp_tensor *b = bp_sqr(ctx, bp_sum_rows(ctx, x));     // branch 2, a smaller tensor
  bp_tensor *y = bp_mul(ctx, a, b);                    // joins them (b broadcasts)
  ASSERT_NE(y, nullptr) << bp_last_error();
  ASSERT_EQ(bp_graph_build(graph, y), BP_OK) << bp_last_error();
  alloc_and_check();
  EXPECT_NE(a->data, b->data);
  EXPECT_EQ(y->data, a->data) << "MUL takes over src0 when it dies";
}

TEST_F(GallocrTest, MlpBlockPeakMatchesLiveSet) {
  const int64_t d = 64, h = 257, n = 7;
  bp_tensor *x = bp_tensor_set_flags(f32(d, n), BP_TENSOR_FLAG_INPUT);
  bp_tensor *w1 = f32(d, h), *b1 = f32(h), *w2 = f32(h, d), *b2 = f32(d);
  bp_tensor *t = bp_add(ctx, bp_mul_mat(ctx, w1, x), b1);
  t = bp_gelu(ctx, t);
  t = bp_add(ctx, bp_mul_mat(ctx, w2, t), b2);
  t = bp_add(ctx, t, x);  // residual
  t = bp_rms_norm(ctx, t, 1e-5f);
  ASSERT_NE(t, nullptr) << bp_last_error();
  ASSERT_EQ(bp_graph_build(graph, t), BP_OK) << bp_last_error();
  alloc_and_check();
  // Leafs (x, w1, b1, w2, b2) plus the widest live pair, h x n twice at most.
  size_t leafs = bytes(x) + bytes(w1) + bytes(b1) + bytes(w2) + bytes(b2);
  EXPECT_LE(bp_gallocr_buffer_size(galloc), leafs + 2 * bytes(f32(h, n)));
}

TEST_F(GallocrTest, OutputsAreNeverReused) {
  bp_tensor *x = f32(128);
  bp_tensor *mid = bp_tensor_set_flags(bp_relu(ctx, x), BP_TENSOR_FLAG_OUTPUT);
  bp_tensor *t = bp_scale(ctx, mid, 3.0f);  // would be in place over mid, but mid is an output
  t = bp_exp(ctx, t);
  t = bp_neg(ctx, t);
  ASSERT_EQ(bp_graph_build(graph, t), BP_OK);
  alloc_and_check();
  for (size_t i = 0; i < bp_graph_node_count(graph); ++i)
    if (bp_graph_node(graph, i) != mid) {
      EXPECT_NE(bp_graph_node(graph, i)->data, mid->data);
    }
}

TEST_F(GallocrTest, ExternallyAllocatedTensorsAreLeftAlone) {
  bp_context *wctx = bp_context_new(0);
  bp_tensor *w = bp_tensor_new_2d(wctx, BP_TYPE_F32, 16, 16);
  bp_buffer *wbuf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(wctx, backend, &wbuf), BP_OK) << bp_last_error();
  buffers.push_back(wbuf);
  void *w_data = w->data;
  bp_tensor *x = f32(16, 3);
  bp_tensor *y = bp_relu(ctx, bp_mul_mat(ctx, w, x));
  ASSERT_EQ(bp_graph_build(graph, y), BP_OK);
  alloc_and_check();
  EXPECT_EQ(w->data, w_data);
  EXPECT_EQ(w->buffer, wbuf);
  // Planning the same graph again re-plans what this allocator placed.
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, graph), BP_OK) << bp_last_error();
  check_placements(last_model);
  bp_context_free(wctx);
}

TEST_F(GallocrTest, ViewsAliasTheirSourceAndExtendItsLife) {
  bp_tensor *x = f32(12, 6);
  bp_tensor *a = bp_exp(ctx, x);
  bp_tensor *v = bp_view_2d(ctx, a, 6, 6, a->nb[1], 6 * sizeof(float));  // right half of each row
  bp_tensor *r = bp_reshape_2d(ctx, a, 6, 12);
  bp_tensor *b = bp_relu(ctx, bp_scale(ctx, x, -1.0f));
  bp_tensor *y = bp_add(ctx, bp_cont(ctx, v), bp_view_2d(ctx, r, 6, 6, r->nb[1], 0));
  y = bp_add(ctx, y, bp_view_2d(ctx, b, 6, 6, b->nb[1], 0));
  ASSERT_NE(y, nullptr) << bp_last_error();
  ASSERT_EQ(bp_graph_build(graph, y), BP_OK) << bp_last_error();
  alloc_and_check();
}

// Random graphs: every invariant, many seeds.
TEST_F(GallocrTest, RandomGraphsKeepInvariants) {
  for (int seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    bp_graph_free(graph);
    bp_context_free(ctx);
    ctx = bp_context_new(0);
    graph = bp_graph_new(ctx, 0);
    std::mt19937 rng((unsigned)seed);
    auto pick = [&](int n) { return (int)(rng() % (unsigned)n); };
    const int64_t N = 1 + pick(40), M = 1 + pick(9);
    std::vector<bp_tensor *> pool = {f32(N, M), f32(N, M)};
    if (pick(2)) bp_tensor_set_flags(pool[0], BP_TENSOR_FLAG_INPUT);
    const int n_ops = 5 + pick(30);
    for (int k = 0; k < n_ops; ++k) {
      bp_tensor *a = pool[(size_t)pick((int)pool.size())];
      bp_tensor *b = pool[(size_t)pick((int)pool.size())];
      bp_tensor *t = nullptr;
      switch (pick(7)) {
        case 0:
          t = bp_unary(ctx, a, (bp_op)(BP_OP_NEG + pick(BP_OP_SIGMOID - BP_OP_NEG + 1)));
          break;
        case 1:
          t = bp_add(ctx, a, b);
          break;
        case 2:
          t = bp_mul(ctx, a, bp_sum_rows(ctx, b));
          break;
        case 3:
          t = bp_mul_mat(ctx, f32(N, N), a);
          break;
        case 4:
          t = bp_reshape_2d(ctx, bp_relu(ctx, bp_reshape_2d(ctx, a, M, N)), N, M);
          break;
        case 5:
          t = bp_cont(ctx, bp_transpose(ctx, bp_cont(ctx, bp_transpose(ctx, a))));
          break;
        default:
          t = bp_scale(ctx, a, 0.5f);
          break;
      }
      ASSERT_NE(t, nullptr) << bp_last_error();
      if (pick(8) == 0) bp_tensor_set_flags(t, BP_TENSOR_FLAG_OUTPUT);
      pool.push_back(t);
    }
    ASSERT_EQ(bp_graph_build(graph, pool.back()), BP_OK) << bp_last_error();
    if (pick(2)) {
      ASSERT_EQ(bp_graph_build(graph, pool[pool.size() / 2]), BP_OK) << bp_last_error();
    }
    bp_gallocr_free(galloc);
    galloc = nullptr;
    alloc_and_check();
    if (HasFatalFailure()) return;
  }
}

// Results through the graph allocator equal results with every tensor in its
// own memory (bp_context_alloc_tensors), for a graph that reuses memory a lot.
TEST_F(GallocrTest, ResultsMatchPlainAllocation) {
  const int64_t d = 33, h = 65, n = 7;
  auto build = [&](bp_context *c, std::vector<bp_tensor *> &leafs) {
    auto t2 = [&](int64_t a, int64_t b) { return bp_tensor_new_2d(c, BP_TYPE_F32, a, b); };
    bp_tensor *x = t2(d, n), *w1 = t2(d, h), *b1 = t2(h, 1), *w2 = t2(h, d);
    leafs = {x, w1, b1, w2};
    bp_tensor *t = bp_silu(c, bp_add(c, bp_mul_mat(c, w1, x), b1));
    t = bp_mul_mat(c, w2, bp_scale(c, t, 0.25f));
    t = bp_add(c, bp_rms_norm(c, t, 1e-6f), x);
    bp_tensor *s = bp_soft_max(c, bp_cont(c, bp_transpose(c, t)), nullptr, 1.0f);
    return bp_mul(c, bp_tanh(c, s), bp_exp(c, bp_neg(c, bp_sqr(c, s))));
  };
  auto fill = [](std::vector<bp_tensor *> &leafs) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (bp_tensor *t : leafs) {
      std::vector<float> v((size_t)bp_tensor_nelements(t));
      for (float &f : v) f = u(rng);
      ASSERT_EQ(bp_tensor_set(t, v.data(), 0, v.size() * sizeof(float)), BP_OK) << bp_last_error();
    }
  };
  auto read = [](const bp_tensor *t) {
    std::vector<float> v((size_t)bp_tensor_nelements(t));
    EXPECT_EQ(bp_tensor_get(t, v.data(), 0, v.size() * sizeof(float)), BP_OK) << bp_last_error();
    return v;
  };
  // Reference: every tensor in its own memory.
  bp_context *rctx = bp_context_new(0);
  std::vector<bp_tensor *> rleafs;
  bp_tensor *rout = build(rctx, rleafs);
  ASSERT_NE(rout, nullptr) << bp_last_error();
  bp_graph *rg = bp_graph_new(rctx, 0);
  ASSERT_EQ(bp_graph_build(rg, rout), BP_OK);
  bp_buffer *rbuf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(rctx, backend, &rbuf), BP_OK) << bp_last_error();
  buffers.push_back(rbuf);
  fill(rleafs);
  ASSERT_EQ(bp_backend_graph_compute(backend, rg), BP_OK) << bp_last_error();
  std::vector<float> want = read(rout);
  // Through the graph allocator, twice (the second run re-plans in place).
  std::vector<bp_tensor *> leafs;
  bp_tensor *out = build(ctx, leafs);
  ASSERT_EQ(bp_graph_build(graph, out), BP_OK);
  galloc = bp_gallocr_new(buft);
  for (int run = 0; run < 2; ++run) {
    ASSERT_EQ(bp_gallocr_alloc_graph(galloc, graph), BP_OK) << bp_last_error();
    fill(leafs);
    ASSERT_EQ(bp_backend_graph_compute(backend, graph), BP_OK) << bp_last_error();
    std::vector<float> got = read(out);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i << " run " << run;
  }
  size_t own_memory = 0;
  for (size_t i = 0; i < bp_context_tensor_count(ctx); ++i) {
    const bp_tensor *t = bp_context_tensor(ctx, i);
    if (!t->view_src) own_memory += bytes(t);
  }
  EXPECT_LT(bp_gallocr_buffer_size(galloc), own_memory) << "memory is reused";
  bp_graph_free(rg);
  bp_context_free(rctx);
}

TEST_F(GallocrTest, ReserveSizesTheBufferAndAllocDoesNotGrowIt) {
  bp_tensor *t = f32(1000, 3);
  for (int i = 0; i < 4; ++i) t = bp_mul_mat(ctx, f32(1000, 1000), t);
  ASSERT_EQ(bp_graph_build(graph, t), BP_OK);
  galloc = bp_gallocr_new(buft);
  ASSERT_EQ(bp_gallocr_reserve(galloc, graph), BP_OK) << bp_last_error();
  size_t reserved = bp_gallocr_buffer_size(galloc);
  EXPECT_GT(reserved, 0u);
  EXPECT_EQ(t->data, nullptr) << "reserve plans but places nothing";
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, graph), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_gallocr_buffer_size(galloc), reserved);
  EXPECT_NE(t->data, nullptr);
}

TEST_F(GallocrTest, GrowingKeepsEarlierGraphsPlannable) {
  galloc = bp_gallocr_new(buft);
  bp_tensor *small = bp_exp(ctx, f32(8, 8));
  bp_graph *g_small = bp_graph_new(ctx, 0);
  ASSERT_EQ(bp_graph_build(g_small, small), BP_OK);
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, g_small), BP_OK) << bp_last_error();
  size_t first = bp_gallocr_buffer_size(galloc);
  // A larger graph replaces the buffer; the small graph's tensors now point
  // into freed memory and must be planned again, not trusted as external.
  bp_tensor *big = bp_exp(ctx, f32(512, 64));
  ASSERT_EQ(bp_graph_build(graph, big), BP_OK);
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, graph), BP_OK) << bp_last_error();
  EXPECT_GT(bp_gallocr_buffer_size(galloc), first);
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, g_small), BP_OK) << bp_last_error();
  const char *base = static_cast<const char *>(bp_buffer_base(small->buffer));
  for (const bp_tensor *t : {small, small->src[0]}) {
    EXPECT_EQ(bp_buffer_base(t->buffer), base);
    EXPECT_LE((size_t)(static_cast<const char *>(t->data) - base) + bytes(t), bp_gallocr_buffer_size(galloc));
  }
  std::vector<float> ones(64, 1.0f), got(64);
  ASSERT_EQ(bp_tensor_set(small->src[0], ones.data(), 0, 64 * sizeof(float)), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(backend, g_small), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(small, got.data(), 0, 64 * sizeof(float)), BP_OK);
  for (float v : got) EXPECT_FLOAT_EQ(v, std::exp(1.0f));
  bp_graph_free(g_small);
}

// A graph kept aside while others are planned (a model context's graph
// cache): planned in one buffer, then another graph fits that buffer, then a
// larger one replaces it. The kept graph's tensors point into the freed
// buffer and must still be recognised as this allocator's.
TEST_F(GallocrTest, AKeptGraphIsPlannableAfterTheBufferIsReplacedTwice) {
  galloc = bp_gallocr_new(buft);
  auto graph_of = [&](int64_t rows) {
    bp_tensor *t = bp_exp(ctx, f32(64, rows));
    bp_graph *g = bp_graph_new(ctx, 0);
    EXPECT_EQ(bp_graph_build(g, t), BP_OK);
    return std::make_pair(g, t);
  };
  auto [g_small, t_small] = graph_of(1);
  auto [g_kept, t_kept] = graph_of(32);
  auto [g_other, t_other] = graph_of(16);
  auto [g_big, t_big] = graph_of(512);
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, g_small), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, g_kept), BP_OK) << bp_last_error();   // replaces the buffer
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, g_other), BP_OK) << bp_last_error();  // fits it
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, g_big), BP_OK) << bp_last_error();    // replaces it again
  ASSERT_EQ(bp_gallocr_alloc_graph(galloc, g_kept), BP_OK) << bp_last_error();
  const char *base = static_cast<const char *>(bp_buffer_base(t_big->buffer));
  EXPECT_EQ(bp_buffer_base(t_kept->buffer), base) << "the kept graph was placed in the current buffer";
  std::vector<float> ones(64 * 32, 1.0f), got(64 * 32);
  ASSERT_EQ(bp_tensor_set(t_kept->src[0], ones.data(), 0, ones.size() * sizeof(float)), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_backend_graph_compute(backend, g_kept), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_tensor_get(t_kept, got.data(), 0, got.size() * sizeof(float)), BP_OK);
  for (float v : got) EXPECT_FLOAT_EQ(v, std::exp(1.0f));
  for (bp_graph *g : {g_small, g_kept, g_other, g_big}) bp_graph_free(g);
}

TEST_F(GallocrTest, BadInputIsAStatus) {
  EXPECT_EQ(bp_gallocr_new(nullptr), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("buft"), std::string::npos) << bp_last_error();
  galloc = bp_gallocr_new(buft);
  EXPECT_EQ(bp_gallocr_alloc_graph(galloc, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_gallocr_reserve(nullptr, graph), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_gallocr_buffer_size(nullptr), 0u);
  bp_gallocr_free(nullptr);
}

TEST_F(GallocrTest, FailedAllocationLeavesTheAllocatorUsable) {
  // 2^45 floats = 128 TiB: no machine gives that.
  bp_tensor *huge = bp_tensor_new_1d(ctx, BP_TYPE_F32, (int64_t)1 << 45);
  ASSERT_NE(huge, nullptr) << bp_last_error();
  ASSERT_EQ(bp_graph_build(graph, bp_relu(ctx, huge)), BP_OK);
  galloc = bp_gallocr_new(buft);
  bp_status st = bp_gallocr_alloc_graph(galloc, graph);
  EXPECT_TRUE(st == BP_ERR_OUT_OF_HOST_MEMORY || st == BP_ERR_OUT_OF_DEVICE_MEMORY || st == BP_ERR_RESOURCE_EXHAUSTED)
      << bp_status_name(st) << ": " << bp_last_error();
  EXPECT_NE(std::string(bp_last_error()).find("bytes"), std::string::npos) << bp_last_error();
  // The same allocator then serves a normal graph.
  bp_graph_clear(graph);
  bp_tensor *y = bp_exp(ctx, f32(7, 7));
  ASSERT_EQ(bp_graph_build(graph, y), BP_OK);
  alloc_and_check();
}

}  // namespace
