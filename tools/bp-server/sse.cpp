// sse.cpp: OpenAI's completion objects (sse.hpp).
#include "sse.hpp"

namespace bp::server {

using json = nlohmann::json;

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {
json head(const response_meta &m, const char *object) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}
json reason(const std::string &r) { return r.empty() ? json(nullptr) : json(r); }
}  // namespace

json full_response(const response_meta &m, const std::string &text, const std::string &finish_reason,
                   int64_t prompt_tokens, int64_t completion_tokens, const json &logprobs) {
  json r = head(m, m.chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", reason(finish_reason)}};
  if (m.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  r["choices"] = json::array({choice});
  r["usage"] = usage_json(prompt_tokens, completion_tokens);
  return r;
}

json chunk(const response_meta &m, const std::string &text, const std::string &finish_reason, bool first,
           const json &logprobs) {
  json r = head(m, m.chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", reason(finish_reason)}};
  if (m.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish_reason.empty())) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  r["choices"] = json::array({choice});
  return r;
}

}  // namespace bp::server
