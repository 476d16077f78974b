// chat_template.cpp: the Jinja-subset interpreter (chat_template.hpp): a
// scanner that cuts the source into text and tags, a recursive-descent
// parser for the tags' expressions and statements, and a tree walker whose
// values are JSON values plus "undefined" (what a missing key gives).
#include "chat_template.hpp"

#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

namespace bp::server {
namespace {

using json = nlohmann::json;

[[noreturn]] void unsupported(const std::string &what) {
  throw template_error("the chat template uses " + what +
                       ", which bp-server's template interpreter does not support (docs/server.md, \"Chat "
                       "templates\"; --chat-template overrides the file's)");
}

// ---- values -----------------------------------------------------------------

struct value {
  bool undefined = false;
  json j;
  static value undef() {
    value v;
    v.undefined = true;
    return v;
  }
  value() = default;
  value(json x) : j(std::move(x)) {}  // NOLINT: a JSON value is a value
};

bool truthy(const value &v) {
  if (v.undefined || v.j.is_null()) return false;
  if (v.j.is_boolean()) return v.j.get<bool>();
  if (v.j.is_number_integer()) return v.j.get<int64_t>() != 0;
  if (v.j.is_number()) return v.j.get<double>() != 0.0;
  if (v.j.is_string()) return !v.j.get_ref<const std::string &>().empty();
  return !v.j.empty();
}

// Python's json.dumps (", " and ": " separators, non-ASCII kept), which is
// what the templates' tojson gives under transformers.
std::string py_json(const json &j) {
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + py_json(j[i]);
    return s + "]";
  }
  if (j.is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto &[k, x] : j.items()) {
      s += (first ? "" : ", ") + json(k).dump() + ": " + py_json(x);
      first = false;
    }
    return s + "}";
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// How {{ }} prints a value: Python's str().
std::string str(const value &v) {
  if (v.undefined) return "";
  const json &j = v.j;
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "None";
  if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
  return py_json(j);
}

std::string type_name(const value &v) { return v.undefined ? "undefined" : v.j.type_name(); }

std::string trim(const std::string &s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// ---- expression tokens ----------------------------------------------------

enum class tk { name, str, num, op, end };
struct token {
  tk kind;
  std::string text;
  json num;
};

std::vector<token> lex(const std::string &s) {
  std::vector<token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = i;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      out.push_back({tk::name, s.substr(i, e - i), {}});
      i = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t e = i;
      bool real = false;
      while (e < s.size() && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '.')) real |= s[e++] == '.';
      const std::string t = s.substr(i, e - i);
      out.push_back({tk::num, t, real ? json(std::stod(t)) : json(std::stoll(t))});
      i = e;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t e = i + 1;
      for (; e < s.size() && s[e] != c; ++e) {
        if (s[e] == '\\' && e + 1 < s.size()) {
          const char x = s[++e];
          v += x == 'n' ? '\n' : x == 't' ? '\t' : x == 'r' ? '\r' : x;
        } else {
          v += s[e];
        }
      }
      if (e >= s.size()) throw template_error("the chat template has an unterminated string");
      out.push_back({tk::str, v, {}});
      i = e + 1;
    } else {
      static const char *two[] = {"==", "!=", "<=", ">=", "//", "**"};
      std::string op(1, c);
      for (const char *t : two)
        if (s.compare(i, 2, t) == 0) op = t;
      if (op == "**") unsupported("the operator **");
      if (std::string("+-*/%~()[]{}<>,.:|=").find(c) == std::string::npos && op.size() == 1)
        unsupported(std::string("the character '") + c + "'");
      out.push_back({tk::op, op, {}});
      i += op.size();
    }
  }
  out.push_back({tk::end, "", {}});
  return out;
}

// ---- expressions --------------------------------------------------------------

struct scope;
struct expr {
  virtual ~expr() = default;
  virtual value eval(scope &sc) const = 0;
};
using expr_ptr = std::unique_ptr<expr>;

// Variables: the for loops' scopes, innermost last, over the globals.
struct scope {
  const json *globals;
  std::vector<std::map<std::string, value>> frames;
  value lookup(const std::string &name) const {
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      auto it = f->find(name);
      if (it != f->end()) return it->second;
    }
    if (globals->contains(name)) return value((*globals)[name]);
    return value::undef();
  }
};

