// sched_trace_test.cpp: a traced scheduler run over the `partial` fixture
// and the cpu (backplane/trace.h): one split span per split on its backend's
// "host calls" track, the copies inside the splits that make them, plan
// builds at the first run only, and the cpu's node spans inside its splits.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "scheduler/sched_test_util.hpp"
#include "support/trace_check.hpp"

namespace sched_test {
namespace {

TEST_F(SchedTest, TraceShowsSplitsCopiesPlanBuildsAndNodes) {
  if (!need_partial()) GTEST_SKIP() << "missing " << partial_plugin() << " (build bp_fixtures)";
  if (bp_trace_active()) bp_trace_stop();  // BP_TRACE in the environment
  make_backends("partial;cpu");
  make_sched();
  build_mlp(backends[0], /*gelu_mid=*/true);
  const std::string path = std::string(::testing::TempDir()) + "/bp_sched_trace_" + std::to_string(getpid()) + ".json";
  ASSERT_EQ(bp_trace_start(path.c_str()), BP_OK) << bp_last_error();
  const int runs = 2;
  for (int i = 0; i < runs; ++i) run(1 + (unsigned)i);
  ASSERT_EQ(bp_trace_stop(), BP_OK) << bp_last_error();

  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);
  // Process names: "backend NAME", or "backend NAME #N" for the N-th backend
  // of that name in the process (the reference cpu came first here).
  std::map<std::string, int64_t> pid_of;  // backend name -> pid of the track with spans
  for (const auto &s : t.spans) pid_of[t.processes.at(s.pid)] = s.pid;
  std::string partial, cpu;
  for (const auto &[name, pid] : pid_of) {
    if (name.rfind(std::string("backend ") + bp_backend_name(backends[0]), 0) == 0) partial = name;
    if (name.rfind(std::string("backend ") + bp_backend_name(backends[1]), 0) == 0) cpu = name;
  }
  ASSERT_FALSE(partial.empty());
  ASSERT_FALSE(cpu.empty());

  const auto splits = bp::test::spans_on(t, "sched", "host calls");
  ASSERT_EQ(splits.size(), (size_t)runs * bp_sched_split_count(sched));
  int on_partial = 0;
  for (const auto *s : splits) on_partial += s->pid == pid_of[partial];
  EXPECT_EQ(on_partial, runs * 2) << "partial and cpu alternate over four splits";

  // Every copy lies inside a split of its destination backend.
  const auto copies = bp::test::spans_on(t, "copy", "host calls");
  EXPECT_EQ(copies.size(), (size_t)runs * bp_sched_copy_count(sched));
  for (const auto *c : copies) {
    bool inside = false;
    for (const auto *s : splits) inside |= s->pid == c->pid && s->begin_ns <= c->begin_ns && c->end_ns <= s->end_ns;
    EXPECT_TRUE(inside) << "copy at " << c->begin_ns << " outside every split of its backend";
    EXPECT_GT(c->args.value("bytes", 0), 0);
  }

  // The partial fixture has plans: built once per split at the first run.
  EXPECT_EQ(bp::test::spans_on(t, "plan", "host calls").size(), 2u);

  // The cpu's nodes: once per run each, inside one of the cpu's splits.
  std::map<std::string, int> seen;
  for (const auto *n : bp::test::spans_on(t, "node", "nodes")) {
    EXPECT_EQ(n->pid, pid_of[cpu]) << "the fixture reports no nodes";
    ++seen[n->args.value("node", "")];
    bool inside = false;
    for (const auto *s : splits) inside |= s->pid == n->pid && s->begin_ns <= n->begin_ns && n->end_ns <= s->end_ns;
    EXPECT_TRUE(inside) << n->name << " outside the cpu's splits";
  }
  EXPECT_EQ(seen["gelu"], runs);
  EXPECT_EQ(seen["out"], runs);
  EXPECT_EQ(seen.size(), 2u) << "gelu and soft_max run on the cpu, the rest on partial";
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sched_test
