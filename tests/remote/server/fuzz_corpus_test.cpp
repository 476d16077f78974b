// fuzz_corpus_test.cpp: replays the remote-request libFuzzer corpus as a
// regression test. The fuzz target (tests/fuzz/remote_request_fuzz.cpp) is
// compiled in, so every file, including each committed crash reproducer,
// goes through the same oracle libFuzzer uses; a violation aborts, which
// fails this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/remote_request_fuzz.cpp"

namespace {

namespace fs = std::filesystem;

TEST(RemoteRequestCorpus, EveryCorpusFileSatisfiesTheFuzzOracle) {
  const fs::path dir = fs::path(BP_TEST_SOURCE_DIR) / "fuzz" / "corpus" / "remote_request";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 9u) << "the corpus lost its seeds";
  for (const fs::path &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", f.filename().c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
}

// The graph seeds are valid requests: they must register and compute, or
// the fuzzer would only ever explore refusals.
TEST(RemoteRequestCorpus, GraphSeedsRegister) {
  harness &h = state();
  // Zeroed memory: GET_ROWS reads its row ids from the buffer.
  for (int i = 1; i <= 2; ++i) {
    pb::BufferClearRequest clr;
    clr.set_buffer(h.handles[i]);
    ASSERT_TRUE(h.core->buffer_clear(h.meta(), clr).ok());
  }
  for (const char *name : {"seed-mul-mat-scale", "seed-view-neg", "seed-transpose-cont", "seed-get-rows"}) {
    std::ifstream in(fs::path(BP_TEST_SOURCE_DIR) / "fuzz" / "corpus" / "remote_request" / name, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 1u) << name;
    pb::GraphRegisterRequest q;
    ASSERT_TRUE(q.ParseFromString(bytes.substr(1))) << name;
    q.set_backend(h.map(q.backend()));
    map_descs(h, q.mutable_tensors());
    pb::Handle g;
    const grpc::Status st = h.core->graph_register(h.meta(), q, &g);
    ASSERT_TRUE(st.ok()) << name << ": " << st.error_message();
    EXPECT_TRUE(h.core->graph_compute(h.meta(), g).ok()) << name;
    EXPECT_TRUE(h.core->graph_free(h.meta(), g).ok()) << name;
  }
}

}  // namespace