struct literal : expr {
  value v;
  explicit literal(value x) : v(std::move(x)) {}
  value eval(scope &) const override { return v; }
};

struct name_ref : expr {
  std::string name;
  explicit name_ref(std::string n) : name(std::move(n)) {}
  value eval(scope &sc) const override { return sc.lookup(name); }
};

value index(const value &base, const value &key) {
  if (base.undefined || key.undefined) return value::undef();
  const json &b = base.j;
  if (b.is_object() && key.j.is_string()) {
    auto it = b.find(key.j.get<std::string>());
    return it == b.end() ? value::undef() : value(*it);
  }
  if ((b.is_array() || b.is_string()) && key.j.is_number_integer()) {
    const int64_t n =
        b.is_array() ? static_cast<int64_t>(b.size()) : static_cast<int64_t>(b.get_ref<const std::string &>().size());
    int64_t i = key.j.get<int64_t>();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return value::undef();
    if (b.is_array()) return value(b[static_cast<size_t>(i)]);
    return value(std::string(1, b.get_ref<const std::string &>()[static_cast<size_t>(i)]));
  }
  return value::undef();
}

struct attr : expr {
  expr_ptr base;
  std::string name;
  attr(expr_ptr b, std::string n) : base(std::move(b)), name(std::move(n)) {}
  value eval(scope &sc) const override { return index(base->eval(sc), value(json(name))); }
};

struct subscript : expr {
  expr_ptr base, key;
  subscript(expr_ptr b, expr_ptr k) : base(std::move(b)), key(std::move(k)) {}
  value eval(scope &sc) const override { return index(base->eval(sc), key->eval(sc)); }
};

struct slice : expr {
  expr_ptr base, lo, hi;  // lo/hi may be null
  value eval(scope &sc) const override {
    const value b = base->eval(sc);
    if (b.undefined) return b;
    if (!b.j.is_array() && !b.j.is_string()) throw template_error("cannot slice a " + type_name(b));
    const int64_t n = b.j.is_array() ? static_cast<int64_t>(b.j.size())
                                     : static_cast<int64_t>(b.j.get_ref<const std::string &>().size());
    auto bound = [&](const expr_ptr &e, int64_t dflt) {
      if (!e) return dflt;
      const value v = e->eval(sc);
      if (!v.j.is_number_integer()) throw template_error("a slice bound must be an integer");
      int64_t x = v.j.get<int64_t>();
      if (x < 0) x += n;
      return std::max<int64_t>(0, std::min(n, x));
    };
    const int64_t l = bound(lo, 0), h = std::max(l, bound(hi, n));
    if (b.j.is_string())
      return value(b.j.get<std::string>().substr(static_cast<size_t>(l), static_cast<size_t>(h - l)));
    json out = json::array();
    for (int64_t i = l; i < h; ++i) out.push_back(b.j[static_cast<size_t>(i)]);
    return value(out);
  }
};

struct list_expr : expr {
  std::vector<expr_ptr> items;
  value eval(scope &sc) const override {
    json out = json::array();
    for (const auto &e : items) out.push_back(e->eval(sc).j);
    return value(out);
  }
};

struct dict_expr : expr {
  std::vector<std::pair<expr_ptr, expr_ptr>> items;
  value eval(scope &sc) const override {
    json out = json::object();
    for (const auto &[k, v] : items) out[str(k->eval(sc))] = v->eval(sc).j;
    return value(out);
  }
};

double num(const value &v, const std::string &op) {
  if (!v.undefined && v.j.is_number()) return v.j.get<double>();
  throw template_error("the chat template applies '" + op + "' to a " + type_name(v));
}

