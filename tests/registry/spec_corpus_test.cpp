// spec_corpus_test.cpp: replays the libFuzzer corpus as a regression test
// (docs/failures.md #13). The
// fuzz target itself (tests/fuzz/device_spec_fuzz.cpp) is compiled in, so
// every file, including each committed crash reproducer, goes through the
// same oracle libFuzzer uses; a violation aborts, which fails this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/device_spec_fuzz.cpp"

namespace {

namespace fs = std::filesystem;

TEST(SpecCorpus, EveryCorpusFileSatisfiesTheFuzzOracle) {
  const fs::path dir = fs::path(BP_TEST_SOURCE_DIR) / "fuzz" / "corpus" / "device_spec";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 20u) << "the corpus lost its seeds and regression files";
  for (const fs::path &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Printed first: an oracle failure aborts before gtest can say which file.
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", f.filename().c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
}

// The regression files each pin one verdict; the oracle only checks
// consistency, so the expected outcome is spelled out here.
TEST(SpecCorpus, RegressionFilesKeepTheirVerdict) {
  const fs::path dir = fs::path(BP_TEST_SOURCE_DIR) / "fuzz" / "corpus" / "device_spec";
  struct verdict {
    const char *file;
    bool accepted;
    const char *cause;  // substring of the message when refused
  };
  const verdict verdicts[] = {
      {"regress-max-length", true, ""},
      {"regress-over-length", false, "longer than 1024 bytes"},
      {"regress-64-params", true, ""},
      {"regress-65-params", false, "more than 64 parameters"},
      {"regress-index-overflow-u32", false, "too large"},
      {"regress-index-overflow-u64", false, "too large"},
      {"regress-embedded-nul", false, "embedded NUL"},
      {"regress-utf8-name", false, "non-ASCII byte 0xC3"},
      {"regress-overlong-utf8", false, "non-ASCII byte 0xC0"},
      {"regress-invalid-utf8", false, "non-ASCII byte 0xFF"},
      {"regress-long-list", true, ""},
      {"regress-duplicate-after-index", false, "duplicate key 'device'"},
  };
  for (const verdict &v : verdicts) {
    SCOPED_TRACE(v.file);
    std::ifstream in(dir / v.file, std::ios::binary);
    ASSERT_TRUE(in) << "missing corpus file";
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    spec_parse_result r = parse_spec_list(bytes);
    EXPECT_EQ(r.status == BP_OK, v.accepted) << r.message;
    if (!v.accepted) {
      EXPECT_NE(r.message.find(v.cause), std::string::npos) << r.message;
    }
  }
}

}  // namespace
