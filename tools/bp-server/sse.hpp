// sse.hpp: the response bodies of the completion endpoints: OpenAI's
// objects, whole (non-streaming) and as server-sent-event chunks.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace bp::server {

struct response_meta {
  bool chat = false;
  std::string id;  // "chatcmpl-N" / "cmpl-N"
  std::string model;
  int64_t created = 0;
};

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// The non-streaming response.
// |logprobs|: the choice's "logprobs" (null when not asked).
nlohmann::json full_response(const response_meta &m, const std::string &text, const std::string &finish_reason,
                             int64_t prompt_tokens, int64_t completion_tokens,
                             const nlohmann::json &logprobs = nullptr);

// One streaming chunk: |text| as the delta, |finish_reason| "" while running;
// |first| adds the chat's role delta.
nlohmann::json chunk(const response_meta &m, const std::string &text, const std::string &finish_reason, bool first,
                     const nlohmann::json &logprobs = nullptr);

// "data: <json>\n\n", an event of the stream.
inline std::string sse_event(const nlohmann::json &j) {
  return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}
inline const char *sse_done() { return "data: [DONE]\n\n"; }

}  // namespace bp::server