value arith(const std::string &op, const value &a, const value &b) {
  if (op == "~") return value(str(a) + str(b));
  if (op == "+") {
    if (a.j.is_string() || b.j.is_string()) {
      // Jinja refuses a string plus a number; an undefined side reads as "".
      if ((a.j.is_string() || a.undefined) && (b.j.is_string() || b.undefined)) return value(str(a) + str(b));
      throw template_error("the chat template adds a " + type_name(a) + " and a " + type_name(b));
    }
    if (a.j.is_array() && b.j.is_array()) {
      json out = a.j;
      for (const auto &x : b.j) out.push_back(x);
      return value(out);
    }
  }
  const bool ints = a.j.is_number_integer() && b.j.is_number_integer();
  const double x = num(a, op), y = num(b, op);
  if (op == "+") return ints ? value(a.j.get<int64_t>() + b.j.get<int64_t>()) : value(x + y);
  if (op == "-") return ints ? value(a.j.get<int64_t>() - b.j.get<int64_t>()) : value(x - y);
  if (op == "*") return ints ? value(a.j.get<int64_t>() * b.j.get<int64_t>()) : value(x * y);
  if (y == 0) throw template_error("the chat template divides by zero");
  if (op == "/") return value(x / y);
  if (op == "//") return ints ? value(static_cast<int64_t>(std::floor(x / y))) : value(std::floor(x / y));
  // Python's %: the sign of the divisor.
  if (ints) {
    const int64_t p = a.j.get<int64_t>(), q = b.j.get<int64_t>();
    return value(((p % q) + q) % q);
  }
  return value(x - y * std::floor(x / y));
}

bool equal(const value &a, const value &b) {
  if (a.undefined || b.undefined) return a.undefined && b.undefined;
  return a.j == b.j;
}

bool contains(const value &hay, const value &needle) {
  if (hay.j.is_string() && needle.j.is_string())
    return hay.j.get<std::string>().find(needle.j.get<std::string>()) != std::string::npos;
  if (hay.j.is_array()) {
    for (const auto &x : hay.j)
      if (x == needle.j) return true;
    return false;
  }
  if (hay.j.is_object() && needle.j.is_string()) return hay.j.contains(needle.j.get<std::string>());
  if (hay.undefined) return false;
  throw template_error("the chat template tests 'in' on a " + type_name(hay));
}

struct binary : expr {
  std::string op;
  expr_ptr a, b;
  binary(std::string o, expr_ptr x, expr_ptr y) : op(std::move(o)), a(std::move(x)), b(std::move(y)) {}
  value eval(scope &sc) const override {
    if (op == "and") {
      value x = a->eval(sc);
      return truthy(x) ? b->eval(sc) : x;
    }
    if (op == "or") {
      value x = a->eval(sc);
      return truthy(x) ? x : b->eval(sc);
    }
    const value x = a->eval(sc), y = b->eval(sc);
    if (op == "==") return value(equal(x, y));
    if (op == "!=") return value(!equal(x, y));
    if (op == "in") return value(contains(y, x));
    if (op == "not in") return value(!contains(y, x));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (x.j.is_string() && y.j.is_string())
        c = x.j.get<std::string>().compare(y.j.get<std::string>());
      else {
        const double p = num(x, op), q = num(y, op);
        c = p < q ? -1 : p > q ? 1 : 0;
      }
      return value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    return arith(op, x, y);
  }
};

struct unary : expr {
  std::string op;
  expr_ptr a;
  unary(std::string o, expr_ptr x) : op(std::move(o)), a(std::move(x)) {}
  value eval(scope &sc) const override {
    const value x = a->eval(sc);
    if (op == "not") return value(!truthy(x));
    if (x.j.is_number_integer()) return value(-x.j.get<int64_t>());
    return value(-num(x, "-"));
  }
};

struct conditional : expr {
  expr_ptr then, cond, otherwise;  // otherwise may be null (undefined)
  value eval(scope &sc) const override {
    if (truthy(cond->eval(sc))) return then->eval(sc);
    return otherwise ? otherwise->eval(sc) : value::undef();
  }
};

