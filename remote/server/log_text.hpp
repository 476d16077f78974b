// log_text.hpp: a string a client sent, made safe to write into the log.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bp::remote::server {

// The longest client string the log shows; the rest is cut and counted.
inline constexpr size_t k_log_text_max = 64;

// |text| with every byte outside printable ASCII (newlines, ANSI escapes,
// UTF-8) and the backslash written as \xNN, cut after |max| input bytes with
// "...(+N bytes)", so a client can neither forge a log line nor flood the
// log.
std::string log_text(std::string_view text, size_t max = k_log_text_max);

}  // namespace bp::remote::server
