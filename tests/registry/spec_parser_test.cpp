// spec_parser_test.cpp: table-driven tests of the pure spec grammar
// (docs/failures.md #13). The same examples appear in docs/device-spec.md.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "registry/spec_parser.hpp"

using bp::registry::parse_spec;
using bp::registry::parse_spec_list;
using bp::registry::parse_spec_params;
using bp::registry::spec_parse_result;

namespace {

// "name|key=value|key=value;name2" summary of a parse, '#' marks positional.
std::string summary(const spec_parse_result &r) {
  std::string s;
  for (size_t i = 0; i < r.specs.size(); ++i) {
    if (i) s += ";";
    s += r.specs[i].name;
    for (const auto &p : r.specs[i].params) s += "|" + std::string(p.positional ? "#" : "") + p.key + "=" + p.value;
  }
  return s;
}

struct valid_case {
  std::string input, expected;
};

const std::vector<valid_case> k_valid = {
    {"cpu", "cpu"},
    {"auto", "auto"},
    {"cpu:threads=2", "cpu|threads=2"},
    {"vulkan:1", "vulkan|#device=1"},
    {"vulkan:device=1", "vulkan|device=1"},
    {"opencl:platform=0,device=0", "opencl|platform=0|device=0"},
    {"vulkan;cpu", "vulkan;cpu"},
    {" vulkan ; cpu:threads=4 ", "vulkan;cpu|threads=4"},
    {"vulkan:0,threads=3", "vulkan|#device=0|threads=3"},
    {"gpu:id=0000:01:00.0", "gpu|id=0000:01:00.0"},
    {"gpu:id=GPU-8f3c2a10-77aa", "gpu|id=GPU-8f3c2a10-77aa"},
    {"cpu:threads=-1", "cpu|threads=-1"},
    {"cpu:label=a/b.c+d", "cpu|label=a/b.c+d"},
    {"my_plugin2:flag=true", "my_plugin2|flag=true"},
    {"x:00", "x|#device=00"},
    {"a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p", "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p"},  // 31 chars
};

TEST(SpecParser, ValidInputs) {
  for (const valid_case &c : k_valid) {
    spec_parse_result r = parse_spec_list(c.input);
    EXPECT_EQ(r.status, BP_OK) << c.input << ": " << r.message;
    EXPECT_EQ(summary(r), c.expected) << c.input;
  }
}

struct invalid_case {
  std::string input;
  size_t column;
  std::string cause;  // substring of the message
};

std::string repeat_params(int n) {
  std::string s = "cpu:";
  for (int i = 0; i < n; ++i) s += (i ? ",k" : "k") + std::to_string(i) + "=1";
  return s;
}

const std::vector<invalid_case> k_invalid = {
    {"", 1, "empty device spec"},
    {"   ", 1, "empty device spec"},
    {":", 1, "missing plugin name before ':'"},
    {":threads=2", 1, "missing plugin name"},
    {"cpu:", 5, "nothing after ':'"},
    {"cpu:,", 5, "empty parameter"},
    {"cpu:threads=2,", 15, "empty parameter"},
    {"cpu:threads=", 13, "empty value for 'threads'"},
    {"cpu:=2", 5, "missing key before '='"},
    {"cpu:threads=2,threads=3", 15, "duplicate key 'threads' ('threads' at column 5)"},
    {"cpu:1,device=2", 7, "duplicate key 'device' (a device index at column 5)"},
    {"cpu:99999999999999999999", 5, "device index '99999999999999999999' is too large"},
    {"cpu:4294967296", 5, "too large"},
    {"cpu:-1", 5, "neither a device index nor key=value"},
    {"cpu:threads", 5, "neither a device index nor key=value"},
    {"ref:verbose", 5, "give it a value, e.g. 'ref:verbose=<value>', or select a device with 'ref:0'"},
    {"cpü", 3, "non-ASCII byte 0xC3"},
    {"cpu:label=\xff", 11, "non-ASCII byte 0xFF"},
    {"cpu\t", 4, "control byte 0x09"},
    {"a;;b", 3, "empty spec in the list"},
    {"cpu;", 5, "empty spec in the list"},
    {";cpu", 1, "empty spec in the list"},
    {"CPU", 1, "plugin names are lower-case: write 'cpu'"},
    {"cpu:Threads=2", 5, "keys are lower-case: write 'threads'"},
    {"vul-kan", 4, "unexpected '-' in plugin name"},
    {"cpu: threads=2", 5, "unexpected space in key"},
    {"cpu:threads=2 ,x=1", 14, "unexpected space in the value of 'threads'"},
    {"cpu:a=b=c", 8, "unexpected '=' in the value of 'a'"},
    {"a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_", 32, "longer than 31"},
    {std::string(2048, 'a'), 1025, "longer than 1024 bytes (2048)"},
    {repeat_params(100), repeat_params(100).find(",k64=") + 2, "more than 64 parameters"},
};

TEST(SpecParser, InvalidInputsNameColumnAndCause) {
  for (const invalid_case &c : k_invalid) {
    spec_parse_result r = parse_spec_list(c.input);
    const std::string label = c.input.size() > 60 ? c.input.substr(0, 60) + "..." : c.input;
    EXPECT_EQ(r.status, BP_ERR_INVALID_ARGUMENT) << label;
    EXPECT_TRUE(r.specs.empty()) << label;
    EXPECT_EQ(r.column, c.column) << label << ": " << r.message;
    EXPECT_NE(r.message.find("at column " + std::to_string(c.column)), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.cause), std::string::npos) << label << ": " << r.message;
    EXPECT_NE(r.message.find("bad device spec \""), std::string::npos) << r.message;
  }
}

