// malformed_test.cpp: every way a GGUF file can lie, crafted byte by byte
// (gguf_bytes.hpp), must give INVALID_ARGUMENT with a message naming the
// field and its byte offset: never a crash, never a read outside the bytes
// (the sanitizer pass runs this too).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "backplane/gguf.h"
#include "gguf_bytes.hpp"

using gguf_test::bytes;

namespace {

// A small valid file: one u32 pair, tensors a [4, 2] f32 at 0 and b [8] f16 at 32.
bytes valid_file() {
  bytes f = gguf_test::header(2, 1);
  gguf_test::kv_u32(f, "test.answer", 42);
  gguf_test::tensor_info(f, "a", {4, 2}, 0, 0);
  gguf_test::tensor_info(f, "b", {8}, 1, 32);
  f.pad_to(32);
  for (int i = 0; i < 8; ++i) f.put<float>(static_cast<float>(i));
  f.zeros(16);  // b: 8 halfs of zero
  return f;
}

// Opens |f| from memory; returns the status, closes what opened.
bp_status open_bytes(const bytes &f, std::string *message = nullptr) {
  bp_gguf *g = nullptr;
  bp_status st = bp_gguf_open_memory(f.b.data(), f.b.size(), &g);
  if (message) *message = bp_last_error();
  bp_gguf_close(g);
  return st;
}

void expect_refused(const bytes &f, const std::string &field) {
  std::string msg;
  EXPECT_EQ(open_bytes(f, &msg), BP_ERR_INVALID_ARGUMENT) << "expected a refusal naming " << field;
  EXPECT_NE(msg.find(field), std::string::npos) << "message: " << msg << "\nshould name: " << field;
  EXPECT_NE(msg.find("byte"), std::string::npos) << "message: " << msg << "\nshould give a byte offset";
}

// A file with one tensor whose info is |info| (everything after the header).
bytes one_tensor(const std::string &name, const std::vector<uint64_t> &ne, uint32_t type, uint64_t offset,
                 size_t data_bytes) {
  bytes f = gguf_test::header(1, 0);
  gguf_test::tensor_info(f, name, ne, type, offset);
  f.pad_to(32).zeros(data_bytes);
  return f;
}

}  // namespace

TEST(GgufMalformed, TheValidFileOpens) {
  std::string msg;
  ASSERT_EQ(open_bytes(valid_file(), &msg), BP_OK) << msg;
}

TEST(GgufMalformed, EveryTruncationIsRefused) {
  const bytes full = valid_file();
  // Past the last tensor's data nothing more is needed: every shorter prefix
  // lacks part of the header, the infos or b's data.
  for (size_t n = 0; n < full.size(); ++n) {
    bytes f;
    f.b.assign(full.b.begin(), full.b.begin() + static_cast<long>(n));
    std::string msg;
    ASSERT_EQ(open_bytes(f, &msg), BP_ERR_INVALID_ARGUMENT) << "prefix of " << n << " bytes";
    ASSERT_TRUE(msg.find("truncated") != std::string::npos || msg.find("past the") != std::string::npos ||
                msg.find("more ") != std::string::npos)
        << n << ": " << msg;
  }
}

TEST(GgufMalformed, TruncatedHeaderNamesTheField) {
  bytes f;
  f.raw("GGUF", 4).put<uint32_t>(3).put<uint32_t>(0);
  expect_refused(f, "truncated file: n_tensors");
}

TEST(GgufMalformed, BadMagicVersionAndByteOrder) {
  bytes f = valid_file();
  f.b[0] = 'X';
  expect_refused(f, "magic");
  f = valid_file();
  f.b[4] = 1;
  expect_refused(f, "version");
  f = valid_file();
  f.b[4] = 0, f.b[7] = 3;
  expect_refused(f, "big-endian");
  f = valid_file();
  f.b[4] = 2;  // version 2 has the same layout: it opens
  EXPECT_EQ(open_bytes(f), BP_OK) << bp_last_error();
}

TEST(GgufMalformed, CountsBeyondTheFile) {
  expect_refused(gguf_test::header(uint64_t{1} << 40, 0), "n_tensors");
  expect_refused(gguf_test::header(0, uint64_t{1} << 40), "n_kv");
  expect_refused(gguf_test::header(UINT64_MAX, 0), "n_tensors");
  expect_refused(gguf_test::header(0, UINT64_MAX), "n_kv");
}

TEST(GgufMalformed, StringLengthPastTheEnd) {
  bytes f = gguf_test::header(0, 1);
  f.put<uint64_t>(UINT64_MAX - 3).raw("abcd", 4).zeros(16);
  expect_refused(f, "string length of key");
  f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(8).put<uint64_t>(1000).raw("short", 5);
  expect_refused(f, "string length of value of 'k'");
  f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("one").put<uint64_t>(99).zeros(10);
  expect_refused(f, "string length of an element of 'k'");
}

TEST(GgufMalformed, ArrayLengthBeyondTheFile) {
  bytes f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(uint64_t{1} << 61).zeros(64);
  expect_refused(f, "array length of 'k'");
  f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(9).put<uint32_t>(12).put<uint64_t>(UINT64_MAX).zeros(64);  // count * 8 overflows
  expect_refused(f, "array length of 'k'");
}

TEST(GgufMalformed, ArrayOfArraysAndUnknownKinds) {
  bytes f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1).put<uint32_t>(4).put<uint64_t>(1).put<uint32_t>(7);
  expect_refused(f, "array type of 'k'");
  f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(13).zeros(8);
  expect_refused(f, "value_type");
  f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0);
  expect_refused(f, "array type of 'k'");
  f = gguf_test::header(0, 1);
  f.str("k").put<uint32_t>(7).put<uint8_t>(2);
  expect_refused(f, "bool value");
}

