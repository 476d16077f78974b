// request.cpp: checks a completion request's JSON (request.hpp). OpenAI's
// defaults: temperature 1, top_p 1, no top-k or min-p filter; a field this
// server does not implement is refused by name rather than ignored, so a
// client never gets an answer that silently differs from what it asked.
#include "request.hpp"

#include <algorithm>
#include <random>
#include <set>

#include "api_error.hpp"

namespace bp::server {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string &field, const std::string &why) {
  throw api_error(400, field + ": " + why, field);
}

double number(const json &v, const std::string &field, double lo, double hi) {
  if (!v.is_number()) bad(field, "must be a number, not " + std::string(v.type_name()));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) bad(field, "must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  return x;
}

int64_t integer(const json &v, const std::string &field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(field, "must be an integer, not " + std::string(v.type_name()));
  // A large unsigned value does not fit int64_t: it is out of range either way.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(field, "must be at most " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

bool boolean(const json &v, const std::string &field) {
  if (!v.is_boolean()) bad(field, "must be true or false, not " + std::string(v.type_name()));
  return v.get<bool>();
}

std::string text(const json &v, const std::string &field) {
  if (!v.is_string()) bad(field, "must be a string, not " + std::string(v.type_name()));
  return v.get<std::string>();
}

// A message's content: a string, or OpenAI's list of parts of which only
// {"type": "text", "text": ...} is supported (joined).
std::string content(const json &v, const std::string &field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (!v.is_array()) bad(field, "must be a string or a list of text parts");
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    const json &part = v[i];
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text"))
      bad(f, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    out += text(part["text"], f + ".text");
  }
  return out;
}

std::vector<chat_message> messages(const json &v) {
  if (!v.is_array() || v.empty()) bad("messages", "must be a non-empty list of messages");
  std::vector<chat_message> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string f = "messages[" + std::to_string(i) + "]";
    const json &m = v[i];
    if (!m.is_object()) bad(f, "must be an object with \"role\" and \"content\"");
    chat_message msg;
    for (const auto &[k, x] : m.items()) {
      if (k == "role")
        msg.role = text(x, f + ".role");
      else if (k == "content")
        msg.content = content(x, f + ".content");
      else if (k != "name")
        bad(f + "." + k, "is not supported");
    }
    static const std::set<std::string> roles = {"system", "user", "assistant", "developer", "tool"};
    if (!roles.count(msg.role)) bad(f + ".role", "must be one of system, user, assistant, developer, tool");
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

completion_request parse_completion_request(const std::string &body, bool chat, const request_limits &limits) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) throw api_error(400, "the request body is not valid JSON");
  if (!j.is_object()) throw api_error(400, "the request body must be a JSON object");
  completion_request r;
  r.chat = chat;
  r.sampler = bp_sampler_default_options();
  r.sampler.temperature = 1.0f;
  r.sampler.top_k = 0;
  r.sampler.top_p = 1.0f;
  r.sampler.min_p = 0.0f;
  bool seeded = false, has_input = false;
  int32_t top_logprobs = -1;
  for (const auto &[k, v] : j.items()) {
    if (v.is_null() && k != "messages" && k != "prompt") continue;  // null = the default, as OpenAI reads it
    if (k == "model" || k == "user") {
      text(v, k);  // any name: the server has one model
    } else if (chat && k == "messages") {
      r.messages = messages(v);
      has_input = true;
    } else if (!chat && k == "prompt") {
      // A string, or a list holding one string (what some clients send).
      if (v.is_array() && v.size() == 1 && v[0].is_string())
        r.prompt = v[0].get<std::string>();
      else
        r.prompt = text(v, "prompt");
      has_input = true;
    } else if (k == "max_tokens" || (chat && k == "max_completion_tokens")) {
      r.max_tokens = integer(v, k, 0, limits.max_tokens);
    } else if (k == "temperature") {
      r.sampler.temperature = static_cast<float>(number(v, k, 0.0, 2.0));
    } else if (k == "top_p") {
      r.sampler.top_p = static_cast<float>(number(v, k, 0.0, 1.0));
    } else if (k == "top_k") {
      r.sampler.top_k = static_cast<int32_t>(integer(v, k, 0, 1 << 20));
    } else if (k == "min_p") {
      r.sampler.min_p = static_cast<float>(number(v, k, 0.0, 1.0));
    } else if (k == "repeat_penalty") {
      r.sampler.repeat_penalty = static_cast<float>(number(v, k, 0.0, 10.0));
    } else if (k == "seed") {
      r.sampler.seed = static_cast<uint64_t>(integer(v, k, INT64_MIN, INT64_MAX));
      seeded = true;
    } else if (k == "stop") {
      if (v.is_string()) {
        r.stops.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        if (v.size() > 16) bad(k, "at most 16 stop strings");
        for (size_t i = 0; i < v.size(); ++i) r.stops.push_back(text(v[i], "stop[" + std::to_string(i) + "]"));
      } else {
        bad(k, "must be a string or a list of strings");
      }
      for (const std::string &s : r.stops)
        if (s.empty()) bad(k, "a stop string may not be empty");
    } else if (k == "stream") {
      r.stream = boolean(v, k);
    } else if (k == "stream_options") {
      if (!v.is_object()) bad(k, "must be an object");
      for (const auto &[ok, ov] : v.items()) {
        if (ok != "include_usage") bad(k + "." + ok, "is not supported");
        r.include_usage = boolean(ov, k + ".include_usage");
      }
    } else if (k == "n") {
      if (integer(v, k, 1, 1) != 1) bad(k, "only 1 is supported");
    } else if (k == "presence_penalty" || k == "frequency_penalty") {
      if (number(v, k, -2.0, 2.0) != 0.0) bad(k, "is not supported (only 0); repeat_penalty is");
    } else if (chat && k == "logprobs") {
      if (boolean(v, k)) r.n_probs = std::max(r.n_probs, 0);
    } else if (chat && k == "top_logprobs") {
      top_logprobs = static_cast<int32_t>(integer(v, k, 0, 20));
    } else if ((!chat && k == "logprobs") || k == "n_probs") {
      // completions: the number of alternatives; n_probs is llama.cpp's name.
      r.n_probs = static_cast<int32_t>(integer(v, k, 0, 20));
    } else if (k == "echo") {
      if (boolean(v, k)) bad(k, "is not supported (only false)");
    } else {
      bad(k, "unknown field");
    }
  }
  if (!has_input) bad(chat ? "messages" : "prompt", "is required");
  if (top_logprobs >= 0) {
    if (r.n_probs < 0) bad("top_logprobs", "needs \"logprobs\": true");
    r.n_probs = top_logprobs;
  }
  if (!seeded) r.sampler.seed = std::random_device{}();  // a different draw per request, as OpenAI's
  return r;
}

}  // namespace bp::server