TEST(SpecParser, ExactlySixtyFourParamsAreAccepted) {
  spec_parse_result r = parse_spec_list(repeat_params(64));
  ASSERT_EQ(r.status, BP_OK) << r.message;
  EXPECT_EQ(r.specs.at(0).params.size(), 64u);
  EXPECT_EQ(parse_spec_list(repeat_params(65)).status, BP_ERR_INVALID_ARGUMENT);
}

TEST(SpecParser, LengthLimitIsInclusive) {
  std::string at_limit = "cpu:label=" + std::string(1024 - 10, 'x');
  ASSERT_EQ(at_limit.size(), 1024u);
  EXPECT_EQ(parse_spec_list(at_limit).status, BP_OK);
  EXPECT_EQ(parse_spec_list(at_limit + "x").status, BP_ERR_INVALID_ARGUMENT);
}

TEST(SpecParser, EmbeddedNulIsRejectedWhenTheLengthSaysSo) {
  const std::string input("cpu\0:threads=2", 14);
  spec_parse_result r = parse_spec_list(input);
  EXPECT_EQ(r.status, BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.column, 4u);
  EXPECT_NE(r.message.find("embedded NUL"), std::string::npos) << r.message;
  // The NUL is shown escaped, never cut the message short.
  EXPECT_NE(r.message.find("cpu\\x00:threads=2"), std::string::npos) << r.message;
}

TEST(SpecParser, LongInputIsShortenedInTheMessage) {
  spec_parse_result r = parse_spec_list(std::string(2048, 'a'));
  EXPECT_LT(r.message.size(), 300u);
  EXPECT_NE(r.message.find("2048 bytes, first 80 shown"), std::string::npos) << r.message;
}

TEST(SpecParser, ColumnsCountFromTheStartOfTheList) {
  spec_parse_result r = parse_spec_list("cpu;vulkan:x=");
  EXPECT_EQ(r.column, 14u) << r.message;
  r = parse_spec_list("cpu;vulkan:0,device=1");
  EXPECT_EQ(r.column, 14u) << r.message;
  r = parse_spec_list("cpu:threads=2;blas:threads=1");
  ASSERT_EQ(r.status, BP_OK);
  EXPECT_EQ(r.specs[1].column, 15u);
  EXPECT_EQ(r.specs[1].params[0].column, 20u);
}

TEST(SpecParser, SingleSpecRefusesALists) {
  spec_parse_result r = parse_spec("vulkan;cpu");
  EXPECT_EQ(r.status, BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.column, 7u);
  EXPECT_NE(r.message.find("bp_backend_new_list"), std::string::npos) << r.message;
  EXPECT_EQ(parse_spec("cpu:threads=2").status, BP_OK);
}

TEST(SpecParser, ParamsOnly) {
  spec_parse_result r = parse_spec_params("");
  ASSERT_EQ(r.status, BP_OK);
  ASSERT_EQ(r.specs.size(), 1u);
  EXPECT_TRUE(r.specs[0].params.empty());
  r = parse_spec_params("threads=2,flavor=3");
  ASSERT_EQ(r.status, BP_OK);
  EXPECT_EQ(r.specs[0].params.size(), 2u);
  r = parse_spec_params(",");
  EXPECT_EQ(r.status, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("bad backend params \",\" at column 1"), std::string::npos) << r.message;
  EXPECT_EQ(parse_spec_params("a=1;b=2").status, BP_ERR_INVALID_ARGUMENT);  // ';' is not a value byte here
}

TEST(SpecParser, IntegerParsing) {
  int64_t v = 0;
  EXPECT_TRUE(bp::registry::parse_int64("9223372036854775807", &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_TRUE(bp::registry::parse_int64("-9223372036854775808", &v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_FALSE(bp::registry::parse_int64("9223372036854775808", &v));
  EXPECT_FALSE(bp::registry::parse_int64("-9223372036854775809", &v));
  EXPECT_FALSE(bp::registry::parse_int64("", &v));
  EXPECT_FALSE(bp::registry::parse_int64("-", &v));
  EXPECT_FALSE(bp::registry::parse_int64("1x", &v));
  EXPECT_TRUE(bp::registry::parse_int64("+7", &v));
  EXPECT_EQ(v, 7);
}

}  // namespace
