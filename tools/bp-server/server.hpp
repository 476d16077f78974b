// server.hpp: what the HTTP routes share: the model, its chat template, the
// scheduler, the limits and the request counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "backplane/model.h"
#include "chat_template.hpp"
#include "request.hpp"
#include "scheduler.hpp"

namespace httplib {
class Server;
}

namespace bp::server {

struct server_state {
  bp_model *model = nullptr;
  bp_model_info info{};
  std::string model_id;                 // what /v1/models lists and responses name
  std::unique_ptr<chat_template> tmpl;  // null: no usable template
  std::string template_problem;         // why tmpl is null (the 400's message)
  std::string bos_text, eos_text;       // bos_token / eos_token for the template
  scheduler *sched = nullptr;
  request_limits limits;
  std::string api_key;  // "" = no authentication
  int64_t created = 0;  // the server's start, the "created" of /v1/models

  // /metrics counters, by outcome.
  std::atomic<uint64_t> requests{0};       // completion requests received
  std::atomic<uint64_t> rejected_busy{0};  // 503: the queue was full
  std::atomic<uint64_t> rejected_bad{0};   // 4xx: refused before queueing
  std::atomic<uint64_t> failed{0};         // 500: the generation failed
  std::atomic<uint64_t> next_id{1};
};

// Registers every route of docs/server.md on |http|.
void add_routes(httplib::Server &http, server_state &state);

}  // namespace bp::server
