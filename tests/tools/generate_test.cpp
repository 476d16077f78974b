// generate_test.cpp: the bp-generate binary as a user runs it on the tiny
// test model (models/tiny/tiny-kjv.gguf; the tests skip when it is absent,
// or BP_GENERATE_TEST_MODEL names another). The text it streams (UTF-8 and
// stop strings held back) is the library's generator, tested in
// tests/models/generator_test.cpp and text_stream_test.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "support/run_command.hpp"

namespace {

using json = nlohmann::json;

// ---- the binary ------------------------------------------------------------

using result = bp::test::command_result;
constexpr auto run = bp::test::run_command;

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

const std::string kBin = std::string(BP_TEST_BIN_DIR) + "/bp-generate";

std::string model_path() {
  if (const char *m = std::getenv("BP_GENERATE_TEST_MODEL")) return m;
  return std::string(BP_TEST_SOURCE_DIR) + "/../models/tiny/tiny-kjv.gguf";
}

class Generate : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!exists(kBin)) GTEST_SKIP() << kBin << " is not built";
  }
};

class GenerateModel : public Generate {
 protected:
  void SetUp() override {
    Generate::SetUp();
    if (IsSkipped()) return;
    model_ = model_path();
    if (!exists(model_)) GTEST_SKIP() << model_ << " is absent";
  }
  std::string cmd(const std::string &args) const { return kBin + " --model " + quote(model_) + " " + args; }
  json run_json(const std::string &args) const {
    result r = run(cmd(args + " --json"));
    EXPECT_EQ(r.status, 0) << r.out;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << r.out;
    return j;
  }
  std::string model_;
};

const std::string kPrompt = "-p 'In the beginning God created'";

TEST_F(Generate, BadFlagsExit2) {
  EXPECT_EQ(run(kBin + " --model x.gguf --bogus 2>/dev/null").status, 2);
  EXPECT_EQ(run(kBin + " -p hi 2>/dev/null").status, 2);  // no --model
  EXPECT_EQ(run(kBin + " --model x.gguf -p a -f b 2>/dev/null").status, 2);
  EXPECT_EQ(run(kBin + " --model x.gguf --pp 8 2>/dev/null").status, 2);  // --pp needs --bench
  EXPECT_EQ(run(kBin + " --model x.gguf --top-k many 2>/dev/null").status, 2);
  EXPECT_EQ(run(kBin + " --model x.gguf -n -3 2>/dev/null").status, 2);
  EXPECT_EQ(run(kBin + " --model x.gguf --bench --pp 0 --tg 0 2>/dev/null").status, 2);
  EXPECT_EQ(run(kBin + " --help >/dev/null").status, 0);
  EXPECT_EQ(run(kBin + " --version >/dev/null").status, 0);
}

TEST_F(Generate, AMissingModelExits1NamingThePath) {
  const std::string path = "/nonexistent/bp_generate_test/nothing.gguf";
  result r = run(kBin + " --model " + path + " -p hi 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("bp-generate: load " + path), std::string::npos) << r.out;
  r = run(kBin + " --model x.gguf -f /nonexistent/bp_generate_prompt.txt 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/bp_generate_prompt.txt"), std::string::npos) << r.out;
}

TEST_F(GenerateModel, TokenizePrintsAJsonListOfIds) {
  result r = run(cmd(kPrompt + " --tokenize"));
  ASSERT_EQ(r.status, 0) << r.out;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_FALSE(j.empty());
  for (const auto &id : j) EXPECT_TRUE(id.is_number_integer()) << r.out;
  // The same ids as --json reports for the prompt.
  json g = run_json(kPrompt + " -n 1");
  EXPECT_EQ(g["prompt_tokens"], j);
}