struct test_expr : expr {
  expr_ptr a;
  std::string test;
  bool negate;
  test_expr(expr_ptr x, std::string t, bool n) : a(std::move(x)), test(std::move(t)), negate(n) {}
  value eval(scope &sc) const override {
    const value x = a->eval(sc);
    bool r;
    if (test == "defined")
      r = !x.undefined;
    else if (test == "undefined")
      r = x.undefined;
    else if (test == "none")
      r = !x.undefined && x.j.is_null();
    else if (test == "string")
      r = !x.undefined && x.j.is_string();
    else if (test == "number")
      r = !x.undefined && x.j.is_number();
    else if (test == "integer")
      r = !x.undefined && x.j.is_number_integer();
    else if (test == "boolean")
      r = !x.undefined && x.j.is_boolean();
    else if (test == "mapping")
      r = !x.undefined && x.j.is_object();
    else if (test == "sequence" || test == "iterable")
      r = !x.undefined && (x.j.is_array() || x.j.is_string() || (test == "iterable" && x.j.is_object()));
    else if (test == "true")
      r = !x.undefined && x.j.is_boolean() && x.j.get<bool>();
    else if (test == "false")
      r = !x.undefined && x.j.is_boolean() && !x.j.get<bool>();
    else
      unsupported("the test 'is " + test + "'");
    return value(r != negate);
  }
};

// A filter or a method: |name(args) or .name(args) on |x|.
value apply(const std::string &name, const value &x, const std::vector<value> &args, bool method) {
  auto need_string = [&] {
    if (!x.j.is_string()) throw template_error("the chat template applies " + name + " to a " + type_name(x));
    return x.j.get<std::string>();
  };
  if (name == "trim" || name == "strip") {
    if (!args.empty()) unsupported(name + " with an argument");
    return value(trim(need_string()));
  }
  if (method && (name == "startswith" || name == "endswith")) {
    if (args.size() != 1 || !args[0].j.is_string()) throw template_error(name + " takes one string");
    const std::string s = need_string(), t = args[0].j.get<std::string>();
    const bool r = t.size() <= s.size() && (name == "startswith" ? s.compare(0, t.size(), t) == 0
                                                                 : s.compare(s.size() - t.size(), t.size(), t) == 0);
    return value(r);
  }
  if (method && (name == "upper" || name == "lower")) {
    std::string s = need_string();
    for (char &c : s)
      c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                            : std::tolower(static_cast<unsigned char>(c)));
    return value(s);
  }
  if (method) unsupported("the method ." + name + "()");
  if (name == "upper" || name == "lower") return apply(name, x, args, true);
  if (name == "tojson") return value(py_json(x.j));
  if (name == "string") return value(str(x));
  if (name == "length" || name == "count") {
    if (x.j.is_string()) return value(static_cast<int64_t>(x.j.get_ref<const std::string &>().size()));
    if (x.j.is_array() || x.j.is_object()) return value(static_cast<int64_t>(x.j.size()));
    throw template_error("the chat template takes the length of a " + type_name(x));
  }
  if (name == "default" || name == "d") {
    if (args.empty()) throw template_error("default takes a value");
    return x.undefined ? args[0] : x;
  }
  if (name == "first" || name == "last") {
    if (!x.j.is_array() || x.j.empty()) return value::undef();
    return value(name == "first" ? x.j.front() : x.j.back());
  }
  if (name == "join") {
    if (!x.j.is_array()) throw template_error("join applies to a list");
    std::string sep = args.empty() ? "" : str(args[0]), out;
    for (size_t i = 0; i < x.j.size(); ++i) out += (i ? sep : "") + str(value(x.j[i]));
    return value(out);
  }
  unsupported("the filter '" + name + "'");
}

struct filter_expr : expr {
  expr_ptr a;
  std::string name;
  std::vector<expr_ptr> args;
  bool method = false;
  value eval(scope &sc) const override {
    std::vector<value> v;
    for (const auto &e : args) v.push_back(e->eval(sc));
    return apply(name, a->eval(sc), v, method);
  }
};

struct raise_expr : expr {
  expr_ptr message;
  value eval(scope &sc) const override { throw template_error(str(message->eval(sc))); }
};

// ---- parser -------------------------------------------------------------------

