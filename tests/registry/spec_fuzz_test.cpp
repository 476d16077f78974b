// spec_fuzz_test.cpp: 100k random and mutated strings through the spec
// parser (docs/failures.md #13). It must never crash, and every answer is either
// a well-formed parse or INVALID_ARGUMENT with a message naming a column.
// A well-formed parse survives a print-and-reparse round trip unchanged.
// The libFuzzer twin is tests/fuzz/device_spec_fuzz.cpp.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "registry/spec_parser.hpp"

using namespace bp::registry;

namespace {

const std::vector<std::string> k_seeds = {
    "cpu", "auto", "cpu:threads=2", "vulkan:1", "opencl:platform=0,device=0", "vulkan;cpu",
    "gpu:id=0000:01:00.0", "a:0,k=v;b:x=y", " x ; y ", "cpu:threads=2,threads=3", "a;;b", "cpu:",
};

const char k_alphabet[] = "abcxyz019_:,;= -=AZ\t\x7f\x80\xff";

std::string random_string(std::mt19937 &rng, size_t max_len) {
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<size_t> pick(0, sizeof k_alphabet - 1);  // includes the NUL terminator
  std::string s(len(rng), ' ');
  for (char &c : s) c = k_alphabet[pick(rng)];
  return s;
}

std::string mutate(std::mt19937 &rng, std::string s) {
  std::uniform_int_distribution<int> op(0, 4), count(1, 4);
  std::uniform_int_distribution<size_t> pick(0, sizeof k_alphabet - 1);
  for (int n = count(rng); n > 0; --n) {
    size_t pos = s.empty() ? 0 : std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng);
    switch (op(rng)) {
      case 0: s.insert(s.begin() + pos, k_alphabet[pick(rng)]); break;
      case 1: if (!s.empty()) s.erase(pos, 1); break;
      case 2: if (!s.empty()) s[pos] = k_alphabet[pick(rng)]; break;
      case 3: s += s.substr(pos); break;  // duplicate a tail: long lists, repeated keys
      default: s.insert(pos, k_seeds[pick(rng) % k_seeds.size()]); break;
    }
  }
  return s;
}

// Prints a parse back in canonical form.
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

void check(const std::string &input, spec_parse_result (*parse)(std::string_view), bool params_only) {
  spec_parse_result r = parse(input);
  if (r.status != BP_OK) {
    ASSERT_EQ(r.status, BP_ERR_INVALID_ARGUMENT);
    ASSERT_TRUE(r.specs.empty());
    ASSERT_GE(r.column, 1u);
    ASSERT_LE(r.column, input.size() + 1);
    ASSERT_NE(r.message.find("at column " + std::to_string(r.column)), std::string::npos) << r.message;
    ASSERT_LT(r.message.size(), 600u);
    return;
  }
  ASSERT_TRUE(r.message.empty());
  ASSERT_FALSE(r.specs.empty());
  ASSERT_LE(input.size(), k_spec_max_bytes);
  for (const parsed_spec &spec : r.specs) {
    if (!params_only) {
      ASSERT_TRUE(is_valid_identifier(spec.name)) << input;
    }
    ASSERT_LE(spec.params.size(), k_spec_max_params);
    std::set<std::string> keys;
    for (const spec_param &p : spec.params) {
      ASSERT_TRUE(is_valid_identifier(p.key)) << input;
      ASSERT_FALSE(p.value.empty()) << input;
      ASSERT_TRUE(keys.insert(p.key).second) << "duplicate key accepted: " << input;
      for (unsigned char c : p.value) ASSERT_TRUE(c > 0x20 && c < 0x7f && c != ',' && c != ';') << input;
    }
  }
  if (!params_only) {
    spec_parse_result again = parse(print(r));
    ASSERT_EQ(again.status, BP_OK) << input << " -> " << print(r) << ": " << again.message;
    ASSERT_EQ(print(again), print(r));
  }
}

TEST(SpecFuzz, HundredThousandStringsNeverCrashAndAlwaysExplain) {
  std::mt19937 rng(12345);
  size_t accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    std::string input;
    switch (i % 4) {
      case 0: input = random_string(rng, 40); break;
      case 1: input = mutate(rng, k_seeds[i % k_seeds.size()]); break;
      case 2: input = mutate(rng, mutate(rng, k_seeds[(i / 4) % k_seeds.size()])); break;
      default: input = random_string(rng, i % 97 == 0 ? 1100 : 12); break;
    }
    check(input, parse_spec_list, false);
    check(input, parse_spec, false);
    check(input, parse_spec_params, true);
    if (HasFatalFailure()) return;
    accepted += parse_spec_list(input).status == BP_OK;
  }
  // The generator must reach the accepting paths too, or the test proves little.
  EXPECT_GT(accepted, 1000u);
}

}  // namespace
