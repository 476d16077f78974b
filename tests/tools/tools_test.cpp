// tools_test.cpp: bp-devices, bp-test-ops, bp-run and bp-bench as a user
// runs them: real processes, their exit status and their JSON.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "conformance/conformance.hpp"
#include "support/run_command.hpp"

namespace {

using json = nlohmann::json;

using result = bp::test::command_result;
constexpr auto run = bp::test::run_command;

std::string bin(const std::string &tool) { return std::string(BP_TEST_BIN_DIR) + "/" + tool; }
bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

json parse(const result &r) {
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << r.out;
  return j;
}

// A folder holding one file named like a plugin that is no ELF at all.
class GarbageFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/bp_tools_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    garbage_ = dir_ + "/libbp-garbage.so";
    std::ofstream(garbage_) << "this is not a shared object\n";
  }
  void TearDown() override {
    std::remove(garbage_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, garbage_;
};

// ---- bp-devices ------------------------------------------------------------

TEST_F(GarbageFolder, DevicesJsonListsPluginsDevicesAndRejections) {
  result r = run(bin("bp-devices") + " --json --plugin-path " + dir_ + " --plugin-path " + BP_TEST_FIXTURE_DIR);
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  ASSERT_TRUE(j["plugins"].is_array());
  ASSERT_TRUE(j["devices"].is_array());
  ASSERT_TRUE(j["rejected"].is_array());

  bool cpu = false;
  for (const auto &p : j["plugins"]) {
    EXPECT_FALSE(p["name"].get<std::string>().empty());
    EXPECT_FALSE(p["path"].get<std::string>().empty());
    EXPECT_TRUE(p.contains("version"));
    EXPECT_TRUE(p["params"].is_array());
    if (p["name"] == "cpu") cpu = true;
  }
  EXPECT_TRUE(cpu) << "the cpu plugin is missing:\n" << r.out;

  ASSERT_FALSE(j["devices"].empty());
  for (const auto &d : j["devices"]) {
    for (const char *key : {"id", "spec", "name", "type", "plugin"})
      EXPECT_FALSE(d[key].get<std::string>().empty()) << key << " of " << d.dump();
    EXPECT_TRUE(d["memory_total"].is_number());
    EXPECT_TRUE(d["caps"].is_array());
    for (const auto &p : d["params"]) {
      EXPECT_TRUE(p.contains("default"));
      EXPECT_TRUE(p.contains("doc"));
      if (p["type"] == "INT") {
        EXPECT_TRUE(p["min"].is_number());
      }
    }
  }

  bool garbage = false;
  for (const auto &rej : j["rejected"]) {
    EXPECT_FALSE(rej["status"].get<std::string>().empty());
    EXPECT_FALSE(rej["message"].get<std::string>().empty()) << rej.dump();
    if (rej["path"].get<std::string>().find("libbp-garbage.so") != std::string::npos) {
      garbage = true;
      EXPECT_EQ(rej["status"], "INCOMPATIBLE") << rej.dump();
    }
  }
  EXPECT_TRUE(garbage) << "the non-ELF candidate is not listed:\n" << r.out;
  // The registry's broken fixtures are refused, each with its reason.
  if (exists(std::string(BP_TEST_FIXTURE_DIR) + "/libbp-abi_major_new.so")) {
    EXPECT_GE(j["rejected"].size(), 5u);
  }
}

TEST_F(GarbageFolder, DevicesTextShowsTheSameFacts) {
  result r = run(bin("bp-devices") + " --plugin-path " + dir_);
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char *s : {"Plugins:", "Devices:", "Rejected:", "libbp-garbage.so", "INCOMPATIBLE", "select with \"cpu"})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.out;
}

TEST(BpDevices, ExplicitPluginFileIsListed) {
  const std::string partial = std::string(BP_TEST_FIXTURE_DIR) + "/partial/libbp-partial.so";
  if (!exists(partial)) GTEST_SKIP() << partial << " is not built";
  result r = run(bin("bp-devices") + " --json --plugin " + partial);
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  bool found = false;
  for (const auto &d : j["devices"])
    if (d["id"] == "partial-0") {
      found = true;
      EXPECT_EQ(d["type"], "ACCEL");
    }
  EXPECT_TRUE(found) << r.out;
}

