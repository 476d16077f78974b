// sched_async_test.cpp: the scheduler over asynchronous backends.
//
// The partial fixture's device 1 ("partial-async") runs every backend on a
// worker thread and advertises BP_DEVICE_CAP_ASYNC and BP_DEVICE_CAP_EVENTS,
// so the scheduler takes its asynchronous paths for real: async input
// copies, slot events, pipeline slots. "partial:async=1" is the same worker
// queue on device 0, without the caps: there the scheduler must order
// everything by synchronizing. Every backend here sleeps before each queued
// graph or transfer (delay_us), so a host write or a copy that is not ordered
// after the work reading that memory gives wrong numbers, not just a race
// that TSan might see.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "scheduler/sched_test_util.hpp"

namespace sched_test {
namespace {

#define NEED_PARTIAL()                                                                             \
  do {                                                                                             \
    if (!need_partial()) GTEST_SKIP() << "missing " << partial_plugin() << " (build bp_fixtures)"; \
  } while (0)

// Queue delays long enough that the host is always ahead of the worker.
constexpr const char *kEvents = "partial:1,delay_us=300;cpu";
constexpr const char *kQueueOnly = "partial:async=1,delay_us=300;cpu";

struct mode {
  const char *label;
  const char *list;
  bool parallel;
};

std::vector<float> nan_values(size_t n) { return std::vector<float>(n, std::nanf("")); }

// out[j][i] = sum_k w[i][k] * x[j][k]: bp_mul_mat(w, x) in double.
std::vector<float> ref_mul_mat(const std::vector<float> &w, const std::vector<float> &x, int64_t K, int64_t M,
                               int64_t N) {
  std::vector<float> out((size_t)(M * N));
  for (int64_t j = 0; j < N; ++j)
    for (int64_t i = 0; i < M; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (double)w[(size_t)(i * K + k)] * x[(size_t)(j * K + k)];
      out[(size_t)(j * M + i)] = (float)acc;
    }
  return out;
}

// Three outputs that all read the input leaf x, in this node order:
//   a = w1 x   (partial: copies x in)
//   c = x * x  (cpu: SQR is not a partial op; reads x where it is)
//   b = w2 x   (partial again: reads the copy of x made for a, copies nothing)
// The last split reads a pipeline slot's copy without copying anything
// itself, and its results stay in partial memory, so consecutive runs can
// overlap on the partial queue.
struct fan_out {
  int64_t d = 33, h = 65, h2 = 17, n = 7;
  bp_tensor *x = nullptr, *w1 = nullptr, *w2 = nullptr, *a = nullptr, *c = nullptr, *b = nullptr;
  bp_graph *graph = nullptr;
  std::vector<float> w1v, w2v;

