// cache_test.cpp: the on-disk program cache, seen from child processes
// (bp-test-ops) with PoCL's own kernel cache off (POCL_KERNEL_CACHE=0) so
// that only ours can spare a compile. The first start compiles and writes
// the cache; the second loads every program from it; a corrupted entry is
// rebuilt (and rewritten); an unwritable folder is only a warning.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "opencl_harness.hpp"

using namespace bp_opencl_test;
namespace fs = std::filesystem;

namespace {

class ProgramCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_specs().empty()) GTEST_SKIP() << "no OpenCL device on this machine";
    dir_ = fs::temp_directory_path() / ("bp-opencl-cache-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // One op whose kernels live in one program (rows.cl), so a start is cheap.
  child_result start(const std::string &cache_dir) {
    // Under ASan the child's leak check at exit stays on, but does not scan
    // thread-local storage as roots (use_tls=0): LeakSanitizer's tracer
    // crashed (SIGSEGV at 0x338 while processing the main thread's dynamic
    // TLS, which PoCL's and LLVM's dlopen()ed libraries fill) depending only
    // on the child's working directory. Without TLS roots the check can only
    // report more, never hide a leak.
    const char *lsan = std::getenv("LSAN_OPTIONS");
    const std::string lsan_options = std::string(lsan ? lsan : "") + (lsan && *lsan ? ":" : "") + "use_tls=0";
    const std::string cmd = "env POCL_KERNEL_CACHE=0 BP_LOG=debug LSAN_OPTIONS='" + lsan_options +
                            "' BP_PLUGIN_PATH='" BP_TEST_PLUGIN_DIR "' BP_CACHE_DIR='" + cache_dir +
                            "' '" BP_TEST_BIN_DIR "/bp-test-ops' -b opencl -o RMS_NORM";
    return run_child(cmd);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> v;
    if (fs::exists(dir_ / "opencl"))
      for (const auto &e : fs::directory_iterator(dir_ / "opencl")) v.push_back(e.path());
    return v;
  }
  fs::path dir_;
};

const char kCompiled[] = "compiled from source";
const char kLoaded[] = "loaded from the cache";

TEST_F(ProgramCache, SecondStartDoesNotCompile) {
  child_result first = start(dir_.string());
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_GE(count_of(first.output, kCompiled), 1u) << first.output;
  EXPECT_EQ(count_of(first.output, kLoaded), 0u) << first.output;
  ASSERT_EQ(entries().size(), 1u);
  for (const fs::path &p : entries()) EXPECT_EQ(p.extension(), ".bin") << p;  // no temporary left behind

  child_result second = start(dir_.string());
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_EQ(count_of(second.output, kCompiled), 0u) << second.output;
  EXPECT_GE(count_of(second.output, kLoaded), 1u) << second.output;
}

TEST_F(ProgramCache, CorruptEntryIsRebuilt) {
  ASSERT_EQ(start(dir_.string()).status, 0);
  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries()[0];
  {
    // Flip a byte in the middle of the driver's binary.
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry) / 2));
    f.put('\x7f');
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry) / 2 + 1));
    f.put('\x01');
  }
  child_result again = start(dir_.string());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("checksum mismatch"), std::string::npos) << again.output;
  EXPECT_GE(count_of(again.output, kCompiled), 1u) << again.output;

  // Truncated to less than a header: rebuilt too.
  fs::resize_file(entry, 10);
  again = start(dir_.string());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("truncated header"), std::string::npos) << again.output;

  // The rebuilt entry was written back and is trusted next time.
  again = start(dir_.string());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(count_of(again.output, kCompiled), 0u) << again.output;
}

TEST_F(ProgramCache, UnwritableFolderOnlyWarns) {
  // A regular file where a folder should be: no one (not even root) can
  // create the cache below it.
  fs::create_directories(dir_);
  { std::ofstream(dir_ / "not-a-folder") << "x"; }
  child_result r = start((dir_ / "not-a-folder" / "cache").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cannot write the program cache"), std::string::npos) << r.output;
  EXPECT_EQ(count_of(r.output, "cannot write the program cache"), 1u) << "warn once per device:\n" << r.output;
}

}  // namespace