class parser {
 public:
  explicit parser(std::vector<token> t) : t_(std::move(t)) {}
  const token &peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool is(const std::string &s, size_t k = 0) const {
    return (peek(k).kind == tk::op || peek(k).kind == tk::name) && peek(k).text == s;
  }
  bool accept(const std::string &s) {
    if (!is(s)) return false;
    ++p_;
    return true;
  }
  void expect(const std::string &s) {
    if (!accept(s)) throw template_error("the chat template expects '" + s + "' but has '" + peek().text + "'");
  }
  std::string name() {
    if (peek().kind != tk::name) throw template_error("the chat template expects a name but has '" + peek().text + "'");
    return t_[p_++].text;
  }
  bool done() const { return peek().kind == tk::end; }

  expr_ptr expression() {
    expr_ptr e = or_expr();
    if (is("if")) {  // x if c else y
      ++p_;
      auto c = std::make_unique<conditional>();
      c->then = std::move(e);
      c->cond = or_expr();
      if (accept("else")) c->otherwise = expression();
      return c;
    }
    return e;
  }

 private:
  expr_ptr or_expr() {
    expr_ptr e = and_expr();
    while (accept("or")) e = std::make_unique<binary>("or", std::move(e), and_expr());
    return e;
  }
  expr_ptr and_expr() {
    expr_ptr e = not_expr();
    while (accept("and")) e = std::make_unique<binary>("and", std::move(e), not_expr());
    return e;
  }
  expr_ptr not_expr() {
    if (accept("not")) return std::make_unique<unary>("not", not_expr());
    return compare();
  }
  expr_ptr compare() {
    expr_ptr e = concat();
    for (;;) {
      if (peek().kind == tk::op && (is("==") || is("!=") || is("<") || is(">") || is("<=") || is(">="))) {
        const std::string op = t_[p_++].text;
        e = std::make_unique<binary>(op, std::move(e), concat());
      } else if (is("in")) {
        ++p_;
        e = std::make_unique<binary>("in", std::move(e), concat());
      } else if (is("not") && is("in", 1)) {
        p_ += 2;
        e = std::make_unique<binary>("not in", std::move(e), concat());
      } else if (is("is")) {
        ++p_;
        const bool negate = accept("not");
        // "none" and the booleans are names in the token stream too.
        std::string t = name();
        for (char &c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (is("(")) unsupported("a test with arguments ('is " + t + "(...)')");
        e = std::make_unique<test_expr>(std::move(e), t, negate);
      } else {
        return e;
      }
    }
  }
  expr_ptr concat() {
    expr_ptr e = additive();
    while (peek().kind == tk::op && is("~")) {
      ++p_;
      e = std::make_unique<binary>("~", std::move(e), additive());
    }
    return e;
  }
  expr_ptr additive() {
    expr_ptr e = multiplicative();
    while (peek().kind == tk::op && (is("+") || is("-"))) {
      const std::string op = t_[p_++].text;
      e = std::make_unique<binary>(op, std::move(e), multiplicative());
    }
    return e;
  }
  expr_ptr multiplicative() {
    expr_ptr e = unary_expr();
    while (peek().kind == tk::op && (is("*") || is("/") || is("//") || is("%"))) {
      const std::string op = t_[p_++].text;
      e = std::make_unique<binary>(op, std::move(e), unary_expr());
    }
    return e;
  }
  expr_ptr unary_expr() {
    if (peek().kind == tk::op && accept("-")) return std::make_unique<unary>("-", unary_expr());
    if (peek().kind == tk::op && accept("+")) return unary_expr();
    return filtered();
  }
  std::vector<expr_ptr> call_args() {  // after '('
    std::vector<expr_ptr> args;
    if (accept(")")) return args;
    do {
      if (peek().kind == tk::name && is("=", 1)) unsupported("keyword arguments ('" + peek().text + "=')");
      args.push_back(expression());
    } while (accept(","));
    expect(")");
    return args;
  }
  expr_ptr filtered() {
    expr_ptr e = postfix();
    while (peek().kind == tk::op && accept("|")) {
      auto f = std::make_unique<filter_expr>();
      f->a = std::move(e);
      f->name = name();
      if (accept("(")) f->args = call_args();
      e = std::move(f);
    }
    return e;
  }
  expr_ptr postfix() {
    expr_ptr e = primary();
    for (;;) {
      if (peek().kind == tk::op && accept(".")) {
        std::string n = name();
        if (accept("(")) {
          auto f = std::make_unique<filter_expr>();
          f->a = std::move(e);
          f->name = n;
          f->method = true;
          f->args = call_args();
          e = std::move(f);
        } else {
          e = std::make_unique<attr>(std::move(e), n);
        }
      } else if (peek().kind == tk::op && accept("[")) {
        expr_ptr lo, hi;
        if (!is(":")) lo = expression();
        if (accept(":")) {
          if (!is("]")) hi = expression();
          if (is(":")) unsupported("a slice with a step");
          expect("]");
          auto s = std::make_unique<slice>();
          s->base = std::move(e);
          s->lo = std::move(lo);
          s->hi = std::move(hi);
          e = std::move(s);
        } else {
          expect("]");
          e = std::make_unique<subscript>(std::move(e), std::move(lo));
        }
      } else if (peek().kind == tk::op && is("(")) {
        unsupported("a call of an expression");
      } else {
        return e;
      }
    }
  }
  expr_ptr primary() {
    const token t = peek();
    ++p_;
    if (t.kind == tk::str) {
      // Adjacent literals join, as in Python.
      std::string s = t.text;
      while (peek().kind == tk::str) s += t_[p_++].text;
      return std::make_unique<literal>(value(s));
    }
    if (t.kind == tk::num) return std::make_unique<literal>(value(t.num));
    if (t.kind == tk::name) {
      if (t.text == "true" || t.text == "True") return std::make_unique<literal>(value(true));
      if (t.text == "false" || t.text == "False") return std::make_unique<literal>(value(false));
      if (t.text == "none" || t.text == "None") return std::make_unique<literal>(value(nullptr));
      if (is("(")) {
        ++p_;
        if (t.text != "raise_exception") unsupported("the function '" + t.text + "()'");
        auto r = std::make_unique<raise_expr>();
        std::vector<expr_ptr> args = call_args();
        if (args.size() != 1) throw template_error("raise_exception takes one message");
        r->message = std::move(args[0]);
        return r;
      }
      return std::make_unique<name_ref>(t.text);
    }
    if (t.kind == tk::op && t.text == "(") {
      expr_ptr e = expression();
      if (is(",")) unsupported("a tuple");
      expect(")");
      return e;
    }
    if (t.kind == tk::op && t.text == "[") {
      auto l = std::make_unique<list_expr>();
      if (!accept("]")) {
        do l->items.push_back(expression());
        while (accept(","));
        expect("]");
      }
      return l;
    }
    if (t.kind == tk::op && t.text == "{") {
      auto d = std::make_unique<dict_expr>();
      if (!accept("}")) {
        do {
          expr_ptr k = expression();
          expect(":");
          d->items.emplace_back(std::move(k), expression());
        } while (accept(","));
        expect("}");
      }
      return d;
    }
    throw template_error("the chat template has an unexpected '" + t.text + "' in an expression");
  }

  std::vector<token> t_;
  size_t p_ = 0;
};

}  // namespace

