// tools_test.cpp: bp-gguf show, get and check on a file made here, bad files
// through the tool, and bp-run --save then --load giving the same logits.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"
#include "gguf_test_util.hpp"
#include "support/run_command.hpp"

namespace {

using result = bp::test::command_result;
constexpr auto run = bp::test::run_command;

std::string bin(const std::string &tool) { return std::string(BP_TEST_BIN_DIR) + "/" + tool; }

std::vector<float> read_f32(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// f32 w [4, 3] = 0.5 * i, f16 h [8] = i - 4 (exact halves), i32 ids [5] = 10 * i,
// a 20-element string array, an i8 tensor Backplane does not hold.
void make_file(const std::string &path, bool with_i8) {
  bp_gguf_writer *w = nullptr;
  ASSERT_EQ(bp_gguf_writer_new(&w), BP_OK);
  std::vector<std::string> words;
  std::vector<const char *> ptrs;
  for (int i = 0; i < 20; ++i) words.push_back("word" + std::to_string(i));
  for (const auto &s : words) ptrs.push_back(s.c_str());
  ASSERT_EQ(bp_gguf_writer_add_array(w, "tok.words", BP_GGUF_STRING, ptrs.data(), ptrs.size()), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_string(w, "general.name", "tiny", 4), BP_OK);
  float wf[12];
  for (int i = 0; i < 12; ++i) wf[i] = 0.5f * static_cast<float>(i);
  uint16_t hf[8];
  for (int i = 0; i < 8; ++i) hf[i] = bp_fp32_to_fp16(static_cast<float>(i - 4));
  int32_t ids[5];
  for (int i = 0; i < 5; ++i) ids[i] = 10 * i;
  int8_t small[4] = {-1, 2, -3, 4};
  const int64_t ne_w[2] = {4, 3}, ne_h[1] = {8}, ne_i[1] = {5}, ne_s[1] = {4};
  ASSERT_EQ(bp_gguf_writer_add_tensor_data(w, "w", 0, 2, ne_w, wf, sizeof wf), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_tensor_data(w, "h", 1, 1, ne_h, hf, sizeof hf), BP_OK);
  ASSERT_EQ(bp_gguf_writer_add_tensor_data(w, "ids", 26, 1, ne_i, ids, sizeof ids), BP_OK);
  if (with_i8) {
    ASSERT_EQ(bp_gguf_writer_add_tensor_data(w, "small", 24, 1, ne_s, small, sizeof small), BP_OK);
  }
  ASSERT_EQ(bp_gguf_writer_write(w, path.c_str()), BP_OK) << bp_last_error();
  bp_gguf_writer_free(w);
}

}  // namespace

TEST(GgufTool, ShowListsMetadataTensorsAndTotals) {
  gguf_test::scratch file("show.gguf");
  make_file(file.path, true);
  result r = run(bin("bp-gguf") + " show " + file.path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("version     3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("string[20]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("... (12 more)"), std::string::npos) << r.out;  // long arrays abbreviated
  EXPECT_NE(r.out.find("\"tiny\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[4, 3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("i8 (not loadable)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all   4        88"), std::string::npos) << r.out;  // 48 + 16 + 20 + 4 bytes

  r = run(bin("bp-gguf") + " show --json " + file.path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"word19\""), std::string::npos) << r.out;  // whole arrays in JSON
  EXPECT_NE(r.out.find("\"total_bytes\": 88"), std::string::npos) << r.out;
}

TEST(GgufTool, GetWritesLittleEndianF32) {
  gguf_test::scratch file("get.gguf"), out("get.f32");
  make_file(file.path, true);
  ASSERT_EQ(run(bin("bp-gguf") + " get " + file.path + " w --out " + out.path).status, 0);
  std::vector<float> v = read_f32(out.path);
  ASSERT_EQ(v.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[i], 0.5f * i);
  ASSERT_EQ(run(bin("bp-gguf") + " get " + file.path + " h --out " + out.path).status, 0);
  v = read_f32(out.path);
  ASSERT_EQ(v.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v[i], static_cast<float>(i - 4));
  ASSERT_EQ(run(bin("bp-gguf") + " get " + file.path + " small --out " + out.path).status, 0);
  v = read_f32(out.path);
  EXPECT_EQ(v, (std::vector<float>{-1, 2, -3, 4}));
  result r = run(bin("bp-gguf") + " get " + file.path + " nope --out " + out.path + " 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("no tensor 'nope'"), std::string::npos) << r.out;
}

TEST(GgufTool, CheckLoadsVerifiesAndTimes) {
  gguf_test::scratch file("check.gguf");
  make_file(file.path, false);
  // --no-cold: a test must not drop the page cache of every other test running.
  result r = run(bin("bp-gguf") + " check " + file.path + " --device cpu --no-cold");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("every byte read back and equal to the file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warm load (mapped)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warm load (copied)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warm read() of the file"), std::string::npos) << r.out;
  // A tensor Backplane cannot hold: check fails and says which.
  gguf_test::scratch other("check_i8.gguf");
  make_file(other.path, true);
  r = run(bin("bp-gguf") + " check --no-cold " + other.path + " 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("'small'"), std::string::npos) << r.out;
}

TEST(GgufTool, BadFilesGiveTheMessageAndExitOne) {
  gguf_test::scratch file("bad.gguf");
  gguf_test::bytes f = gguf_test::header(1, 0);
  gguf_test::tensor_info(f, "t", {4, 0}, 0, 0);
  ASSERT_TRUE(gguf_test::write_file(file.path, f.b));
  for (const std::string cmd : {" show ", " check --no-cold ", " get "}) {
    result r = run(bin("bp-gguf") + cmd + file.path + (cmd == " get " ? " t --out /dev/null" : "") + " 2>&1");
    EXPECT_EQ(r.status, 1) << cmd;
    EXPECT_NE(r.out.find("ne[1] of tensor 't'"), std::string::npos) << cmd << r.out;
  }
  EXPECT_EQ(run(bin("bp-gguf") + " show /nonexistent.gguf 2>/dev/null").status, 1);
  EXPECT_EQ(run(bin("bp-gguf") + " frobnicate 2>/dev/null").status, 2);
}

TEST(GgufTool, BpRunSaveThenLoadGivesTheSameLogits) {
  gguf_test::scratch model("model.gguf"), a("a.f32"), b("b.f32");
  const std::string sizes = " --device cpu --runs 1 --tokens 8";
  result r = run(bin("bp-run") + sizes + " --layers 2 --dim 64 --heads 2 --ff 96 --vocab 50 --seed 7 --save " +
                 model.path + " --logits-out " + a.path);
  ASSERT_EQ(r.status, 0) << r.out;
  // The sizes and seed come from the file: other flags are overridden.
  r = run(bin("bp-run") + sizes + " --load " + model.path + " --logits-out " + b.path);
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<float> la = read_f32(a.path), lb = read_f32(b.path);
  ASSERT_EQ(la.size(), 50u * 8u);
  ASSERT_EQ(la.size(), lb.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    err += (static_cast<double>(la[i]) - lb[i]) * (static_cast<double>(la[i]) - lb[i]);
    ref += static_cast<double>(la[i]) * la[i];
  }
  EXPECT_GT(ref, 0.0);
  EXPECT_EQ(err / ref, 0.0);
  // Another seed gives other logits: the file's weights were used, not regenerated.
  r = run(bin("bp-run") + sizes + " --layers 2 --dim 64 --heads 2 --ff 96 --vocab 50 --seed 8 --logits-out " + b.path);
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(read_f32(b.path), la);
  // A file that is not bp-run's.
  gguf_test::scratch other("other.gguf");
  make_file(other.path, false);
  r = run(bin("bp-run") + sizes + " --load " + other.path + " 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("bp-run.n_layer"), std::string::npos) << r.out;
}

// A q8_0 tensor comes out dequantized: each value is its block's f16 scale
// times its int8, computed here from the format's block layout.
TEST(GgufTool, GetDequantizesQ8_0) {
  gguf_test::scratch file("q8.gguf"), out("q8.f32");
  gguf_test::bytes f = gguf_test::header(1, 0);
  gguf_test::tensor_info(f, "q", {64}, 8, 0);
  f.pad_to(32);
  const float scales[2] = {0.5f, -0.125f};
  std::vector<float> want;
  for (int b = 0; b < 2; ++b) {
    f.put<uint16_t>(bp_fp32_to_fp16(scales[b]));
    for (int i = 0; i < 32; ++i) {
      const int8_t q = static_cast<int8_t>(i * 7 - 100 + b);
      f.put<int8_t>(q);
      want.push_back(scales[b] * q);
    }
  }
  ASSERT_TRUE(gguf_test::write_file(file.path, f.b));
  result r = run(bin("bp-gguf") + " show " + file.path);
  EXPECT_NE(r.out.find("q8_0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not loadable"), std::string::npos) << r.out;
  ASSERT_EQ(run(bin("bp-gguf") + " get " + file.path + " q --out " + out.path).status, 0);
  EXPECT_EQ(read_f32(out.path), want);
}
