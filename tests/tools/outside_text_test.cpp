// outside_text_test.cpp: no byte of outside text aborts a tool. File names,
// device descriptions and plugin messages may hold bytes
// that are not UTF-8 (nlohmann::json threw type_error 316 on them: exit 134);
// JSON replaces them, text output escapes them and control bytes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include "support/run_command.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using result = bp::test::command_result;
constexpr auto run = bp::test::run_command;

std::string bin(const std::string &tool) { return std::string(BP_TEST_BIN_DIR) + "/" + tool; }

class OutsideText : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/bp_outside_text_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Not UTF-8, and a newline plus an escape sequence: a file name may be
    // any bytes but '/' and NUL.
    std::ofstream(dir_ + "/libbp-\xff.so") << "not a shared object\n";
    std::ofstream(dir_ + "/libbp-a\nb\x1b[2J.so") << "not a shared object\n";
    bad_utf8_ = std::string(BP_TEST_FIXTURE_DIR) + "/libbp-bad_utf8.so";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, bad_utf8_;
};

TEST_F(OutsideText, DevicesJsonReplacesBytesThatAreNotUtf8) {
  result r = run("BP_PLUGIN_PATH='" + dir_ + "' " + bin("bp-devices") + " --json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  bool listed = false;
  for (const auto &rej : j["rejected"])
    listed = listed || rej["path"].get<std::string>().find("libbp-\xEF\xBF\xBD.so") != std::string::npos;
  EXPECT_TRUE(listed) << r.out;  // U+FFFD stands for the 0xFF byte
}

TEST_F(OutsideText, DevicesTextEscapesControlBytesInFileNames) {
  result r = run("BP_PLUGIN_PATH='" + dir_ + "' " + bin("bp-devices") + " 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "raw escape sequence printed";
  EXPECT_EQ(r.out.find("\xff"), std::string::npos) << "raw 0xFF printed";
  EXPECT_NE(r.out.find("libbp-a\\x0Ab\\x1B[2J.so"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libbp-\\xFF.so"), std::string::npos) << r.out;
}

TEST_F(OutsideText, TestOpsAndRunJsonSurviveAPluginMessageThatIsNotUtf8) {
  if (!fs::exists(bad_utf8_)) GTEST_SKIP() << bad_utf8_ << " is not built";
  result r = run(bin("bp-test-ops") + " --plugin " + bad_utf8_ + " -b bad_utf8 -o ADD --json - 2>/dev/null");
  EXPECT_EQ(r.status, 1) << r.out;  // the cases fail; the tool does not abort
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  EXPECT_NE(r.out.find("caf\xEF\xBF\xBD"), std::string::npos) << r.out;

  r = run(bin("bp-run") + " --plugin " + bad_utf8_ +
          " --device bad_utf8 --json --layers 1 --dim 16 --heads 2 --ff 16 --vocab 8 --tokens 2 --runs 1 2>/dev/null");
  EXPECT_NE(r.status, 134) << r.out;
  EXPECT_LT(r.status, 128) << r.out;
  j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
}

}  // namespace