// ---- statements -----------------------------------------------------------------

struct chat_template::node {
  enum kind_t { text, output, if_, for_, set, seq } kind = seq;
  std::string str;                                                   // text; for/set: the variable
  expr_ptr e;                                                        // output, set, for's iterable
  std::vector<std::pair<expr_ptr, std::unique_ptr<node>>> branches;  // if/elif (cond, body)
  std::unique_ptr<node> otherwise;                                   // else
  std::vector<std::unique_ptr<node>> children;                       // seq, for's body in children[0]

  void run(scope &sc, std::string &out) const {
    switch (kind) {
      case text:
        out += str;
        break;
      case output:
        out += bp::server::str(e->eval(sc));
        break;
      case seq:
        for (const auto &c : children) c->run(sc, out);
        break;
      case set:
        if (sc.frames.empty()) sc.frames.emplace_back();
        sc.frames.back()[str] = e->eval(sc);
        break;
      case if_:
        for (const auto &[c, body] : branches)
          if (truthy(c->eval(sc))) {
            body->run(sc, out);
            return;
          }
        if (otherwise) otherwise->run(sc, out);
        break;
      case for_: {
        const value it = e->eval(sc);
        if (it.undefined || it.j.is_null()) return;  // Jinja iterates an undefined as empty
        json items = json::array();
        if (it.j.is_array())
          items = it.j;
        else if (it.j.is_object())
          for (const auto &[k, x] : it.j.items()) items.push_back(k);
        else if (it.j.is_string())
          for (char c : it.j.get<std::string>()) items.push_back(std::string(1, c));
        else
          throw template_error("the chat template loops over a " + type_name(it));
        const int64_t n = static_cast<int64_t>(items.size());
        for (int64_t i = 0; i < n; ++i) {
          // A scope per iteration: a set inside a loop does not outlive it.
          sc.frames.emplace_back();
          sc.frames.back()[str] = value(items[static_cast<size_t>(i)]);
          sc.frames.back()["loop"] = value(json{{"index0", i},
                                                {"index", i + 1},
                                                {"first", i == 0},
                                                {"last", i == n - 1},
                                                {"length", n},
                                                {"revindex", n - i},
                                                {"revindex0", n - i - 1}});
          children[0]->run(sc, out);
          sc.frames.pop_back();
        }
        break;
      }
    }
  }
};

