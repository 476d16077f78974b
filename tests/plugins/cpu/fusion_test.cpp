// fusion_test.cpp: the cpu backend's fused node pairs (plugins/cpu/fusion.hpp):
// RMS_NORM then MUL, SILU then MUL (either operand order, with a node
// between them), against double-precision references computed here, fused
// results bit-equal to fuse=false, the first node's result still written for
// a later node and the caller, and pairs that must not fuse still right.
// The fake host's trace tells a fused pair apart: its clock counts calls, so
// the second node's whole span starts at the very reading the first's ends.
#include <cmath>
#include <map>

#include "cpu_harness.hpp"

namespace cpu_test {
namespace {

const bp_param_value kFuseOff{"fuse", BP_PARAM_BOOL, 0, "false"};

void fill(const bp_tensor *t, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  for_each(t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { put(t, d(rng), i0, i1, i2, i3); });
}

// |t|'s data moved up to the next 64-byte boundary (the pool leaves 64 bytes
// of room), as the allocator places tensors: the reshaped pairs need it.
bp_tensor *aligned(bp_tensor *t) {
  const auto a = reinterpret_cast<uintptr_t>(t->data);
  t->data = reinterpret_cast<void *>((a + 63) / 64 * 64);
  return t;
}

void set_eps(bp_tensor *t, float eps) { std::memcpy(&t->op_params[0], &eps, sizeof eps); }

// Every element of |t| within a relative 1e-5 (absolute near zero) of
// |ref|(i0, i1).
void expect_near(const bp_tensor *t, const std::function<double(int64_t, int64_t)> &ref, const char *what) {
  int bad = 0;
  for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
    for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
      const double want = ref(i0, i1), got = get(t, i0, i1);
      if (!(std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want))) && bad++ < 5)
        ADD_FAILURE() << what << " [" << i0 << ", " << i1 << "]: " << got << " want " << want;
    }
  EXPECT_EQ(bad, 0) << what;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// A graph and the tensors a test checks. Built twice (fused and not) from
// the same seeds.
struct graph_case {
  tensor_pool pool;
  std::vector<bp_tensor *> nodes;
  std::vector<bp_tensor *> outputs;  // compared bit for bit between fuse on and off
};

// x [n, rows] -> norm = RMS_NORM(x) -> out = MUL(norm, w), w [n] or [n, rows];
// later = ADD(norm, x) reads the norm's result again, and the caller does.
struct norm_mul {
  int64_t n, rows;
  bool row_weight;
  bp_tensor *x = nullptr, *w = nullptr, *norm = nullptr, *out = nullptr, *later = nullptr;
  void build(graph_case &g) {
    x = g.pool.make(BP_TYPE_F32, {n, rows});
    w = g.pool.make(BP_TYPE_F32, {n, row_weight ? 1 : rows});
    fill(x, 1);
    fill(w, 2, 0.5, 1.5);
    norm = g.pool.node(BP_OP_RMS_NORM, BP_TYPE_F32, {n, rows}, {x});
    set_eps(norm, 1e-5f);
    out = g.pool.node(BP_OP_MUL, BP_TYPE_F32, {n, rows}, {norm, w});
    later = g.pool.node(BP_OP_ADD, BP_TYPE_F32, {n, rows}, {norm, x});
    g.nodes = {norm, out, later};
    g.outputs = {norm, out, later};
  }
  double ref_norm(int64_t i0, int64_t i1) const {
    if (inv_rms.empty()) {  // once per row, in double
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += get(x, i, r) * get(x, i, r);
        inv_rms.push_back(1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5));
      }
    }
    return get(x, i0, i1) * inv_rms[static_cast<size_t>(i1)];
  }
  mutable std::vector<double> inv_rms = {};
  void check() const {
    expect_near(
        norm, [&](int64_t i0, int64_t i1) { return ref_norm(i0, i1); }, "norm");
    expect_near(
        out, [&](int64_t i0, int64_t i1) { return ref_norm(i0, i1) * get(w, i0, row_weight ? 0 : i1); }, "out");
    expect_near(
        later, [&](int64_t i0, int64_t i1) { return ref_norm(i0, i1) + get(x, i0, i1); }, "later");
  }
};