TEST(BpDevices, MissingPluginFileIsShownNotFatal) {
  result r = run(bin("bp-devices") + " --json --plugin /nonexistent/libbp-nothing.so");
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  bool listed = false;
  for (const auto &rej : j["rejected"])
    if (rej["path"].get<std::string>().find("libbp-nothing.so") != std::string::npos) listed = true;
  EXPECT_TRUE(listed) << r.out;
}

TEST(BpDevices, BadUsageFails) {
  EXPECT_EQ(run(bin("bp-devices") + " --no-such-flag 2>/dev/null").status, 2);
  EXPECT_EQ(run(bin("bp-devices") + " --plugin 2>/dev/null").status, 2);
}

TEST(BpDevices, BadPluginPathEntriesAreProblemsNotSilence) {
  result r = run("BP_PLUGIN_PATH=/nonexistent/bp-folder:relative/dir " + bin("bp-devices") + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  std::string problems = j["problems"].dump();
  EXPECT_NE(problems.find("/nonexistent/bp-folder is not an existing folder"), std::string::npos) << problems;
  EXPECT_NE(problems.find("'relative/dir' is not absolute"), std::string::npos) << problems;
  EXPECT_FALSE(j["plugins"].empty());  // the other folders were still searched
}

// The cpu plugin says which kernels it runs, and a BP_CPU_ISA,
// BP_CPU_AVX512_HALVES or BP_CPU_STREAM_MIN_BYTES value it cannot use is a
// warning naming the accepted ones, not silence.
TEST(BpDevices, CpuKernelChoiceIsShownAndBadIsaValuesWarn) {
  result r = run("BP_CPU_ISA=baseline " + bin("bp-devices") + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(", kernels baseline"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("BP_CPU_ISA="), std::string::npos) << r.out;  // a valid cap says nothing
  r = run("BP_CPU_ISA=avx3 BP_CPU_AVX512_HALVES=2 " + bin("bp-devices") + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("BP_CPU_ISA=avx3 is not a level (baseline, avx2, avx512 or amx) and is ignored"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("BP_CPU_AVX512_HALVES=2 is neither 0 nor 1 and is ignored"), std::string::npos) << r.out;
  for (const char *bad : {"64M", "-1", "lots", "99999999999999999999"}) {
    r = run(std::string("BP_CPU_STREAM_MIN_BYTES=") + bad + " " + bin("bp-devices") + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find(std::string("BP_CPU_STREAM_MIN_BYTES=") + bad +
                         " is not a byte count (a whole number, 0 or more) and is ignored"),
              std::string::npos)
        << r.out;
  }
  r = run("BP_CPU_STREAM_MIN_BYTES=0 " + bin("bp-devices") + " 2>&1");
  EXPECT_EQ(r.out.find("BP_CPU_STREAM_MIN_BYTES"), std::string::npos) << r.out;
}

TEST(BpDevices, AReportThatCannotBeWrittenIsAnError) {
  if (!exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  EXPECT_EQ(run(bin("bp-devices") + " --json >/dev/full 2>/dev/null").status, 1);
}

// ---- bp-test-ops -----------------------------------------------------------

TEST(BpTestOps, PassingRunWritesJsonAndExitsZero) {
  const std::string path = "/tmp/bp_tools_test_ops_" + std::to_string(getpid()) + ".json";
  result r = run(bin("bp-test-ops") + " -b cpu:threads=2 -o add -o SOFT_MAX --json " + path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("OK: every case passed"), std::string::npos) << r.out;
  std::ifstream f(path);
  json j = json::parse(f, nullptr, false);
  std::remove(path.c_str());
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["backends"].size(), 1u);
  const json &b = j["backends"][0];
  EXPECT_GT(b["summary"]["ADD"]["passed"].get<int>(), 10);
  EXPECT_EQ(b["summary"]["ADD"]["failed"].get<int>(), 0);
  EXPECT_GT(b["summary"]["SOFT_MAX"]["passed"].get<int>(), 0);
  EXPECT_FALSE(b["summary"].contains("MUL_MAT"));  // -o chose the ops
  for (const auto &c : b["results"]) EXPECT_EQ(c["status"], "passed") << c.dump();
}

TEST(BpTestOps, AFailingBackendExitsOne) {
  // The fake plugin's device fails every allocation after the first: its
  // cases fail with the plugin's message instead of passing silently.
  const std::string good = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-good.so";
  if (!exists(good)) GTEST_SKIP() << good << " is not built";
  result r = run(bin("bp-test-ops") + " --plugin " + good + " -b good:fail_after=1 -o ADD --json - 2>/dev/null");
  EXPECT_EQ(r.status, 1) << r.out;
  json j = parse(r);
  EXPECT_FALSE(j["ok"].get<bool>());
}

// A case that failed before any comparison (an API error) is
// not shown as a numeric failure, and a skip names the unsupported inputs.
TEST(BpTestOps, ApiErrorsAreNotNumbersAndSkipsNameTheInputs) {
  const std::string good = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-good.so";
  if (!exists(good)) GTEST_SKIP() << good << " is not built";
  result r = run(bin("bp-test-ops") + " --plugin " + good + " --device good:fail_after=1 -o ADD 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": error: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nmse 0 (max"), std::string::npos) << r.out;
  r = run(bin("bp-test-ops") + " --plugin " + good + " --device good --json - 2>/dev/null");
  json j = parse(r);
  bool saw_api_failure = false;
  for (const auto &c : j["backends"][0]["results"])
    if (c["status"] == "failed") saw_api_failure = true;
  EXPECT_FALSE(saw_api_failure) << "the fake plugin passes what it supports";
  // The fake device runs only contiguous f32 ADD: the skip names the f16 input.
  r = run(bin("bp-test-ops") + " --plugin " + good + " -d good -o ADD -v 2>&1");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("skip "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not support ADD of src0 f16"), std::string::npos) << r.out;
  // The older flag name still works.
  EXPECT_EQ(run(bin("bp-test-ops") + " --plugin " + good + " --backend good -o ADD >/dev/null 2>&1").status, 0);
}

// What ctest's Conformance.* entries rely on (tests/CMakeLists.txt): 77
// (skipped) for a device that is not the path asked for, a failure when the
// log does not show the path, or when a case is not supported and must be.
TEST(BpTestOps, PathsNotTakenAreSkippedOrFailed) {
  result r = run(bin("bp-test-ops") + " -d cpu -o ADD --require-description 'no such kernels' 2>&1");
  EXPECT_EQ(r.status, 77) << r.out;
  EXPECT_NE(r.out.find("SKIPPED"), std::string::npos) << r.out;
  r = run(bin("bp-test-ops") + " -d cpu -o ADD --require-description kernels 2>&1");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("device: "), std::string::npos) << r.out;
  r = run(bin("bp-test-ops") + " -d cpu -o ADD --expect-log 'no such line' 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("no log line matches --expect-log 'no such line'"), std::string::npos) << r.out;
  EXPECT_EQ(run(bin("bp-test-ops") + " -d cpu -o ADD --expect-log '(' >/dev/null 2>&1").status, 2);
  const std::string good = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-good.so";
  if (!exists(good)) GTEST_SKIP() << good << " is not built";
  // The fake device runs only contiguous f32 ADD.
  EXPECT_EQ(run(bin("bp-test-ops") + " --plugin " + good + " -d good -o ADD >/dev/null 2>&1").status, 0);
  EXPECT_EQ(run(bin("bp-test-ops") + " --plugin " + good + " -d good -o ADD --require-support >/dev/null 2>&1").status,
            1);
}

// --optional-feature quant: with --require-support, the quantized cases a
// backend does not support stop counting as failures, and only those (blas
// never runs quantized types, and declines small f32 products too).
TEST(BpTestOps, OptionalFeatureExcusesOnlyItsCases) {
  const std::string cmd = bin("bp-test-ops") + " -d blas -o MUL_MAT --require-support --json - 2>/dev/null";
  const result strict = run(cmd), lenient = run(cmd + " --optional-feature quant");
  const json js = json::parse(strict.out, nullptr, false);
  if (js.is_discarded() || !js["backends"][0]["error"].is_null())
    GTEST_SKIP() << "no blas backend here: " << strict.out;
  const json s = js["backends"][0]["summary"]["MUL_MAT"];
  const json l = json::parse(lenient.out)["backends"][0]["summary"]["MUL_MAT"];
  EXPECT_EQ(s["not_supported"], l["not_supported"]);
  int quant_cases = 0;
  for (const auto &c : bp::conformance::conformance_cases({"MUL_MAT"})) quant_cases += c.feature == "quant";
  EXPECT_GT(quant_cases, 0);
  EXPECT_EQ(s["failed"].get<int>() - l["failed"].get<int>(), quant_cases);
  EXPECT_EQ(strict.status, 1);
}

TEST(BpTestOps, BadUsageAndBadInputFailClearly) {
  EXPECT_EQ(run(bin("bp-test-ops") + " --no-such-flag 2>/dev/null").status, 2);
  result r = run(bin("bp-test-ops") + " -o NOT_AN_OP 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("MUL_MAT"), std::string::npos) << r.out;  // lists the ops
  r = run(bin("bp-test-ops") + " -b cpu:threads=abc -o ADD 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("threads"), std::string::npos) << r.out;
  r = run(bin("bp-test-ops") + " -o ADD --json /nonexistent/dir/x.json 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("No such file or directory"), std::string::npos) << r.out;
  r = run(bin("bp-test-ops") + " --plugin /etc/hostname 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("cannot load plugin"), std::string::npos) << r.out;
}

TEST(BpTestOps, UnavailablePluginIsSkippedNotFailed) {
  const std::string plugin = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-init_unavailable.so";
  if (!exists(plugin)) GTEST_SKIP() << plugin << " is not built";
  result r = run(bin("bp-test-ops") + " --plugin " + plugin + " 2>&1");
  EXPECT_EQ(r.status, 77) << r.out;
  EXPECT_NE(r.out.find("SKIPPED"), std::string::npos) << r.out;
}

// A device that is listed but whose backend will not start (backend_init
// answers UNAVAILABLE) is a broken plugin: exit 1 with the plugin's message,
// never "no such device here" and 77.
TEST(BpTestOps, ListedDeviceWhoseBackendFailsIsAFailureNotASkip) {
  const std::string plugin = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-backend_unavailable.so";
  if (!exists(plugin)) GTEST_SKIP() << plugin << " is not built";
  result r = run(bin("bp-test-ops") + " --plugin " + plugin + " -o ADD 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("fake: device FAKE0 is listed, but its driver would not start"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SKIPPED"), std::string::npos) << r.out;
}

// Through --device: a spec naming a plugin that lists no device here still
// skips (77); one naming a listed device that will not start fails (1), alone
// or beside a skipped one.
TEST(BpTestOps, OnlyASpecMatchingNoDeviceIsSkipped) {
  const std::string none = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-lazy_unavailable.so";
  const std::string broken = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-backend_unavailable.so";
  if (!exists(none) || !exists(broken)) GTEST_SKIP() << "the fixtures are not built";
  char tmpl[] = "/tmp/bp_tools_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::filesystem::copy_file(none, dir + "/libbp-lazy_unavailable.so");
  std::filesystem::copy_file(broken, dir + "/libbp-backend_unavailable.so");
  const std::string tool = "BP_PLUGIN_PATH=" + dir + " " + bin("bp-test-ops") + " -o ADD";

  result r = run(tool + " --device lazy_unavailable 2>&1");
  EXPECT_EQ(r.status, 77) << r.out;
  EXPECT_NE(r.out.find("SKIPPED, no such device here"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fake: no fake driver answered"), std::string::npos) << r.out;

  r = run(tool + " --device backend_unavailable 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("fake: device FAKE0 is listed, but its driver would not start"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SKIPPED"), std::string::npos) << r.out;

  r = run(tool + " --device lazy_unavailable --device backend_unavailable:0 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  std::filesystem::remove_all(dir);
}

// ---- bp-run ----------------------------------------------------------------

const char *const kTiny = " --layers 2 --dim 64 --heads 4 --ff 96 --vocab 50 --tokens 8 --runs 2";

TEST(BpRun, CpuAloneMatchesItself) {
  result r = run(bin("bp-run") + " --json --device cpu" + kTiny);
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  EXPECT_TRUE(j["check"]["pass"].get<bool>());
  EXPECT_EQ(j["plan"]["n_copies"], 0);
  EXPECT_EQ(j["plan"]["n_splits"], 1);
  EXPECT_EQ(j["timings"]["device_list"]["runs_ms"].size(), 2u);
  // The graph allocator's peak is within 10% of the largest live set.
  double ratio = j["memory"]["peak_over_live_set"].get<double>();
  EXPECT_GT(ratio, 0.0);
  EXPECT_LE(ratio, 1.10) << j["memory"].dump();
}

// Quantized weights: less memory, logits near the f32 model's (Q8_0 closer
// than Q4_K), the device list still checked against cpu alone.
TEST(BpRun, QuantizedWeightsSaveMemoryAndStayNearF32) {
  const std::string shape = " --layers 1 --dim 256 --heads 4 --ff 512 --vocab 50 --tokens 8 --runs 1";
  double nmse[2];
  int i = 0;
  for (const char *w : {"q8_0", "q4_k"}) {
    result r = run(bin("bp-run") + " --json --device cpu --weights " + w + shape);
    ASSERT_EQ(r.status, 0) << r.out;
    json j = parse(r);
    EXPECT_TRUE(j["check"]["pass"].get<bool>());
    const double bytes = j["weights"]["bytes"].get<double>(), f32 = j["weights"]["bytes_f32"].get<double>();
    EXPECT_LT(bytes, (std::string(w) == "q8_0" ? 0.3 : 0.16) * f32) << j["weights"].dump();
    nmse[i] = j["weights"]["nmse_vs_f32"].get<double>();
    EXPECT_GT(nmse[i], 0.0);
    EXPECT_LT(nmse[i], 0.1);
    ++i;
  }
  EXPECT_LT(nmse[0], nmse[1]);
  EXPECT_EQ(run(bin("bp-run") + " --weights q4_k" + kTiny + " 2>/dev/null").status, 2);  // dim 64: not whole blocks
}

TEST(BpRun, BlasAndCpuShareMemoryWithoutCopies) {
  if (!exists(std::string(BP_TEST_PLUGIN_DIR) + "/libbp-blas.so")) GTEST_SKIP() << "blas plugin not built";
  const std::string dot = "/tmp/bp_tools_test_plan_" + std::to_string(getpid()) + ".dot";
  result r = run(bin("bp-run") + " --json --device 'blas;cpu' --dot " + dot + kTiny);
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  EXPECT_TRUE(j["check"]["pass"].get<bool>());
  EXPECT_LT(j["check"]["nmse"].get<double>(), 1e-6);
  EXPECT_EQ(j["plan"]["n_copies"], 0) << j["plan"].dump();
  EXPECT_EQ(j["plan"]["bytes_copied"], 0);
  int blas_mul_mat = 0, blas_other = 0;
  for (const auto &b : j["plan"]["backends"]) {
    if (b["backend"].get<std::string>().rfind("blas", 0) != 0) continue;
    for (const auto &[op, n] : b["ops"].items()) (op == "MUL_MAT" ? blas_mul_mat : blas_other) += n.get<int>();
  }
  EXPECT_GT(blas_mul_mat, 0) << j["plan"].dump();
  EXPECT_EQ(blas_other, 0) << j["plan"].dump();
  // The Graphviz file has both backends and no copy edge.
  std::ifstream f(dot);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(dot.c_str());
  EXPECT_NE(text.find("digraph"), std::string::npos);
  EXPECT_NE(text.find("blas"), std::string::npos);
  EXPECT_EQ(text.find("label=\"copy\""), std::string::npos);
}

TEST(BpRun, TextReportNamesPlanMemoryAndCheck) {
  result r = run(bin("bp-run") + " --device cpu" + kTiny);
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char *s : {"Plan:", "Memory:", "weights", "graph allocator", "Time per run", "PASS"})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.out;
}

TEST(BpRun, PartialBackendCopiesAndStillMatches) {
  const std::string dir = std::string(BP_TEST_FIXTURE_DIR) + "/partial";
  if (!exists(dir + "/libbp-partial.so")) GTEST_SKIP() << "partial fixture not built";
  result r = run("BP_PLUGIN_PATH=" + dir + " " + bin("bp-run") + " --json --device 'partial;cpu'" + kTiny);
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  EXPECT_TRUE(j["check"]["pass"].get<bool>());
  EXPECT_GT(j["plan"]["n_copies"].get<int>(), 0);
  EXPECT_GT(j["plan"]["n_splits"].get<int>(), 1);
}

// The partial backend has graph plans: its splits replay them unless
// --no-plans, and the logits match either way.
TEST(BpRun, SplitsReplayGraphPlansUnlessNoPlans) {
  const std::string dir = std::string(BP_TEST_FIXTURE_DIR) + "/partial";
  if (!exists(dir + "/libbp-partial.so")) GTEST_SKIP() << "partial fixture not built";
  for (bool plans : {true, false}) {
    SCOPED_TRACE(plans ? "plans" : "--no-plans");
    result r = run("BP_PLUGIN_PATH=" + dir + " " + bin("bp-run") + " --json --device 'partial;cpu'" + kTiny +
                   (plans ? "" : " --no-plans"));
    ASSERT_EQ(r.status, 0) << r.out;
    json j = parse(r);
    EXPECT_TRUE(j["check"]["pass"].get<bool>());
    int planned = 0;
    for (const auto &s : j["plan"]["splits"]) {
      if (s["graph_plan"].get<bool>()) ++planned;
      if (s["backend"] == "cpu:0") {
        EXPECT_FALSE(s["graph_plan"].get<bool>()) << "the cpu backend has no plans";
      }
    }
    if (plans) {
      EXPECT_GT(planned, 0) << r.out;
    } else {
      EXPECT_EQ(planned, 0) << r.out;
    }
  }
}

TEST(BpRun, PluginPathFlagFindsAPluginOutsideTheSearchPath) {
  const std::string dir = std::string(BP_TEST_FIXTURE_DIR) + "/partial";
  if (!exists(dir + "/libbp-partial.so")) GTEST_SKIP() << "partial fixture not built";
  result r = run(bin("bp-run") + " --json --plugin-path " + dir + " --device 'partial;cpu'" + kTiny);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(parse(r)["check"]["pass"].get<bool>());
  // A folder that does not exist is an error naming it, not a silent fallback.
  r = run(bin("bp-run") + " --plugin-path /nonexistent/bp-plugins --device 'partial;cpu'" + kTiny + " 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("/nonexistent/bp-plugins"), std::string::npos) << r.out;
}

TEST(BpRun, BadSizesAndDevicesFail) {
  EXPECT_EQ(run(bin("bp-run") + " --dim 64 --heads 3 2>/dev/null").status, 2);  // heads must divide dim
  EXPECT_NE(run(bin("bp-run") + " --layers 0 2>/dev/null").status, 0);
  result r = run(bin("bp-run") + " --device nosuchdevice" + kTiny + " 2>&1 >/dev/null");  // stderr only
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("bp-run: error: --device \"nosuchdevice\""), std::string::npos) << r.out;
  r = run(bin("bp-run") + " --device nosuchdevice" + kTiny + " 2>/dev/null");  // stdout only
  EXPECT_EQ(r.out.find("devices:"), std::string::npos) << "an empty device line before the error: " << r.out;
  EXPECT_NE(run(bin("bp-run") + " --seed -1 2>/dev/null").status, 0);
  r = run(bin("bp-run") + kTiny + " --dot /nonexistent/dir/plan.dot 2>&1 >/dev/null");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;
}

// ---- bp-bench --------------------------------------------------------------
// A smoke test, not a speed check: every benchmark runs without an error and
// each backend figure is paired with a reference measured in the same run.

TEST(BpBench, ShortRunReportsEveryBenchmarkWithItsReference) {
  if (!exists(bin("bp-bench"))) GTEST_SKIP() << "bp-bench not built (needs libbenchmark-dev and OpenBLAS)";
  result r = run(bin("bp-bench") +
                 " --device cpu:threads=1 --threads 1 --benchmark_filter='^(ADD|RMS_NORM)/'"
                 " --benchmark_min_time=0.01 --benchmark_format=json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  json j = parse(r);
  ASSERT_TRUE(j.contains("benchmarks")) << r.out;
  int backend_runs = 0, reference_runs = 0;
  for (const auto &b : j["benchmarks"]) {
    const std::string name = b["name"].get<std::string>();
    EXPECT_FALSE(b.contains("error_occurred") && b["error_occurred"].get<bool>()) << name;
    EXPECT_GT(b["bytes"].get<double>(), 0.0) << name;  // the rate counter the summary divides
    (name.find("/ref:memcpy") != std::string::npos ? reference_runs : backend_runs)++;
  }
  EXPECT_EQ(backend_runs, 2) << r.out;  // ADD and RMS_NORM on cpu:threads=1
  EXPECT_EQ(reference_runs, 2) << r.out;
  // The machine references the ratios are taken against, in the context.
  for (const char *key : {"bp-bench peak (before)", "bp-bench dram (before)", "bp-bench dram read (before)"})
    EXPECT_TRUE(j["context"].contains(key)) << key << "\n" << r.out;
}

TEST(BpBench, BadFlagsAndDevicesFail) {
  if (!exists(bin("bp-bench"))) GTEST_SKIP() << "bp-bench not built";
  EXPECT_EQ(run(bin("bp-bench") + " --threads 0 2>/dev/null").status, 2);
  EXPECT_EQ(run(bin("bp-bench") + " --benchmark_format=csv 2>/dev/null").status, 2);
  result r = run(bin("bp-bench") + " --device nosuchdevice --benchmark_min_time=0.01 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("nosuchdevice"), std::string::npos) << r.out;
}

}  // namespace