TEST(GgufMalformed, KeysMustBeUtf8UniqueAndNonEmpty) {
  bytes f = gguf_test::header(0, 1);
  gguf_test::kv_u32(f, std::string("bad\xff", 4), 1);
  expect_refused(f, "key of kv 0");
  f = gguf_test::header(0, 1);
  gguf_test::kv_u32(f, std::string("over\xc0\xaflong", 10), 1);  // overlong '/'
  expect_refused(f, "not valid UTF-8");
  f = gguf_test::header(0, 2);
  gguf_test::kv_u32(f, "same", 1);
  gguf_test::kv_u32(f, "same", 2);
  expect_refused(f, "key 'same'");
  f = gguf_test::header(0, 1);
  gguf_test::kv_u32(f, "", 1);
  expect_refused(f, "key of kv 0");
}

TEST(GgufMalformed, Alignment) {
  bytes f = gguf_test::header(0, 1);
  gguf_test::kv_u32(f, "general.alignment", 12);
  expect_refused(f, "general.alignment");
  f = gguf_test::header(0, 1);
  gguf_test::kv_u32(f, "general.alignment", 0);
  expect_refused(f, "general.alignment");
  f = gguf_test::header(0, 1);
  f.str("general.alignment").put<uint32_t>(10).put<uint64_t>(32);
  expect_refused(f, "general.alignment");
}

TEST(GgufMalformed, Dimensions) {
  expect_refused(one_tensor("t", {1, 1, 1, 1, 1}, 0, 0, 4), "n_dims of tensor 't'");
  expect_refused(one_tensor("t", {}, 0, 0, 4), "n_dims of tensor 't'");
  expect_refused(one_tensor("t", {4, 0}, 0, 0, 16), "ne[1] of tensor 't'");
  expect_refused(one_tensor("t", {UINT64_MAX}, 0, 0, 16), "ne[0] of tensor 't'");  // -1 as int64
  expect_refused(one_tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 16), "element count of tensor 't'");
  // The element count fits int64 but the bytes do not fit 64 bits.
  expect_refused(one_tensor("t", {uint64_t{1} << 31, uint64_t{1} << 30}, 28, 0, 16), "more bytes than 64 bits");
}

TEST(GgufMalformed, TypesAndBlocks) {
  expect_refused(one_tensor("t", {4}, 99, 0, 16), "tensor type of tensor 't'");
  expect_refused(one_tensor("t", {4}, 4, 0, 16), "tensor type of tensor 't'");  // removed from the format
  expect_refused(one_tensor("t", {30}, 8, 0, 64), "ne[0] of tensor 't'");       // q8_0 blocks of 32
  std::string msg;
  EXPECT_EQ(open_bytes(one_tensor("t", {64}, 8, 0, 68), &msg), BP_OK) << msg;  // two q8_0 blocks
}

TEST(GgufMalformed, DataRanges) {
  expect_refused(one_tensor("t", {4}, 0, 0, 15), "data range of tensor 't'");
  expect_refused(one_tensor("t", {4}, 0, 32, 40), "data range of tensor 't'");
  expect_refused(one_tensor("t", {4}, 0, UINT64_MAX - 31, 40), "data range of tensor 't'");
  expect_refused(one_tensor("t", {4}, 0, 8, 64), "offset of tensor 't'");  // not a multiple of 32
  bytes f = gguf_test::header(2, 0);
  gguf_test::tensor_info(f, "a", {16}, 0, 0);
  gguf_test::tensor_info(f, "b", {4}, 0, 32);  // a covers bytes 0..63
  f.pad_to(32).zeros(64);
  expect_refused(f, "overlaps tensor 'a'");
}

TEST(GgufMalformed, TensorNames) {
  bytes f = gguf_test::header(2, 0);
  gguf_test::tensor_info(f, "a", {4}, 0, 0);
  gguf_test::tensor_info(f, "a", {4}, 0, 32);
  f.pad_to(32).zeros(64);
  expect_refused(f, "tensor name 'a'");
  expect_refused(one_tensor(std::string(65, 'n'), {4}, 0, 0, 16), "tensor name of tensor 0");
  expect_refused(one_tensor(std::string("\xed\xa0\x80", 3), {4}, 0, 0, 16), "tensor name of tensor 0");  // a surrogate
  expect_refused(one_tensor("", {4}, 0, 0, 16), "tensor name of tensor 0");
}

// Random byte changes of a valid file: each opens or is refused with a
// message; under AddressSanitizer any read outside the bytes fails the test.
TEST(GgufMalformed, RandomMutationsNeverCrash) {
  const bytes base = valid_file();
  std::mt19937_64 rng(7);
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    bytes f = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) f.b[rng() % f.b.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) f.b.resize(rng() % f.b.size());
    // A copy of exactly the file's size on the heap, so ASan sees its end.
    std::vector<uint8_t> exact(f.b);
    bp_gguf *g = nullptr;
    bp_status st = bp_gguf_open_memory(exact.data(), exact.size(), &g);
    if (st == BP_OK) {
      for (size_t k = 0; k < bp_gguf_kv_count(g); ++k) {
        bp_gguf_value_info vi{};
        vi.struct_size = sizeof vi;
        ASSERT_EQ(bp_gguf_kv_describe(g, k, &vi), BP_OK);
      }
      bp_gguf_close(g);
    } else {
      ASSERT_EQ(st, BP_ERR_INVALID_ARGUMENT);
      ASSERT_STRNE(bp_last_error(), "");
      ++refused;
    }
  }
  EXPECT_GT(refused, 1000);
}
