// error_model_test.cpp: the application side of the error model
// (docs/errors.md): clear-on-success, bp_last_status and the C++ codes, one
// condition one status (a table), double frees of every handle type, the
// C++ scheduler. NULL arguments of every function: null_args_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/backplane.hpp"

namespace {

class ErrorModel : public ::testing::Test {
 protected:
  void SetUp() override {
    bp_registry_add_path(BP_TEST_PLUGIN_DIR);
    ASSERT_EQ(bp_backend_new("cpu", &cpu_), BP_OK) << bp_last_error();
    ctx_ = bp_context_new(0);
  }
  void TearDown() override {
    bp_context_free(ctx_);
    bp_backend_free(cpu_);
  }
  bp_backend *cpu_ = nullptr;
  bp_context *ctx_ = nullptr;
};

// Point 1, the issue's own sequence.
TEST_F(ErrorModel, ASuccessfulCallLeavesNoStaleMessage) {
  bp_backend *be = nullptr;
  EXPECT_EQ(bp_backend_new("nosuch", &be), BP_ERR_NOT_FOUND);
  EXPECT_NE(std::string(bp_last_error()).find("nosuch"), std::string::npos);
  ASSERT_EQ(bp_backend_new("cpu", &be), BP_OK);
  EXPECT_EQ(bp_last_status(), BP_OK);
  EXPECT_STREQ(bp_last_error(), "");
  bp_tensor *a = bp_tensor_new_1d(ctx_, BP_TYPE_F32, 4);
  EXPECT_EQ(bp_add(ctx_, a, nullptr), nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(bp_last_error()), "bp_add: b is NULL");
  // A getter that succeeds clears too.
  EXPECT_NE(bp_backend_name(be), nullptr);
  EXPECT_STREQ(bp_last_error(), "");
  bp_graph *g = bp_graph_new(ctx_, 0);  // succeeds: the NULL below is not its result
  // ... but the context remembers its first failed builder: that is the cause.
  EXPECT_EQ(bp_graph_build(g, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(bp_last_error()), "bp_add: b is NULL");
  bp_clear_error();  // forgets that too
  EXPECT_EQ(bp_graph_build(g, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(bp_last_error()), "bp_graph_build: t is NULL");
  bp_graph_free(g);
  bp_backend_free(be);
}

// Point 1: a chain of builders is checked once at its end, even with
// successful calls in between (the context keeps its first failure).
TEST_F(ErrorModel, AWholeGraphIsCheckedOnceAtTheEnd) {
  bp_tensor *a = bp_tensor_new_2d(ctx_, BP_TYPE_F32, 4, 3);
  bp_tensor *bad = bp_mul_mat(ctx_, a, bp_tensor_new_2d(ctx_, BP_TYPE_F32, 5, 2));
  const std::string first = bp_last_error();
  bp_tensor *ok = bp_relu(ctx_, a);  // succeeds: the thread state is clear again
  EXPECT_STREQ(bp_last_error(), "");
  bp_tensor *out = bp_add(ctx_, bp_scale(ctx_, bad, 2.0f), ok);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(first, bp_last_error());
  bp_graph *g = bp_graph_new(ctx_, 0);
  bp_backend_name(cpu_);  // anything in between
  EXPECT_EQ(bp_graph_build(g, out), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(first, bp_last_error());
  bp_graph_free(g);
  // bp_clear_error forgets the context's record too.
  bp_clear_error();
  EXPECT_EQ(bp_add(ctx_, a, nullptr), nullptr);
  EXPECT_EQ(std::string(bp_last_error()), "bp_add: b is NULL");
}

// Point 2: the status of calls that return pointers, and the C++ codes.
TEST_F(ErrorModel, PointerCallsHaveAStatusAndCppThrowsTheRealCode) {
  bp_context *small = bp_context_new(1);
  ASSERT_NE(bp_tensor_new_1d(small, BP_TYPE_F32, 4), nullptr);
  EXPECT_EQ(bp_tensor_new_1d(small, BP_TYPE_F32, 4), nullptr);
  EXPECT_EQ(bp_last_status(), BP_ERR_RESOURCE_EXHAUSTED);
  bp_context_free(small);

  bp::context ctx(1);
  ctx.tensor_1d(BP_TYPE_F32, 4);
  try {
    ctx.tensor_1d(BP_TYPE_F32, 4);
    FAIL() << "no throw";
  } catch (const bp::error &e) {
    EXPECT_EQ(e.status(), BP_ERR_RESOURCE_EXHAUSTED) << e.what();
    EXPECT_NE(std::string(e.what()).find("the context is full"), std::string::npos) << e.what();
  }
  try {
    bp_plugin *p = nullptr;
    bp::check(bp_registry_find_plugin("nosuch", &p));
    FAIL() << "no throw";
  } catch (const bp::error &e) {
    EXPECT_EQ(e.status(), BP_ERR_NOT_FOUND) << e.what();
  }
}

// Point 3: one condition, one status, wherever it is met. Each row is a
// row of docs/errors.md's "Conditions" table.
TEST_F(ErrorModel, OneConditionOneStatus) {
  bp_tensor *a = bp_tensor_new_1d(ctx_, BP_TYPE_F32, 4);  // never allocated
  bp_tensor *n = bp_neg(ctx_, a);
  bp_graph *g = bp_graph_new(ctx_, 0);
  ASSERT_EQ(bp_graph_build(g, n), BP_OK);
  float buf[4] = {};
  struct row {
    const char *condition;
    std::function<bp_status()> call;
    bp_status code;
    const char *fragment;
  };
  bp_context *full = bp_context_new(1);
  bp_tensor_new_1d(full, BP_TYPE_F32, 1);
  bp_graph *tiny = bp_graph_new(ctx_, 1);
  bp_context *dead_ctx = bp_context_new(0);
  bp_context_free(dead_ctx);
  bp_tensor *orphan = bp_tensor_new_1d(ctx_, BP_TYPE_F32, 4);  // its buffer is freed below
  bp_buffer *orphan_buf = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(cpu_, 64, &orphan_buf), BP_OK) << bp_last_error();
  ASSERT_EQ(bp_buffer_place_tensor(orphan_buf, orphan, 0), BP_OK) << bp_last_error();
  bp_buffer_free(orphan_buf);
  bp_plugin *fake_gpu = nullptr;
  ASSERT_EQ(bp_registry_load(BP_TEST_FIXTURE_DIR "/libbp-fake_gpu.so", &fake_gpu), BP_OK) << bp_last_error();
  bp_backend *gpu = nullptr;
  ASSERT_EQ(bp_backend_new("fake_gpu", &gpu), BP_OK) << bp_last_error();
  const std::vector<row> rows = {
      {"tensor without memory: bp_tensor_get", [&] { return bp_tensor_get(a, buf, 0, sizeof buf); },
       BP_ERR_FAILED_PRECONDITION, "has no memory"},
      {"tensor without memory: bp_tensor_set", [&] { return bp_tensor_set(a, buf, 0, sizeof buf); },
       BP_ERR_FAILED_PRECONDITION, "has no memory"},
      {"tensor without memory: bp_backend_graph_compute", [&] { return bp_backend_graph_compute(cpu_, g); },
       BP_ERR_FAILED_PRECONDITION, "has no memory"},
      {"tensor whose buffer was freed", [&] { return bp_tensor_set(orphan, buf, 0, sizeof buf); },
       BP_ERR_FAILED_PRECONDITION, "points to a buffer that was freed"},
      {"scheduler whose last backend is not a CPU backend",
       [&] {
         bp_backend *list[] = {gpu};
         bp_sched *s = bp_sched_new(list, nullptr, 1, 16, false);
         if (s == nullptr) return bp_last_status();
         bp_sched_free(s);
         return (bp_status)BP_OK;
       },
       BP_ERR_INVALID_ARGUMENT, "the last backend must be a CPU backend"},
      {"NULL handle", [&] { return bp_graph_validate(nullptr); }, BP_ERR_INVALID_ARGUMENT, "graph is NULL"},
      {"NULL argument", [&] { return bp_tensor_get(nullptr, buf, 0, 4); }, BP_ERR_INVALID_ARGUMENT, "is NULL"},
      {"freed handle", [&] { return bp_tensor_new_1d(dead_ctx, BP_TYPE_F32, 1) ? BP_OK : bp_last_status(); },
       BP_ERR_INVALID_ARGUMENT, "already freed"},
      {"bad shape", [&] { return bp_tensor_new_1d(ctx_, BP_TYPE_F32, 0) ? BP_OK : bp_last_status(); },
       BP_ERR_INVALID_ARGUMENT, "must be >= 1"},
      {"bad spec",
       [&] {
         bp_backend *b = nullptr;
         return bp_backend_new("cpu:", &b);
       },
       BP_ERR_INVALID_ARGUMENT, "cpu:"},
      {"no such plugin",
       [&] {
         bp_backend *b = nullptr;
         return bp_backend_new("nosuch", &b);
       },
       BP_ERR_NOT_FOUND, "nosuch"},
      {"full context", [&] { return bp_tensor_new_1d(full, BP_TYPE_F32, 1) ? BP_OK : bp_last_status(); },
       BP_ERR_RESOURCE_EXHAUSTED, "the context is full"},
      {"graph past max_nodes", [&] { return bp_graph_build(tiny, bp_relu(ctx_, n)); }, BP_ERR_RESOURCE_EXHAUSTED,
       "max_nodes"},
      {"list longer than capacity",
       [&] {
         bp_backend *b[1] = {};
         size_t count = 0;
         return bp_backend_new_list("cpu;cpu", b, 1, &count);
       },
       BP_ERR_RESOURCE_EXHAUSTED, "capacity"},
      {"out_count NULL",
       [&] {
         bp_backend *b[1] = {};
         return bp_backend_new_list("cpu", b, 1, nullptr);
       },
       BP_ERR_INVALID_ARGUMENT, "out_count is NULL"},
  };
  for (const row &r : rows) {
    SCOPED_TRACE(r.condition);
    EXPECT_EQ(r.call(), r.code) << bp_last_error();
    EXPECT_EQ(bp_last_status(), r.code);
    EXPECT_NE(std::string(bp_last_error()).find(r.fragment), std::string::npos) << bp_last_error();
  }
  bp_backend_free(gpu);
  bp_graph_free(tiny);
  bp_context_free(full);
  bp_graph_free(g);
}

// Point 7: a second free of any handle is recognised, in every build, and
// does not call the plugin again.
TEST_F(ErrorModel, DoubleFreeOfEveryHandleTypeIsRecognised) {
  auto expect_refused = [](const char *fn) {
    EXPECT_EQ(bp_last_status(), BP_ERR_INVALID_ARGUMENT) << fn;
    EXPECT_NE(std::string(bp_last_error()).find("already freed"), std::string::npos) << bp_last_error();
    EXPECT_NE(std::string(bp_last_error()).find(fn), std::string::npos) << bp_last_error();
  };
  bp_log_set_level(BP_LOG_OFF);  // the refusals are also logged as errors
  bp_buffer *buf = nullptr;
  ASSERT_EQ(bp_backend_alloc_buffer(cpu_, 64, &buf), BP_OK);
  bp_buffer_free(buf);
  EXPECT_EQ(bp_last_status(), BP_OK);
  bp_buffer_free(buf);
  expect_refused("bp_buffer_free");

  bp_backend *be = nullptr;
  ASSERT_EQ(bp_backend_new("cpu", &be), BP_OK);
  bp_backend_free(be);
  bp_backend_free(be);
  expect_refused("bp_backend_free");

  bp_event *ev = nullptr;
  if (bp_event_new(bp_backend_device(cpu_), &ev) == BP_OK) {
    bp_event_free(ev);
    bp_event_free(ev);
    expect_refused("bp_event_free");
  }
  bp_context *c = bp_context_new(0);
  bp_context_free(c);
  bp_context_free(c);
  expect_refused("bp_context_free");

  bp_graph *g = bp_graph_new(ctx_, 0);
  bp_graph_free(g);
  bp_graph_free(g);
  expect_refused("bp_graph_free");

  bp_gallocr *ga = bp_gallocr_new(bp_backend_buffer_type(cpu_));
  bp_gallocr_free(ga);
  bp_gallocr_free(ga);
  expect_refused("bp_gallocr_free");

  bp_backend *list[] = {cpu_};
  bp_sched *s = bp_sched_new(list, nullptr, 1, 16, false);
  ASSERT_NE(s, nullptr) << bp_last_error();
  bp_sched_free(s);
  bp_sched_free(s);
  expect_refused("bp_sched_free");
  bp_log_set_level(BP_LOG_WARN);
}

// Point 8: the C++ scheduler over the backends bp::backends() returns.
TEST_F(ErrorModel, CppSchedulerTakesBackendsAndAllocatesGraphs) {
  std::vector<bp::backend> backends = bp::backends("cpu");
  bp::sched sched(backends, 64);
  EXPECT_EQ(sched.n_backends(), 1);
  bp::context ctx;
  bp_tensor *a = ctx.tensor_1d(BP_TYPE_F32, 4);
  bp_tensor_set_flags(a, BP_TENSOR_FLAG_INPUT);
  bp_tensor *out = bp::check(bp_neg(ctx.get(), a));
  bp::graph g(ctx, out);
  sched.alloc_graph(g);  // inputs have memory now
  bp::set(a, std::vector<float>{1, 2, 3, 4});
  sched.compute(g);
  EXPECT_EQ(bp::get<float>(out), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(sched.tensor_backend(out), backends[0].get());
  EXPECT_EQ(sched.split(0).backend, backends[0].get());
  try {
    std::vector<bp_backend *> none;
    bp::sched bad(none);
    FAIL() << "no throw";
  } catch (const bp::error &e) {
    EXPECT_EQ(e.status(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("n_backends = 0"), std::string::npos) << e.what();
  }
}

// Point 4: the messages the issue quoted.
TEST_F(ErrorModel, NullArgumentsTheIssueQuoted) {
  bp_backend *list[1] = {};
  size_t count = 0;
  EXPECT_EQ(bp_backend_new_list("cpu", list, 1, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(list[0], nullptr);
  EXPECT_EQ(bp_graph_new(nullptr, 0), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("bp_graph_new: ctx is NULL"), std::string::npos) << bp_last_error();
  bp_clear_error();  // else bp_tensor_set_name(NULL) is the NULL bp_graph_new returned: its failure is kept
  EXPECT_EQ(bp_tensor_set_name(nullptr, "x"), nullptr);
  EXPECT_EQ(std::string(bp_last_error()), "bp_tensor_set_name: t is NULL");
  EXPECT_EQ(bp_sched_new(nullptr, nullptr, 1, 0, false), nullptr);
  EXPECT_NE(std::string(bp_last_error()).find("backends is NULL"), std::string::npos) << bp_last_error();
  (void)count;
}

}  // namespace
