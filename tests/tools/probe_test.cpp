// probe_test.cpp: bp-devices --probe lists a plugin file whose constructor
// ends the process as refused, with the cause, instead of ending the tool
//.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {

TEST(BpDevicesProbe, AFileThatExitsAtDlopenIsListedNotFatal) {
  const std::string probe_dir = std::string(BP_TEST_FIXTURE_DIR) + "/probe";
  const std::string cmd = "BP_PLUGIN_PROBE_TIMEOUT=2 " + std::string(BP_TEST_BIN_DIR) +
                          "/bp-devices --probe --plugin-path " + probe_dir + " 2>/dev/null";
  FILE *p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 0) << out;  // without --probe: 3, from the constructor
  EXPECT_NE(out.find("libbp-ctor_exit.so"), std::string::npos) << out;
  EXPECT_NE(out.find("exited with status 3"), std::string::npos) << out;
  EXPECT_NE(out.find("did not finish within 2 s"), std::string::npos) << out;
}

}  // namespace