// s = SILU(g); [between = SCALE(u, 0.5)]; out = MUL(s, between or u) or
// MUL(between or u, s); later = SUB(s, g).
struct silu_mul {
  int64_t n, rows;
  bool silu_first;  // s is MUL's src0
  bool between;     // a node between SILU and MUL (as SwiGLU's up projection)
  bp_tensor *gate = nullptr, *up = nullptr, *s = nullptr, *mid = nullptr, *out = nullptr, *later = nullptr;
  void build(graph_case &g) {
    gate = aligned(g.pool.make(BP_TYPE_F32, {n, rows}));
    up = aligned(g.pool.make(BP_TYPE_F32, {n, rows}));
    fill(gate, 3, -6.0, 6.0);
    fill(up, 4);
    s = aligned(g.pool.node(BP_OP_SILU, BP_TYPE_F32, {n, rows}, {gate}));
    bp_tensor *other = up;
    g.nodes = {s};
    if (between) {
      mid = aligned(g.pool.node(BP_OP_SCALE, BP_TYPE_F32, {n, rows}, {up}));
      const float half = 0.5f;
      std::memcpy(&mid->op_params[0], &half, sizeof half);
      g.nodes.push_back(mid);
      other = mid;
    }
    out = aligned(
        g.pool.node(BP_OP_MUL, BP_TYPE_F32, {n, rows}, silu_first ? std::vector{s, other} : std::vector{other, s}));
    later = g.pool.node(BP_OP_SUB, BP_TYPE_F32, {n, rows}, {s, gate});
    g.nodes.push_back(out);
    g.nodes.push_back(later);
    g.outputs = {s, out, later};
    if (mid) g.outputs.push_back(mid);
  }
  void check() const {
    const double f = between ? 0.5 : 1.0;
    expect_near(
        s, [&](int64_t i0, int64_t i1) { return silu(get(gate, i0, i1)); }, "silu");
    expect_near(
        out, [&](int64_t i0, int64_t i1) { return silu(get(gate, i0, i1)) * f * get(up, i0, i1); }, "out");
    expect_near(
        later, [&](int64_t i0, int64_t i1) { return silu(get(gate, i0, i1)) - get(gate, i0, i1); }, "later");
  }
};

// The whole-node spans of a traced run, by node.
struct span_times {
  std::map<const bp_tensor *, std::vector<bp_trace_node_span>> whole;
  explicit span_times(host_log &log) {
    for (const auto &s : log.spans)
      if (s.thread == BP_TRACE_WHOLE_NODE) whole[s.node].push_back(s);
  }
  // Every node once; true when |b|'s span starts at the clock reading |a|'s
  // ends (the clock counts readings: only a fused pair shares one).
  bool fused(const bp_tensor *a, const bp_tensor *b) const {
    return whole.at(a).front().end_ns == whole.at(b).front().begin_ns;
  }
  uint64_t begin(const bp_tensor *t) const { return whole.at(t).front().begin_ns; }
};

// Runs |c| with fusion off, then on (traced) over the same memory (the
// streamed stores' peeling depends on addresses); checks the references,
// bit equality, and whether |first| and |second| fused as |want_fused| says.
template <typename Case>
void run_both(Case c, int threads, bool want_fused, bp_tensor *Case::*first, bp_tensor *Case::*second) {
  SCOPED_TRACE(::testing::Message() << "n " << c.n << " rows " << c.rows << " threads " << threads);
  graph_case g;
  c.build(g);
  loaded_plugin p_on(threads), p_off(threads, {kFuseOff});
  ASSERT_TRUE(p_on.ok() && p_off.ok());
  ASSERT_EQ(p_off.compute(g.nodes), BP_OK);
  c.check();
  std::vector<std::vector<char>> unfused;
  for (const bp_tensor *t : g.outputs) {
    const char *d = static_cast<const char *>(t->data);
    unfused.emplace_back(d, d + bp_tensor_nbytes(t));
    std::memset(t->data, 0xAB, bp_tensor_nbytes(t));  // garbage the fused run must overwrite
  }
  p_on.log.tracing = true;
  ASSERT_EQ(p_on.compute(g.nodes), BP_OK);
  c.check();
  for (size_t i = 0; i < g.outputs.size(); ++i)
    EXPECT_EQ(std::memcmp(g.outputs[i]->data, unfused[i].data(), unfused[i].size()), 0)
        << "output " << i << " differs between fuse on and off";
  const span_times t(p_on.log);
  ASSERT_EQ(t.whole.size(), g.nodes.size()) << "every node traced";
  for (const bp_tensor *n : g.nodes) EXPECT_EQ(t.whole.at(n).size(), 1u) << n->name << " traced once";
  EXPECT_EQ(t.fused(c.*first, c.*second), want_fused);
}

