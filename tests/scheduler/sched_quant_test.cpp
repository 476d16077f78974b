// sched_quant_test.cpp: weights of a type the first backend has no kernels
// for (the `partial` fixture runs f32 only, as a GPU plugin declines a type
// it has no shaders for): MUL_MAT of them, GET_ROWS of them and the quantizing CONT go to
// the cpu, the weights copied from the fixture's memory on every run, and
// match the double reference (tests/plugins/quant_check.hpp).
#include "plugins/quant_check.hpp"
#include "scheduler/sched_test_util.hpp"

namespace sched_test {
namespace {

TEST_F(SchedTest, WeightsOfATypeTheFirstBackendDeclinesRunOnCpu) {
  if (!need_partial()) GTEST_SKIP() << "missing " << partial_plugin() << " (build bp_fixtures)";
  make_backends("partial");
  for (bp_type t : {BP_TYPE_Q5_K, BP_TYPE_BF16, BP_TYPE_Q4_K}) bp_quant_test::check_runs_on_cpu(backends[0], t);
}

}  // namespace
}  // namespace sched_test