namespace {

using node = chat_template::node;

struct segment {
  enum { text, output, stmt } kind;
  std::string body;
};

// Cuts the source into text and tags, applying "-" whitespace control and
// Hugging Face's trim_blocks (the newline after a {% %} goes) and
// lstrip_blocks (spaces before a {% %} on its own line go).
std::vector<segment> scan(const std::string &src) {
  std::vector<segment> out;
  size_t i = 0;
  bool strip_next = false, trim_newline = false;
  while (i <= src.size()) {
    size_t open = src.find('{', i);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' &&
           src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string::npos && open + 1 >= src.size()) open = std::string::npos;
    const std::string raw = src.substr(i, open == std::string::npos ? std::string::npos : open - i);
    std::string txt = raw;
    if (trim_newline && !txt.empty() && txt[0] == '\n') txt.erase(0, 1);
    if (strip_next) {
      size_t b = 0;
      while (b < txt.size() && std::isspace(static_cast<unsigned char>(txt[b]))) ++b;
      txt.erase(0, b);
    }
    strip_next = trim_newline = false;
    if (open == std::string::npos) {
      if (!txt.empty()) out.push_back({segment::text, txt});
      break;
    }
    const char k = src[open + 1];
    const std::string close = k == '{' ? "}}" : k == '%' ? "%}" : "#}";
    const size_t end = src.find(close, open + 2);
    if (end == std::string::npos)
      throw template_error("the chat template has an unclosed tag at byte " + std::to_string(open));
    std::string inner = src.substr(open + 2, end - open - 2);
    const bool lstrip = !inner.empty() && inner[0] == '-';
    if (lstrip) {
      size_t e = txt.size();
      while (e > 0 && std::isspace(static_cast<unsigned char>(txt[e - 1]))) --e;
      txt.erase(e);
    } else if (k != '{') {
      // The tag begins its line when only spaces and tabs stand between it
      // and a newline of the raw text (or the start of the source).
      size_t e = raw.size();
      while (e > 0 && (raw[e - 1] == ' ' || raw[e - 1] == '\t')) --e;
      const bool line_start = e == 0 ? i == 0 : raw[e - 1] == '\n';
      const size_t blanks = raw.size() - e;
      if (line_start && blanks <= txt.size()) txt.erase(txt.size() - blanks);
    }
    if (!txt.empty()) out.push_back({segment::text, txt});
    if (lstrip || (!inner.empty() && inner[0] == '+')) inner.erase(0, 1);
    if (!inner.empty() && inner.back() == '-') {
      inner.pop_back();
      strip_next = true;
    } else if (!inner.empty() && inner.back() == '+') {
      inner.pop_back();
    } else if (k != '{') {
      trim_newline = true;
    }
    if (k == '{')
      out.push_back({segment::output, inner});
    else if (k == '%')
      out.push_back({segment::stmt, inner});
    i = end + 2;
  }
  return out;
}

