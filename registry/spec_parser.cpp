// spec_parser.cpp: the device spec grammar, syntax and limits only.
//
// Pure: no registry, no logging, no globals, so tests compile this file
// directly and the fuzzer can throw anything at it. Every rejection names the
// input, the 1-based byte column, the cause and the fix.
#include "registry/spec_parser.hpp"

#include <cstdio>
#include <limits>

namespace bp::registry {
namespace {

enum class parse_mode { list, single, params_only };

// Collects the first error; later ones are ignored.
struct parser {
  std::string_view input;
  parse_mode mode;
  spec_parse_result result;

  bool failed() const { return result.status != BP_OK; }

  // |offset| is 0-based into |input|.
  bool fail(size_t offset, const std::string &cause) {
    if (failed()) return false;
    result.status = BP_ERR_INVALID_ARGUMENT;
    result.column = offset + 1;
    const char *what = mode == parse_mode::params_only ? "backend params" : "device spec";
    result.message = std::string("bad ") + what + " " + quote_for_message(input) + " at column " +
                     std::to_string(offset + 1) + ": " + cause;
    result.specs.clear();
    return false;
  }

  bool check_bytes();
  bool check_identifier(std::string_view s, size_t offset, const char *what);
  bool parse_params(std::string_view text, size_t offset, parsed_spec &spec);
  bool parse_one(std::string_view text, size_t offset);
};

bool is_ident_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string describe_char(char c) {
  if (c == ' ') return "space";
  char buf[16];
  std::snprintf(buf, sizeof buf, "'%c'", c);
  return buf;
}

// Whole-input checks first, so later code sees printable ASCII only.
bool parser::check_bytes() {
  if (input.size() > k_spec_max_bytes)
    return fail(k_spec_max_bytes, "longer than " + std::to_string(k_spec_max_bytes) + " bytes (" +
                                      std::to_string(input.size()) + "); shorten it");
  for (size_t i = 0; i < input.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(input[i]);
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", c);
    if (c == 0) return fail(i, "embedded NUL byte; the string ends early or was built wrongly");
    if (c >= 0x80) return fail(i, std::string("non-ASCII byte ") + hex + "; specs are plain ASCII");
    if (c < 0x20 || c == 0x7f) return fail(i, std::string("control byte ") + hex + "; specs are printable ASCII");
  }
  return true;
}

bool parser::check_identifier(std::string_view s, size_t offset, const char *what) {
  if (s.empty()) return fail(offset, std::string("empty ") + what);
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (is_ident_char(c)) continue;
    if (c >= 'A' && c <= 'Z')
      return fail(offset + i, std::string(what) + "s are lower-case: write '" +
                                  [&] {
                                    std::string low(s);
                                    for (char &ch : low)
                                      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
                                    return low;
                                  }() +
                                  "'");
    return fail(offset + i, "unexpected " + describe_char(c) + " in " + what + "; a " + what +
                                " is [a-z0-9_]+");
  }
  if (s.size() > k_spec_max_name)
    return fail(offset + k_spec_max_name, std::string(what) + " longer than " + std::to_string(k_spec_max_name) +
                                              " characters");
  return true;
}

bool parser::parse_params(std::string_view text, size_t offset, parsed_spec &spec) {
  if (text.empty())
    return fail(offset, mode == parse_mode::params_only
                            ? "empty parameter list"
                            : "nothing after ':'; remove the ':' or add parameters, e.g. 'cpu:threads=2'");
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    size_t item_off = offset + pos;
    if (item.empty())
      return fail(item_off, "empty parameter (two ',' in a row, or a ',' at an end); remove the extra ','");
    if (spec.params.size() == k_spec_max_params)
      return fail(item_off, "more than " + std::to_string(k_spec_max_params) + " parameters");

    spec_param param;
    param.column = item_off + 1;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      // A bare integer selects the device by index.
      for (size_t i = 0; i < item.size(); ++i)
        if (!is_digit(item[i])) {
          // Suggest with the spec's own plugin and key: a bare key is most
          // likely a parameter missing its value ('ref:verbose').
          const std::string plugin = spec.name.empty() ? std::string("cpu") : spec.name;
          const bool key_like = is_valid_identifier(item);
          return fail(item_off + i, "'" + std::string(item) + "' is neither a device index nor key=value; " +
                                        (key_like ? "give it a value, e.g. '" + plugin + ":" + std::string(item) +
                                                        "=<value>', or select a device with '" + plugin + ":0'"
                                                  : "write e.g. '" + plugin + ":0' or '" + plugin + ":threads=2'"));
        }
      int64_t v = 0;
      if (!parse_int64(item, &v) || v > std::numeric_limits<uint32_t>::max())
        return fail(item_off, "device index '" + std::string(item) + "' is too large");
      param.key = "device";
      param.value = std::string(item);
      param.positional = true;
    } else {
      std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
      if (key.empty()) return fail(item_off, "missing key before '='; write key=value, e.g. threads=2");
      if (!check_identifier(key, item_off, "key")) return false;
      if (value.empty())
        return fail(item_off + eq + 1, "empty value for '" + std::string(key) + "'; write " + std::string(key) +
                                           "=VALUE");
      for (size_t i = 0; i < value.size(); ++i) {
        char c = value[i];
        if (c == ' ' || c == '=' || c == ';')
          return fail(item_off + eq + 1 + i, "unexpected " + describe_char(c) + " in the value of '" +
                                                 std::string(key) + "'");
      }
      param.key = std::string(key);
      param.value = std::string(value);
    }
    if (const spec_param *prev = spec.find(param.key)) {
      std::string first = prev->positional ? "a device index" : "'" + prev->key + "'";
      return fail(item_off, "duplicate key '" + param.key + "' (" + first + " at column " +
                                std::to_string(prev->column) + "); give each key once");
    }
    spec.params.push_back(std::move(param));
    if (comma == std::string_view::npos) return true;
    pos = comma + 1;
  }
}

