// text_stream_test.cpp: the text side of a generation on bytes alone
// (models/text_stream.hpp): UTF-8 characters split over tokens and stop
// strings are held back; invalid lead bytes are not.
#include <gtest/gtest.h>

#include <string>

#include "text_stream.hpp"

namespace {

using bp::model::text_stream;
using bp::model::utf8_incomplete_tail;

TEST(TextStream, IncompleteUtf8IsHeldUntilItsLastByte) {
  EXPECT_EQ(utf8_incomplete_tail("abc", 3), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xC3", 2), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE2\x82", 3), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE2\x82\xAC", 4), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x98", 3), 3u);
  EXPECT_EQ(utf8_incomplete_tail("\x80\x80\x80", 3), 0u);  // not UTF-8: printed as it comes

  text_stream s;
  EXPECT_EQ(s.push("h"), "h");
  EXPECT_EQ(s.push("\xE2"), "");  // € = E2 82 AC, one byte token at a time
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC!"), "\xE2\x82\xAC!");
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.finish(), "\xF0\x9F");  // the end prints what is held
}

// The lead bytes that can begin a valid character are 0xC2-0xF4 (RFC 3629):
// those are held, every other byte is printed at once.
TEST(TextStream, OnlyLeadBytesOfValidCharactersAreHeld) {
  for (int b = 0x80; b <= 0xFF; ++b) {
    const std::string one(1, static_cast<char>(b));
    const bool lead = b >= 0xC2 && b <= 0xF4;
    EXPECT_EQ(utf8_incomplete_tail(one, 1), lead ? 1u : 0u) << std::hex << "byte 0x" << b;
    text_stream s;
    EXPECT_EQ(s.push("x" + one), lead ? "x" : "x" + one) << std::hex << "byte 0x" << b;
  }
  // After an invalid lead byte, the next character is held on its own terms.
  text_stream s;
  EXPECT_EQ(s.push("\xC0"), "\xC0");
  EXPECT_EQ(s.push("\xC3"), "");
  EXPECT_EQ(s.push("\xA9"), "\xC3\xA9");
}

TEST(TextStream, StopStringsAreHeldBackAndNeverPrinted) {
  text_stream s({"\n\n", "END"});
  std::string out;
  out += s.push("Hello");
  out += s.push(" E");
  EXPECT_EQ(out, "Hello ");  // "E" may start "END"
  out += s.push("x");
  EXPECT_EQ(out, "Hello Ex");  // it did not
  out += s.push("\n");
  EXPECT_EQ(out, "Hello Ex");
  out += s.push("\nmore");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(out, "Hello Ex");
  EXPECT_EQ(s.push("after"), "");
  EXPECT_EQ(s.finish(), "");

  // A stop string inside one token: the text before it is printed.
  text_stream t({"END"});
  EXPECT_EQ(t.push("abcENDdef"), "abc");
  EXPECT_TRUE(t.stopped());

  // A start of a stop string that never completes is printed at the end.
  text_stream u({"END"});
  EXPECT_EQ(u.push("xEN"), "x");
  EXPECT_EQ(u.finish(), "EN");
  EXPECT_FALSE(u.stopped());
}

TEST(TextStream, ACharacterBeforeAHeldStopPrefixIsNotSplit) {
  // é = C3 A9; the stop string starts with A9, so A9 is held, and C3 with it.
  text_stream s({std::string("\xA9!")});
  EXPECT_EQ(s.push("\xC3\xA9"), "");
  EXPECT_EQ(s.push("x"), "\xC3\xA9x");
}

}  // namespace
