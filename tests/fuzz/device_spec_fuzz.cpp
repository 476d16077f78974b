// device_spec_fuzz.cpp: libFuzzer target for the device spec parser
// (docs/failures.md #13). The libFuzzer binary is built by hand (one line):
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined
//     -I include -I . tests/fuzz/device_spec_fuzz.cpp registry/spec_parser.cpp
//     -o device_spec_fuzz
//   ./device_spec_fuzz -max_len=1200 -runs=1000000 tests/fuzz/corpus/device_spec
//
// The corpus, including every crash reproducer committed next to the seeds
// (name it regress-<what>), is replayed through this same function by the
// ctest suite: tests/registry/spec_corpus_test.cpp compiles this file in.
//
// Every input must give either a well-formed parse or INVALID_ARGUMENT with
// a column inside the input; an accepted parse must survive printing and
// parsing again. A violation aborts, which libFuzzer reports as a crash.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "registry/spec_parser.hpp"

using namespace bp::registry;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

std::string print(const spec_parse_result &r) {
  std::string s;
  for (size_t i = 0; i < r.specs.size(); ++i) {
    if (i) s += ";";
    s += r.specs[i].name;
    for (size_t j = 0; j < r.specs[i].params.size(); ++j) {
      const spec_param &p = r.specs[i].params[j];
      s += j ? "," : ":";
      s += p.positional ? p.value : p.key + "=" + p.value;
    }
  }
  return s;
}

void check(std::string_view input, spec_parse_result (*parse)(std::string_view), bool reparse) {
  spec_parse_result r = parse(input);
  if (r.status != BP_OK) {
    require(r.status == BP_ERR_INVALID_ARGUMENT);
    require(r.specs.empty());
    require(r.column >= 1 && r.column <= input.size() + 1);
    require(r.message.find("at column " + std::to_string(r.column)) != std::string::npos);
    return;
  }
  require(!r.specs.empty() && input.size() <= k_spec_max_bytes);
  for (const parsed_spec &spec : r.specs) {
    require(spec.params.size() <= k_spec_max_params);
    std::set<std::string> keys;
    for (const spec_param &p : spec.params) require(is_valid_identifier(p.key) && keys.insert(p.key).second);
  }
  if (reparse) {
    spec_parse_result again = parse(print(r));
    require(again.status == BP_OK && print(again) == print(r));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);
  check(input, parse_spec_list, true);
  check(input, parse_spec, true);
  check(input, parse_spec_params, false);
  return 0;
}
