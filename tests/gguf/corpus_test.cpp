// corpus_test.cpp: replays the libFuzzer corpus of the GGUF parser
// (tests/fuzz/corpus/gguf: the seeds and any crash reproducer) through the
// fuzz target itself, compiled in, so the ctest suite checks the same
// oracle libFuzzer uses; a violation aborts, which fails this test. Every
// seed is also a file the library opens.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "backplane/gguf.h"
#include "fuzz/gguf_fuzz.cpp"

namespace fs = std::filesystem;

TEST(GgufCorpus, EveryCorpusFileSatisfiesTheFuzzOracle) {
  const fs::path dir = fs::path(BP_TEST_SOURCE_DIR) / "fuzz" / "corpus" / "gguf";
  int files = 0, seeds = 0;
  for (const auto &e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
    ++files;
    if (e.path().filename().string().rfind("seed-", 0) == 0) {
      ++seeds;
      bp_gguf *f = nullptr;
      EXPECT_EQ(bp_gguf_open(e.path().c_str(), &f), BP_OK) << e.path() << ": " << bp_last_error();
      bp_gguf_close(f);
    }
  }
  EXPECT_GE(seeds, 3) << "the seed corpus is missing from " << dir;
  EXPECT_GE(files, seeds);
}