class builder {
 public:
  explicit builder(std::vector<segment> s) : s_(std::move(s)) {}

  // Parses until one of |ends| (returned in *which) or the end of the source.
  std::unique_ptr<node> block(const std::vector<std::string> &ends, std::string *which, parser **stop) {
    auto seq = std::make_unique<node>();
    while (i_ < s_.size()) {
      const segment &sg = s_[i_++];
      if (sg.kind == segment::text) {
        auto n = std::make_unique<node>();
        n->kind = node::text;
        n->str = sg.body;
        seq->children.push_back(std::move(n));
        continue;
      }
      if (sg.kind == segment::output) {
        parser p(lex(sg.body));
        auto n = std::make_unique<node>();
        n->kind = node::output;
        n->e = p.expression();
        if (!p.done())
          throw template_error("the chat template has '" + p.peek().text + "' after an expression in {{ " +
                               trim(sg.body) + " }}");
        seq->children.push_back(std::move(n));
        continue;
      }
      parsers_.push_back(std::make_unique<parser>(lex(sg.body)));
      parser &p = *parsers_.back();
      const std::string kw = p.name();
      for (const std::string &e : ends)
        if (kw == e) {
          *which = kw;
          *stop = &p;
          return seq;
        }
      if (kw == "if") {
        seq->children.push_back(if_block(p));
      } else if (kw == "for") {
        auto n = std::make_unique<node>();
        n->kind = node::for_;
        n->str = p.name();
        if (p.is(",")) unsupported("a for loop over several names ('for a, b in ...')");
        p.expect("in");
        n->e = p.expression();
        if (!p.done()) unsupported("'" + p.peek().text + "' in a for statement (a filter or 'recursive')");
        std::string w;
        parser *q = nullptr;
        n->children.push_back(block({"endfor", "else"}, &w, &q));
        if (w == "else") unsupported("'{% else %}' in a for loop");
        if (w != "endfor") throw template_error("the chat template has a for without endfor");
        seq->children.push_back(std::move(n));
      } else if (kw == "set") {
        auto n = std::make_unique<node>();
        n->kind = node::set;
        n->str = p.name();
        if (p.is(".")) unsupported("an attribute assignment ('set " + n->str + ".x = ...'; namespace())");
        if (!p.is("=")) unsupported("a block set ('{% set " + n->str + " %}')");
        p.expect("=");
        n->e = p.expression();
        seq->children.push_back(std::move(n));
      } else {
        unsupported("the statement '{% " + kw + " %}'");
      }
      if (!p.done() && kw != "if")
        throw template_error("the chat template has '" + p.peek().text + "' after {% " + kw + " %}");
    }
    if (!ends.empty()) throw template_error("the chat template ends inside a block (a missing {% " + ends[0] + " %})");
    return seq;
  }

 private:
  std::unique_ptr<node> if_block(parser &p) {
    auto n = std::make_unique<node>();
    n->kind = node::if_;
    expr_ptr cond = p.expression();
    for (;;) {
      std::string w;
      parser *q = nullptr;
      auto body = block({"elif", "else", "endif"}, &w, &q);
      n->branches.emplace_back(std::move(cond), std::move(body));
      if (w == "elif") {
        cond = q->expression();
        continue;
      }
      if (w == "else") {
        std::string w2;
        parser *q2 = nullptr;
        n->otherwise = block({"endif"}, &w2, &q2);
      }
      return n;
    }
  }

  std::vector<segment> s_;
  size_t i_ = 0;
  std::vector<std::unique_ptr<parser>> parsers_;  // kept: a block's end statement is read by its caller
};

}  // namespace

chat_template::chat_template(const std::string &source) {
  builder b(scan(source));
  std::string w;
  parser *p = nullptr;
  root_ = b.block({}, &w, &p);
}
chat_template::~chat_template() = default;
chat_template::chat_template(chat_template &&) noexcept = default;

std::string chat_template::render(const json &vars) const {
  scope sc{&vars, {}};
  sc.frames.emplace_back();  // the template's own top-level sets
  std::string out;
  root_->run(sc, out);
  return out;
}

}  // namespace bp::server