bool parser::parse_one(std::string_view text, size_t offset) {
  parsed_spec spec;
  spec.column = offset + 1;
  spec.text = std::string(text);
  size_t colon = text.find(':');
  std::string_view name = text.substr(0, colon);
  if (name.empty())
    return fail(offset, colon == std::string_view::npos
                            ? "empty spec; write a plugin name such as 'cpu' or 'auto'"
                            : "missing plugin name before ':'; write e.g. 'cpu:threads=2'");
  if (!check_identifier(name, offset, "plugin name")) return false;
  spec.name = std::string(name);
  if (colon != std::string_view::npos && !parse_params(text.substr(colon + 1), offset + colon + 1, spec))
    return false;
  result.specs.push_back(std::move(spec));
  return true;
}

spec_parse_result run(std::string_view input, parse_mode mode) {
  parser p{input, mode, {}};
  if (!p.check_bytes()) return std::move(p.result);
  if (mode == parse_mode::params_only) {
    parsed_spec spec;
    spec.column = 1;
    spec.text = std::string(input);
    if (!input.empty() && !p.parse_params(input, 0, spec)) return std::move(p.result);
    p.result.specs.push_back(std::move(spec));
    return std::move(p.result);
  }
  size_t pos = 0;
  while (true) {
    size_t semi = input.find(';', pos);
    if (semi != std::string_view::npos && mode == parse_mode::single) {
      p.fail(semi, "a ';' list names several devices; use bp_backend_new_list for lists");
      return std::move(p.result);
    }
    size_t end = semi == std::string_view::npos ? input.size() : semi;
    // Spaces around list elements are forgiven ("vulkan; cpu").
    size_t b = pos, e = end;
    while (b < e && input[b] == ' ') ++b;
    while (e > b && input[e - 1] == ' ') --e;
    if (b == e) {
      if (input.find_first_not_of(' ') == std::string_view::npos)
        p.fail(0, "empty device spec; write a plugin name such as 'cpu' or 'auto'");
      else
        p.fail(b, "empty spec in the list (';' at an end or ';;'); remove the extra ';'");
      return std::move(p.result);
    }
    if (!p.parse_one(input.substr(b, e - b), b)) return std::move(p.result);
    if (semi == std::string_view::npos) break;
    pos = semi + 1;
  }
  return std::move(p.result);
}

}  // namespace

const spec_param *parsed_spec::find(std::string_view key) const {
  for (const spec_param &p : params)
    if (p.key == key) return &p;
  return nullptr;
}

spec_parse_result parse_spec_list(std::string_view input) { return run(input, parse_mode::list); }
spec_parse_result parse_spec(std::string_view input) { return run(input, parse_mode::single); }
spec_parse_result parse_spec_params(std::string_view input) { return run(input, parse_mode::params_only); }

bool is_valid_identifier(std::string_view s) {
  if (s.empty() || s.size() > k_spec_max_name) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

bool parse_int64(std::string_view s, int64_t *out) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return false;
  // Accumulate as a negative number so INT64_MIN fits.
  int64_t v = 0;
  const int64_t lo = std::numeric_limits<int64_t>::min();
  for (; i < s.size(); ++i) {
    if (!is_digit(s[i])) return false;
    int d = s[i] - '0';
    if (v < lo / 10 || v * 10 < lo + d) return false;
    v = v * 10 - d;
  }
  if (!negative) {
    if (v == lo) return false;
    v = -v;
  }
  *out = v;
  return true;
}

std::string quote_for_message(std::string_view input) {
  constexpr size_t k_show = 80;
  std::string out = "\"";
  for (size_t i = 0; i < input.size() && i < k_show; ++i) {
    unsigned char c = static_cast<unsigned char>(input[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "\"";
  if (input.size() > k_show) out += " (" + std::to_string(input.size()) + " bytes, first " + std::to_string(k_show) + " shown)";
  return out;
}

}  // namespace bp::registry
