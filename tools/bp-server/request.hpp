// request.hpp: the body of a completion request, parsed and checked before
// anything is queued: every field known, of its type and in its range, else
// an api_error (400) naming it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "backplane/model.h"

namespace bp::server {

struct chat_message {
  std::string role;
  std::string content;
};

struct completion_request {
  bool chat = false;
  std::string prompt;                  // /v1/completions
  std::vector<chat_message> messages;  // /v1/chat/completions
  int64_t max_tokens = -1;             // -1: not given
  bp_sampler_options sampler{};
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t n_probs = -1;        // logprobs asked: -1 none, else how many alternatives
};

struct request_limits {
  int64_t max_tokens = 4096;  // the most a request may ask for
};

// Parses |body| (the raw bytes) as a request of /v1/chat/completions when
// |chat|, else /v1/completions. Throws api_error.
completion_request parse_completion_request(const std::string &body, bool chat, const request_limits &limits);

}  // namespace bp::server