TEST(CpuFusion, RmsNormThenMulByARowWeight) {
  for (int threads : {1, 2})
    for (int64_t n : {7, 33, 2048})
      for (int64_t rows : {1, 3, 64}) run_both(norm_mul{n, rows, true}, threads, true, &norm_mul::norm, &norm_mul::out);
}

TEST(CpuFusion, RmsNormThenMulBySameShape) {
  for (int threads : {1, 2})
    for (int64_t n : {5, 1000})
      for (int64_t rows : {1, 7, 200})  // 1000 x 200 on 2 threads: chunks of rows
        run_both(norm_mul{n, rows, false}, threads, true, &norm_mul::norm, &norm_mul::out);
}

TEST(CpuFusion, SiluThenMulEitherOrder) {
  for (int threads : {1, 2})
    for (bool silu_first : {true, false})
      for (int64_t n : {9, 2048, 8192})  // 2048 and 8192: reshaped to rows of 1024, split over threads
        for (int64_t rows : {1, 3})
          run_both(silu_mul{n, rows, silu_first, false}, threads, true, &silu_mul::s, &silu_mul::out);
}

TEST(CpuFusion, SiluThenMulAcrossAnIndependentNode) {
  for (int threads : {1, 2})
    for (bool silu_first : {true, false})
      for (int64_t n : {31, 4096}) {
        silu_mul c{n, 2, silu_first, true};
        run_both(c, threads, true, &silu_mul::s, &silu_mul::out);
      }
}

// The node between runs first: the fused pair's spans come after its own.
TEST(CpuFusion, TheNodeBetweenRunsBeforeThePair) {
  silu_mul c{64, 4, true, true};
  graph_case g;
  c.build(g);
  loaded_plugin p(2);
  ASSERT_TRUE(p.ok());
  p.log.tracing = true;
  ASSERT_EQ(p.compute(g.nodes), BP_OK);
  c.check();
  const span_times t(p.log);
  EXPECT_TRUE(t.fused(c.s, c.out));
  EXPECT_LT(t.begin(c.mid), t.begin(c.s));
}

// One long row (a large model's SwiGLU in a decode step): element-wise pairs
// are read as rows of 1024, so both threads take part.
TEST(CpuFusion, ALongRowSplitsOverThreads) {
  silu_mul c{32768, 1, true, false};
  graph_case g;
  c.build(g);
  loaded_plugin p(2);
  ASSERT_TRUE(p.ok());
  p.log.tracing = true;
  ASSERT_EQ(p.compute(g.nodes), BP_OK);
  c.check();
  std::map<int, int> parts;
  for (const auto &s : p.log.spans)
    if (s.node == c.s || s.node == c.out) ++parts[s.thread];
  EXPECT_EQ(parts[0], 2);
  EXPECT_EQ(parts[1], 2) << "the second thread did its part of both nodes";
}

// Off: nothing fuses, and the backend says so when it starts.
TEST(CpuFusion, FuseFalseRunsEveryNodeAlone) {
  norm_mul c{16, 2, true};
  graph_case g;
  c.build(g);
  loaded_plugin p(2, {kFuseOff});
  ASSERT_TRUE(p.ok());
  p.log.tracing = true;
  ASSERT_EQ(p.compute(g.nodes), BP_OK);
  c.check();
  EXPECT_FALSE(span_times(p.log).fused(c.norm, c.out));
  bool logged = false;
  for (const auto &l : p.log.lines) logged |= l == "2 threads, fusion off";
  EXPECT_TRUE(logged);
}

