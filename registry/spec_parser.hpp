// spec_parser.hpp: the device spec grammar ("cpu:threads=2;vulkan:1").
//
// What it is: a pure function from text to a parsed list, with no access to
// the registry, so it can be table-tested and fuzzed on its own (the test
// binary compiles spec_parser.cpp directly). It checks syntax and limits
// only; whether a plugin, device or key exists is decided later
// (registry/params.cpp). Grammar and examples: docs/device-spec.md.
//
//   list   := spec (';' spec)*
//   spec   := name [':' params]
//   params := param (',' param)*
//   param  := INT                 (device index, same as device=INT)
//           | key '=' value
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/backplane.h"

namespace bp::registry {

inline constexpr size_t k_spec_max_bytes = 1024;  // whole input
inline constexpr size_t k_spec_max_params = 64;   // per spec
inline constexpr size_t k_spec_max_name = 31;     // plugin names and keys

struct spec_param {
  std::string key;    // "device" for a positional index
  std::string value;  // text as written
  size_t column = 0;  // 1-based byte column of the param in the input
  bool positional = false;
};

struct parsed_spec {
  std::string name;  // plugin name or "auto"
  std::vector<spec_param> params;
  size_t column = 0;  // 1-based column where the spec starts
  std::string text;   // the spec as written (for messages)
  // The param with |key|, or nullptr.
  const spec_param *find(std::string_view key) const;
};

struct spec_parse_result {
  bp_status status = BP_OK;
  std::string message;  // set when status != BP_OK: input, column, cause, fix
  size_t column = 0;    // 1-based column of the error, 0 when OK
  std::vector<parsed_spec> specs;
};

// Parses a ';'-separated list. Spaces around each list element are ignored;
// anywhere else they are an error. Never throws except std::bad_alloc.
spec_parse_result parse_spec_list(std::string_view input);

// Parses exactly one spec (a ';' is an error that points at the list API).
spec_parse_result parse_spec(std::string_view input);

// Parses only the params part ("threads=2,flavor=1"), as given to
// bp_backend_new_on_device. An empty string gives no params.
spec_parse_result parse_spec_params(std::string_view input);

// True for [a-z0-9_]+ of at most k_spec_max_name bytes (plugin names, keys).
bool is_valid_identifier(std::string_view s);

// Parses a decimal integer (optional sign) with overflow check.
bool parse_int64(std::string_view s, int64_t *out);

// |input| quoted for a message: non-printable bytes as \xNN, long input cut.
std::string quote_for_message(std::string_view input);

}  // namespace bp::registry
