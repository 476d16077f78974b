// tokenizer_fixture.hpp: a metadata-only GGUF file built in a test and read
// back as a tokenizer (the tokenizer tests share it).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/gguf.h"
#include "tokenizer/tokenizer.hpp"

namespace bp::test {

using bp::model::tokenizer;

// A GGUF file holding only metadata, written to a temporary path.
struct gguf_builder {
  bp_gguf_writer *w = nullptr;
  inline static std::string last_error;
  gguf_builder() { EXPECT_EQ(bp_gguf_writer_new(&w), BP_OK); }
  ~gguf_builder() { bp_gguf_writer_free(w); }
  void str(const char *key, const std::string &s) { bp_gguf_writer_add_string(w, key, s.data(), s.size()); }
  void strs(const char *key, const std::vector<std::string> &v) {
    std::vector<const char *> p;
    for (const auto &s : v) p.push_back(s.c_str());
    bp_gguf_writer_add_array(w, key, BP_GGUF_STRING, p.data(), p.size());
  }
  void f32s(const char *key, const std::vector<float> &v) {
    bp_gguf_writer_add_array(w, key, BP_GGUF_F32, v.data(), v.size());
  }
  void i32s(const char *key, const std::vector<int32_t> &v) {
    bp_gguf_writer_add_array(w, key, BP_GGUF_I32, v.data(), v.size());
  }
  void u32(const char *key, uint32_t v) { bp_gguf_writer_add_value(w, key, BP_GGUF_U32, &v); }
  void boolean(const char *key, bool b) {
    uint8_t v = b;
    bp_gguf_writer_add_value(w, key, BP_GGUF_BOOL, &v);
  }
  bp_status load(std::unique_ptr<tokenizer> *out) {
    static int counter = 0;
    const std::string path =
        ::testing::TempDir() + "/tok_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".gguf";
    EXPECT_EQ(bp_gguf_writer_write(w, path.c_str()), BP_OK);
    bp_gguf *f = nullptr;
    EXPECT_EQ(bp_gguf_open(path.c_str(), &f), BP_OK);
    const bp_status st = tokenizer::from_gguf(f, out);
    last_error = bp_last_error();
    bp_gguf_close(f);
    std::remove(path.c_str());
    return st;
  }
};

}  // namespace bp::test