// Pairs that must not fuse, still right: MUL of the norm by a broadcast of
// the norm's own first row (a view of bytes another thread writes); MUL of
// a reshaped view of the norm; a MUL whose result lies over the norm's
// input one row further on (a thread would overwrite rows another has yet
// to read); a SILU whose MUL has a node between them that reads the SILU.
TEST(CpuFusion, PairsThatMustNotFuseStayRight) {
  const int64_t n = 40, rows = 6;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    {  // broadcast of the norm's first row
      tensor_pool pool;
      bp_tensor *x = pool.make(BP_TYPE_F32, {n, rows});
      fill(x, 5);
      bp_tensor *norm = pool.node(BP_OP_RMS_NORM, BP_TYPE_F32, {n, rows}, {x});
      set_eps(norm, 1e-5f);
      bp_tensor *row0 = pool.view(norm, {n}, {4}, 0);
      bp_tensor *out = pool.node(BP_OP_MUL, BP_TYPE_F32, {n, rows}, {norm, row0});
      loaded_plugin p(threads);
      ASSERT_TRUE(p.ok());
      p.log.tracing = true;
      ASSERT_EQ(p.compute({norm, row0, out}), BP_OK);
      norm_mul ref{n, rows, true, x};
      expect_near(
          out, [&](int64_t i0, int64_t i1) { return ref.ref_norm(i0, i1) * ref.ref_norm(i0, 0); }, "bcast");
      EXPECT_FALSE(span_times(p.log).fused(norm, out));
    }
    {  // a reshaped view of the norm: [2n, rows / 2]
      tensor_pool pool;
      bp_tensor *x = pool.make(BP_TYPE_F32, {n, rows});
      bp_tensor *w = pool.make(BP_TYPE_F32, {2 * n});
      fill(x, 6);
      fill(w, 7);
      bp_tensor *norm = pool.node(BP_OP_RMS_NORM, BP_TYPE_F32, {n, rows}, {x});
      set_eps(norm, 1e-5f);
      bp_tensor *wide = pool.view(norm, {2 * n, rows / 2}, {4, size_t(8 * n)}, 0);
      wide->op = BP_OP_RESHAPE;
      bp_tensor *out = pool.node(BP_OP_MUL, BP_TYPE_F32, {2 * n, rows / 2}, {wide, w});
      loaded_plugin p(threads);
      ASSERT_TRUE(p.ok());
      ASSERT_EQ(p.compute({norm, wide, out}), BP_OK);
      norm_mul ref{n, rows, true, x};
      expect_near(
          out, [&](int64_t i0, int64_t i1) { return ref.ref_norm(i0 % n, 2 * i1 + i0 / n) * get(w, i0); }, "reshaped");
    }
    {  // the MUL's result over the norm's input, one row on
      tensor_pool pool;
      bp_tensor *base = pool.make(BP_TYPE_F32, {n, rows + 1});
      bp_tensor *w = pool.make(BP_TYPE_F32, {n});
      fill(base, 8);
      fill(w, 9);
      bp_tensor *x = pool.view(base, {n, rows}, {4, size_t(4 * n)}, 0);
      std::vector<double> x0(static_cast<size_t>(n * rows));
      for (int64_t i = 0; i < n * rows; ++i) x0[static_cast<size_t>(i)] = get(x, i % n, i / n);
      bp_tensor *norm = pool.node(BP_OP_RMS_NORM, BP_TYPE_F32, {n, rows}, {x});
      set_eps(norm, 1e-5f);
      bp_tensor *out = pool.view(base, {n, rows}, {4, size_t(4 * n)}, size_t(4 * n));
      out->op = BP_OP_MUL;
      out->view_src = nullptr;
      out->src[0] = norm;
      out->src[1] = w;
      loaded_plugin p(threads);
      ASSERT_TRUE(p.ok());
      p.log.tracing = true;
      ASSERT_EQ(p.compute({norm, out}), BP_OK);
      auto ref = [&](int64_t i0, int64_t i1) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += x0[size_t(i1 * n + i)] * x0[size_t(i1 * n + i)];
        return x0[size_t(i1 * n + i0)] / std::sqrt(ss / double(n) + 1e-5) * get(w, i0);
      };
      expect_near(out, ref, "over the input");
      EXPECT_FALSE(span_times(p.log).fused(norm, out));
    }
    {  // a node between SILU and MUL that reads the SILU
      tensor_pool pool;
      bp_tensor *gate = pool.make(BP_TYPE_F32, {n, rows}), *up = pool.make(BP_TYPE_F32, {n, rows});
      fill(gate, 10);
      fill(up, 11);
      bp_tensor *s = pool.node(BP_OP_SILU, BP_TYPE_F32, {n, rows}, {gate});
      bp_tensor *sums = pool.node(BP_OP_SUM_ROWS, BP_TYPE_F32, {1, rows}, {s});
      bp_tensor *out = pool.node(BP_OP_MUL, BP_TYPE_F32, {n, rows}, {s, up});
      loaded_plugin p(threads);
      ASSERT_TRUE(p.ok());
      p.log.tracing = true;
      ASSERT_EQ(p.compute({s, sums, out}), BP_OK);
      expect_near(
          out, [&](int64_t i0, int64_t i1) { return silu(get(gate, i0, i1)) * get(up, i0, i1); }, "silu mul");
      expect_near(
          sums,
          [&](int64_t, int64_t i1) {
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += silu(get(gate, i, i1));
            return sum;
          },
          "sums");
      const span_times t(p.log);
      EXPECT_FALSE(t.fused(s, out));
      EXPECT_LT(t.begin(s), t.begin(sums)) << "the graph's order kept";
    }
  }
}

}  // namespace
}  // namespace cpu_test
