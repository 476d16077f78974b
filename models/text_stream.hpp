// text_stream.hpp: the text side of a generation. Tokens arrive as bytes;
// what may be printed now is every byte except (a) the start of a UTF-8
// character whose remaining bytes have not arrived, and (b) a tail that
// could still become a stop string. A stop string ends the stream; neither
// it nor anything after it is printed. No model here, so the rules are
// tested on bytes alone (tests/models/text_stream_test.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bp::model {

// Bytes at the end of s[0, n) that start a UTF-8 character still missing
// bytes (0 when s[0, n) ends on a whole character). Only a lead byte that
// can begin a valid character (0xC2-0xF4, RFC 3629) is held: 0xC0, 0xC1 and
// 0xF5-0xFF never can, so waiting for their "rest" would only delay bytes
// that are invalid anyway; they are printed as they come.
size_t utf8_incomplete_tail(std::string_view s, size_t n);

class text_stream {
 public:
  // |stops| must not hold an empty string (it would match everywhere); the
  // generator's argument checks refuse one before a stream is made.
  explicit text_stream(std::vector<std::string> stops = {}) : stops_(std::move(stops)) {}

  // Adds |bytes|; returns the bytes that may be printed now. After a stop
  // string, stopped() is true and later calls return "".
  std::string push(std::string_view bytes);

  // At the end of the generation: whatever is held (an unfinished character
  // or the start of a stop string that never came) is printed after all.
  std::string finish();

  bool stopped() const { return stopped_; }

 private:
  // The longest tail of pending_ that is a proper prefix of a stop string.
  size_t stop_prefix_tail() const;

  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace bp::model