TEST_F(GenerateModel, JsonHasTheDocumentedFields) {
  json j = run_json(kPrompt + " -n 8");
  ASSERT_TRUE(j["prompt_tokens"].is_array());
  ASSERT_TRUE(j["tokens"].is_array());
  EXPECT_GE(j["tokens"].size(), 1u);
  EXPECT_LE(j["tokens"].size(), 8u);
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_TRUE(j["stop"].is_string());
  for (const char *k : {"prompt_ms", "prompt_tokens_per_s", "generate_ms", "generate_tokens_per_s"}) {
    ASSERT_TRUE(j["timings"][k].is_number()) << k;
    EXPECT_GE(j["timings"][k].get<double>(), 0.0) << k;
  }
  ASSERT_TRUE(j["devices"].is_array());
  ASSERT_FALSE(j["devices"].empty());
  for (const auto &d : j["devices"]) {
    EXPECT_TRUE(d["backend"].is_string());
    EXPECT_TRUE(d["layers"].is_number_integer());
    EXPECT_TRUE(d["weight_bytes"].is_number_unsigned());
    EXPECT_TRUE(d["mapped"].is_boolean());
  }
}

TEST_F(GenerateModel, LogitsOutHasOneRowPerEvaluatedPositionAndGreedyFollowsIt) {
  char tmpl[] = "/tmp/bp_generate_logits_XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string path = tmpl;
  json j = run_json(kPrompt + " -n 6 --logits-out " + path);
  const size_t n_prompt = j["prompt_tokens"].size(), n_gen = j["tokens"].size();
  const size_t n_vocab = j["n_vocab"].get<size_t>();
  const size_t rows = n_prompt + (n_gen ? n_gen - 1 : 0);
  EXPECT_EQ(j["logits_rows"].get<size_t>(), rows);
  std::vector<float> data;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    ASSERT_TRUE(in) << path;
    const auto size = static_cast<size_t>(in.tellg());
    ASSERT_EQ(size, rows * n_vocab * 4);
    data.resize(rows * n_vocab);
    in.seekg(0);
    in.read(reinterpret_cast<char *>(data.data()), static_cast<std::streamsize>(size));
  }
  std::remove(path.c_str());

  // Greedy: token i is the argmax of row n_prompt - 1 + i.
  for (size_t i = 0; i < n_gen; ++i) {
    const float *row = data.data() + (n_prompt - 1 + i) * n_vocab;
    for (size_t c = 0; c < n_vocab; ++c) ASSERT_TRUE(std::isfinite(row[c])) << "row " << n_prompt - 1 + i;
    EXPECT_EQ(std::max_element(row, row + n_vocab) - row, j["tokens"][i].get<long>()) << "token " << i;
  }
}

TEST_F(GenerateModel, GreedyAndSeededRunsRepeat) {
  json a = run_json(kPrompt + " -n 12"), b = run_json(kPrompt + " -n 12");
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_EQ(a["text"], b["text"]);
  json c = run_json(kPrompt + " -n 12 --temp 0.9 --seed 7"), d = run_json(kPrompt + " -n 12 --temp 0.9 --seed 7");
  EXPECT_EQ(c["tokens"], d["tokens"]);
}

TEST_F(GenerateModel, StreamedTextIsTheJsonTextAndStopStringsCutIt) {
  json j = run_json(kPrompt + " -n 24");
  result r = run(cmd(kPrompt + " -n 24 2>/dev/null"));
  ASSERT_EQ(r.status, 0);
  const std::string text = j["text"];
  EXPECT_EQ(r.out, text + "\n");
  if (text.size() < 8) GTEST_SKIP() << "too little text to pick a stop string from: " << text;
  const std::string stop = text.substr(text.size() / 2, 2);
  json s = run_json(kPrompt + " -n 24 --stop " + quote(stop));
  EXPECT_EQ(s["text"].get<std::string>(), text.substr(0, text.find(stop)));
  EXPECT_EQ(s["stop"], "stop");
}

TEST_F(GenerateModel, BenchReportsBothFigures) {
  json j = run_json("--bench --pp 16 --tg 4 --reps 1");
  EXPECT_EQ(j["pp"], 16);
  EXPECT_EQ(j["tg"], 4);
  EXPECT_GT(j["pp_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["tg_tokens_per_s"].get<double>(), 0.0);
  result r = run(cmd("--bench --pp 8 --tg 2 --reps 1 2>/dev/null"));
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("pp8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg2"), std::string::npos) << r.out;
}

}  // namespace
