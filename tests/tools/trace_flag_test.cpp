// trace_flag_test.cpp: --trace FILE and --profile on bp-run, bp-generate and
// bp-bench as a user runs them: the file parses as a well-formed trace with
// the tool's nodes on it, the profile table follows the report, and a file
// that cannot be written fails the tool naming it.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/run_command.hpp"
#include "support/trace_check.hpp"

namespace {

using result = bp::test::command_result;
constexpr auto run = bp::test::run_command;

std::string bin(const std::string &tool) { return std::string(BP_TEST_BIN_DIR) + "/" + tool; }

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string temp_json(const char *name) {
  return std::string(::testing::TempDir()) + "/bp_tool_trace_" + std::to_string(getpid()) + "_" + name + ".json";
}

// The file at |path| is a well-formed trace with node spans of MUL_MAT.
void expect_trace_with_products(const std::string &path) {
  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);
  int products = 0;
  for (const auto *s : bp::test::spans_on(t, "node", "nodes")) products += s->name == "MUL_MAT";
  EXPECT_GT(products, 0) << "no MUL_MAT on a nodes track of " << path;
  EXPECT_FALSE(bp::test::spans_on(t, "submit", "host calls").empty());
}

const char *const kTiny = " --layers 2 --dim 64 --heads 4 --ff 96 --vocab 50 --tokens 8 --runs 2";

TEST(ToolTrace, BpRunWritesATraceAndPrintsTheProfile) {
  const std::string path = temp_json("run");
  result r = run(bin("bp-run") + " --device cpu:threads=2 --trace " + path + " --profile" + kTiny);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("profile (node time"), std::string::npos) << r.out;
  for (const char *col : {"op", "count", "total ms", "mean us", "share", "GB/s", "GFLOP/s", "MUL_MAT", "of read",
                          "of peak", "host: DRAM read", "FMA peak"})
    EXPECT_NE(r.out.find(col), std::string::npos) << col << "\n" << r.out;
  expect_trace_with_products(path);
  std::remove(path.c_str());
}

TEST(ToolTrace, BpRunProfileGoesToStderrWithJson) {
  result r = run(bin("bp-run") + " --json --device cpu --profile" + kTiny + " 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("profile"), std::string::npos) << "stdout stays one JSON object";
}

TEST(ToolTrace, AnUnwritableTraceFileFailsTheToolNamingIt) {
  result r = run(bin("bp-run") + " --device cpu --trace /nonexistent-folder/t.json" + kTiny + " 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("/nonexistent-folder/t.json"), std::string::npos) << r.out;
}

TEST(ToolTrace, BpTraceEnvironmentWritesAtExit) {
  const std::string path = temp_json("env");
  result r = run("BP_TRACE=" + path + " " + bin("bp-run") + " --device cpu" + kTiny);
  ASSERT_EQ(r.status, 0) << r.out;
  expect_trace_with_products(path);
  std::remove(path.c_str());
}

TEST(ToolTrace, BpGenerateTracesADecode) {
  std::string model = std::string(BP_TEST_SOURCE_DIR) + "/../models/tiny/tiny-kjv.gguf";
  if (const char *m = std::getenv("BP_GENERATE_TEST_MODEL")) model = m;
  if (!exists(bin("bp-generate"))) GTEST_SKIP() << "bp-generate is not built";
  if (!exists(model)) GTEST_SKIP() << model << " is absent";
  const std::string path = temp_json("generate");
  result r = run(bin("bp-generate") + " --model '" + model + "' -p 'In the beginning' -n 3 --device cpu --trace " +
                 path + " --profile 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("profile (node time"), std::string::npos) << r.out;
  expect_trace_with_products(path);
  std::remove(path.c_str());
}

TEST(ToolTrace, BpBenchWritesATrace) {
  if (!exists(bin("bp-bench"))) GTEST_SKIP() << "bp-bench not built (needs libbenchmark-dev and OpenBLAS)";
  const std::string path = temp_json("bench");
  result r = run(bin("bp-bench") + " --device cpu:threads=1 --threads 1 --trace " + path +
                 " --benchmark_filter='^ADD/' --benchmark_min_time=0.01 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  const bp::test::trace_file t = bp::test::read_trace(path);
  ASSERT_TRUE(t.ok);
  bp::test::expect_well_formed(t);
  EXPECT_FALSE(bp::test::spans_on(t, "node", "nodes").empty());
  std::remove(path.c_str());
  EXPECT_EQ(run(bin("bp-bench") + " --trace 2>/dev/null").status, 2);
}

}  // namespace