  void build(bp_context *wctx, bp_context *ctx) {
    x = bp_tensor_set_name(bp_tensor_set_flags(bp_tensor_new_2d(ctx, BP_TYPE_F32, d, n), BP_TENSOR_FLAG_INPUT), "x");
    w1 = bp_tensor_set_name(bp_tensor_new_2d(wctx, BP_TYPE_F32, d, h), "w1");
    w2 = bp_tensor_set_name(bp_tensor_new_2d(wctx, BP_TYPE_F32, d, h2), "w2");
    a = bp_tensor_set_name(bp_mul_mat(ctx, w1, x), "a");
    c = bp_tensor_set_name(bp_sqr(ctx, x), "c");
    b = bp_tensor_set_name(bp_mul_mat(ctx, w2, x), "b");
    ASSERT_NE(b, nullptr) << bp_last_error();
    graph = bp_graph_new(ctx, 0);
    for (bp_tensor *t : {a, c, b}) ASSERT_EQ(bp_graph_build(graph, t), BP_OK) << bp_last_error();
  }
  void fill_weights() {
    w1v = random_values((size_t)(d * h), 201);
    w2v = random_values((size_t)(d * h2), 202);
    write_f32(w1, w1v);
    write_f32(w2, w2v);
  }
  std::vector<float> input(unsigned seed) const { return random_values((size_t)(d * n), seed); }
  std::vector<float> want_a(const std::vector<float> &xv) const { return ref_mul_mat(w1v, xv, d, h, n); }
  std::vector<float> want_b(const std::vector<float> &xv) const { return ref_mul_mat(w2v, xv, d, h2, n); }
  static std::vector<float> want_c(const std::vector<float> &xv) {
    std::vector<float> out(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) out[i] = (float)((double)xv[i] * xv[i]);
    return out;
  }
};

class SchedAsyncTest : public SchedTest, public ::testing::WithParamInterface<mode> {
 protected:
  void start() {
    make_backends(GetParam().list);
    make_sched(GetParam().parallel);
  }
  // Queues a read of |t| on the backend that holds it: ordered after the
  // run just submitted, finished by the next bp_sched_synchronize.
  void read_later(const bp_tensor *t, std::vector<float> &into) {
    into.assign((size_t)bp_tensor_nelements(t), 0.0f);
    bp_backend *be = backend_of(t);
    ASSERT_NE(be, nullptr);
    ASSERT_EQ(bp_backend_tensor_get_async(be, t, into.data(), 0, into.size() * sizeof(float)), BP_OK)
        << bp_last_error();
  }
  int runs() const { return 2 * BP_SCHED_MAX_COPIES + 1; }  // wraps the pipeline slots twice
};

TEST_P(SchedAsyncTest, SplitGraphWithCopiesMatchesCpu) {
  NEED_PARTIAL();
  start();
  build_mlp(backends[0], /*gelu_mid=*/true);
  reference ref(cpu_ref, true);
  for (unsigned seed = 1; seed <= 3; ++seed) EXPECT_LT(nmse(run(seed), ref.run(seed)), 1e-6) << "seed " << seed;
  EXPECT_EQ(bp_sched_split_count(sched), 4);
  EXPECT_EQ(bp_sched_copy_count(sched), 4) << "x in, add1 out, gelu in, scale out";
}

TEST_P(SchedAsyncTest, ComputeAsyncThenSynchronize) {
  NEED_PARTIAL();
  start();
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  ASSERT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
  for (unsigned seed = 1; seed <= 3; ++seed) {
    write_f32(m.x, m.input(seed));
    ASSERT_EQ(bp_sched_graph_compute_async(sched, m.graph), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_sched_synchronize(sched), BP_OK) << bp_last_error();
    EXPECT_LT(nmse(read_f32(m.out), ref.run(seed)), 1e-6) << "seed " << seed;
  }
}

// Leafs are copied before graph_compute_async returns: overwriting the input
// at once (with NaNs) must not reach the run still queued on the device.
TEST_P(SchedAsyncTest, InputRewrittenRightAfterComputeAsync) {
  NEED_PARTIAL();
  start();
  build_mlp(backends[0], /*gelu_mid=*/false);  // everything but SOFT_MAX on partial
  reference ref(cpu_ref, false);
  ASSERT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
  for (unsigned seed = 1; seed <= 3; ++seed) {
    write_f32(m.x, m.input(seed));
    ASSERT_EQ(bp_sched_graph_compute_async(sched, m.graph), BP_OK) << bp_last_error();
    write_f32(m.x, nan_values((size_t)(m.d * m.n)));
    ASSERT_EQ(bp_sched_synchronize(sched), BP_OK) << bp_last_error();
    EXPECT_LT(nmse(read_f32(m.out), ref.run(seed)), 1e-6) << "seed " << seed;
  }
}

// Consecutive runs submitted without waiting, a new input each time and
// NaNs written right after each submission; each run's output is read in
// queue order. Every run must see its own input.
TEST_P(SchedAsyncTest, ConsecutiveRunsWithChangingInputs) {
  NEED_PARTIAL();
  start();
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  ASSERT_EQ(bp_sched_alloc_graph(sched, m.graph), BP_OK) << bp_last_error();
  std::vector<std::vector<float>> got((size_t)runs());
  for (int k = 0; k < runs(); ++k) {
    write_f32(m.x, m.input(100 + (unsigned)k));
    ASSERT_EQ(bp_sched_graph_compute_async(sched, m.graph), BP_OK) << bp_last_error();
    read_later(m.out, got[(size_t)k]);
    write_f32(m.x, nan_values((size_t)(m.d * m.n)));
  }
  ASSERT_EQ(bp_sched_synchronize(sched), BP_OK) << bp_last_error();
  for (int k = 0; k < runs(); ++k) EXPECT_LT(nmse(got[(size_t)k], ref.run(100 + (unsigned)k)), 1e-6) << "run " << k;
}

// As above, on a graph whose last split reads a slot's copy without copying
// anything and leaves its result on the device: nothing in a run waits for
// the device, so the host runs several submissions ahead of the queue and
// comes back to the same copy slot while an older run still reads it.
TEST_P(SchedAsyncTest, RunsAheadOfTheDeviceKeepTheirInputs) {
  NEED_PARTIAL();
  start();
  fan_out f;
  f.build(wctx, ctx);
  bp_buffer *wbuf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(wctx, backends[0], &wbuf), BP_OK) << bp_last_error();
  buffers.push_back(wbuf);
  bp_buffer_set_usage(wbuf, BP_BUFFER_USAGE_WEIGHTS);
  f.fill_weights();
  m.graph = f.graph;  // freed by the fixture
  ASSERT_EQ(bp_sched_alloc_graph(sched, f.graph), BP_OK) << bp_last_error();
  // The premise: partial | cpu | partial, and only the first split copies.
  ASSERT_EQ(bp_sched_split_count(sched), 3);
  ASSERT_EQ(bp_sched_copy_count(sched), 1);
  EXPECT_EQ(backend_of(f.a), backends[0]);
  EXPECT_EQ(backend_of(f.c), backends[1]);
  EXPECT_EQ(backend_of(f.b), backends[0]);

  const int n = runs();
  std::vector<std::vector<float>> xs((size_t)n), a((size_t)n), b((size_t)n), c((size_t)n);
  for (int k = 0; k < n; ++k) {
    xs[(size_t)k] = f.input(300 + (unsigned)k);
    write_f32(f.x, xs[(size_t)k]);
    ASSERT_EQ(bp_sched_graph_compute_async(sched, f.graph), BP_OK) << bp_last_error();
    read_later(f.a, a[(size_t)k]);
    read_later(f.b, b[(size_t)k]);
    read_later(f.c, c[(size_t)k]);
    write_f32(f.x, nan_values(xs[(size_t)k].size()));
  }
  ASSERT_EQ(bp_sched_synchronize(sched), BP_OK) << bp_last_error();
  for (int k = 0; k < n; ++k) {
    const std::vector<float> &xv = xs[(size_t)k];
    EXPECT_LT(nmse(a[(size_t)k], f.want_a(xv)), 1e-10) << "a, run " << k;
    EXPECT_LT(nmse(b[(size_t)k], f.want_b(xv)), 1e-10) << "b, run " << k;
    EXPECT_LT(nmse(c[(size_t)k], fan_out::want_c(xv)), 1e-12) << "c, run " << k;
  }
}

TEST_P(SchedAsyncTest, EvalCallbackSeesFinishedNodes) {
  NEED_PARTIAL();
  start();
  build_mlp(backends[0], true);
  reference ref(cpu_ref, true);
  struct seen_t {
    std::vector<std::string> names;
    std::vector<std::vector<float>> values;
  } seen;
  bp_sched_set_eval_callback(
      sched,
      [](bp_tensor *t, bool ask, void *ud) {
        auto *s = static_cast<seen_t *>(ud);
        const std::string name = t->name;
        if (ask) return name == "mm1" || name == "gelu" || name == "mm2";
        s->names.push_back(name);
        s->values.push_back(read_f32(t));  // mm1 and mm2 live in partial memory
        return true;
      },
      &seen);
  const mlp &r = ref.graph();
  for (unsigned seed = 4; seed <= 6; ++seed) {
    seen = seen_t{};
    std::vector<float> got = run(seed), want = ref.run(seed);
    EXPECT_LT(nmse(got, want), 1e-6) << "seed " << seed;
    ASSERT_EQ(seen.names, (std::vector<std::string>{"mm1", "gelu", "mm2"}));
    EXPECT_LT(nmse(seen.values[0], read_f32(r.mm1)), 1e-6) << "seed " << seed;
    EXPECT_LT(nmse(seen.values[2], read_f32(r.mm2)), 1e-6) << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Partial, SchedAsyncTest,
                         ::testing::Values(mode{"Events", kEvents, false}, mode{"EventsParallel", kEvents, true},
                                           mode{"QueueOnly", kQueueOnly, false},
                                           mode{"QueueOnlyParallel", kQueueOnly, true}),
                         [](const ::testing::TestParamInfo<mode> &info) { return std::string(info.param.label); });

// ---- the fixture itself ------------------------------------------------------

bp_device *find_device(const char *id) {
  for (size_t i = 0, n = bp_device_count(); i < n; ++i) {
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (bp_device_describe(bp_device_get(i), &info) == BP_OK && std::string(info.id) == id) return bp_device_get(i);
  }
  return nullptr;
}

uint32_t caps_of(bp_device *dev) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(bp_device_describe(dev, &info), BP_OK) << bp_last_error();
  return info.caps;
}

TEST_F(SchedTest, PartialAsyncDeviceAdvertisesAsyncAndEvents) {
  NEED_PARTIAL();
  bp_device *sync_dev = find_device("partial-0"), *async_dev = find_device("partial-async");
  ASSERT_NE(sync_dev, nullptr);
  ASSERT_NE(async_dev, nullptr);
  EXPECT_EQ(caps_of(sync_dev) & (BP_DEVICE_CAP_ASYNC | BP_DEVICE_CAP_EVENTS), 0u) << "the default stays synchronous";
  EXPECT_EQ(caps_of(async_dev) & (BP_DEVICE_CAP_ASYNC | BP_DEVICE_CAP_EVENTS),
            (uint32_t)(BP_DEVICE_CAP_ASYNC | BP_DEVICE_CAP_EVENTS));
  bp_event *ev = nullptr;
  EXPECT_EQ(bp_event_new(sync_dev, &ev), BP_ERR_UNIMPLEMENTED);
  ASSERT_EQ(bp_event_new(async_dev, &ev), BP_OK) << bp_last_error();
  EXPECT_EQ(bp_event_synchronize(ev), BP_OK) << "an event never recorded counts as signalled";
  bp_event_free(ev);
}

// An event recorded on one queue and waited for on another orders them: the
// second queue's read sees the first queue's (delayed) write.
TEST_F(SchedTest, PartialAsyncEventsOrderTwoQueues) {
  NEED_PARTIAL();
  make_backends("partial:1,delay_us=2000;partial:1");
  bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 64);
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_context_alloc_tensors(ctx, backends[0], &buf), BP_OK) << bp_last_error();
  buffers.push_back(buf);
  write_f32(t, std::vector<float>(64, 1.0f));
  bp_event *ev = nullptr;
  ASSERT_EQ(bp_event_new(bp_backend_device(backends[0]), &ev), BP_OK) << bp_last_error();
  for (int round = 0; round < 3; ++round) {
    std::vector<float> want = random_values(64, 500 + (unsigned)round), got(64, 0.0f);
    ASSERT_EQ(bp_backend_tensor_set_async(backends[0], t, want.data(), 0, 64 * sizeof(float)), BP_OK);
    ASSERT_EQ(bp_event_record(ev, backends[0]), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_backend_wait_event(backends[1], ev), BP_OK) << bp_last_error();
    ASSERT_EQ(bp_backend_tensor_get_async(backends[1], t, got.data(), 0, 64 * sizeof(float)), BP_OK);
    ASSERT_EQ(bp_backend_synchronize(backends[1]), BP_OK) << bp_last_error();
    EXPECT_EQ(got, want) << "round " << round;
    ASSERT_EQ(bp_event_synchronize(ev), BP_OK);
  }
  ASSERT_EQ(bp_backend_synchronize(backends[0]), BP_OK);
  bp_event_free(ev);
}

}  // namespace
}  // namespace sched_test
