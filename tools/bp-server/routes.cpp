// routes.cpp: the HTTP endpoints (docs/server.md): authentication, request
// checks, handing the job to the scheduler, and the response, whole or
// streamed. Every failure a client can cause is a 4xx with OpenAI's error
// JSON; nothing a request holds can stop the server.
#include <httplib.h>

#include <chrono>
#include <memory>
#include <sstream>

#include "api_error.hpp"
#include "chat_page.hpp"
#include "server.hpp"
#include "sse.hpp"

namespace bp::server {
namespace {

using json = nlohmann::json;

void send_error(httplib::Response &res, const api_error &e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(e.body().dump(), "application/json");
}

// Throws 401 unless the request carries the --api-key as a Bearer token.
void check_auth(const server_state &s, const httplib::Request &req) {
  if (s.api_key.empty()) return;
  if (req.get_header_value("Authorization") != "Bearer " + s.api_key)
    throw api_error(401, "a valid API key is required: send the header 'Authorization: Bearer KEY' (--api-key)");
}

std::vector<bp_token> tokenize(const server_state &s, const std::string &text, bool add_bos, bool special) {
  std::vector<bp_token> out(text.size() + 2);
  size_t n = 0;
  bp_status st = bp_model_tokenize(s.model, text.data(), text.size(), add_bos, special, out.data(), out.size(), &n);
  if (st == BP_ERR_RESOURCE_EXHAUSTED) {
    out.resize(n);
    st = bp_model_tokenize(s.model, text.data(), text.size(), add_bos, special, out.data(), out.size(), &n);
  }
  if (st != BP_OK) throw api_error(400, std::string("the prompt cannot be tokenized: ") + bp_last_error(), "prompt");
  out.resize(n);
  return out;
}

// The prompt's tokens: the rendered chat template (its special tokens
// recognised, and BOS only when the template did not write it) or the
// completion's text as bp-generate tokenizes it.
std::vector<bp_token> prompt_tokens(const server_state &s, const completion_request &r) {
  if (!r.chat) {
    std::vector<bp_token> t = tokenize(s, r.prompt, s.info.add_bos, false);
    if (t.empty()) throw api_error(400, "prompt: is empty (and the model adds no BOS token)", "prompt");
    return t;
  }
  if (!s.tmpl) throw api_error(400, s.template_problem, "messages");
  json msgs = json::array();
  for (const chat_message &m : r.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  std::string text;
  try {
    text = s.tmpl->render(
        {{"messages", msgs}, {"bos_token", s.bos_text}, {"eos_token", s.eos_text}, {"add_generation_prompt", true}});
  } catch (const template_error &e) {
    throw api_error(400, std::string("chat template: ") + e.what(), "messages");
  }
  const bool has_bos = !s.bos_text.empty() && text.compare(0, s.bos_text.size(), s.bos_text) == 0;
  return tokenize(s, text, s.info.add_bos && !has_bos, true);
}

std::string token_text(const server_state &s, bp_token t) {
  const char *d = nullptr;
  size_t n = 0;
  if (bp_model_token_text(s.model, t, &d, &n) != BP_OK) return "";
  return std::string(d, n);
}

json bytes_of(const std::string &t) {
  json b = json::array();
  for (unsigned char c : t) b.push_back(c);
  return b;
}

// The choice's "logprobs" for |probs|: the chat's {"content": [...]} or the
// completions' parallel lists; *offset is the text's length before them.
json logprobs_json(const server_state &s, bool chat, const std::vector<token_prob> &probs, int64_t *offset) {
  if (chat) {
    json content = json::array();
    for (const token_prob &p : probs) {
      const std::string t = token_text(s, p.token);
      json top = json::array();
      for (const auto &[id, lp] : p.top) {
        const std::string tt = token_text(s, id);
        top.push_back({{"token", tt}, {"logprob", lp}, {"bytes", bytes_of(tt)}});
      }
      content.push_back({{"token", t}, {"logprob", p.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const token_prob &p : probs) {
    const std::string t = token_text(s, p.token);
    tokens.push_back(t);
    lps.push_back(p.logprob);
    json top = json::object();
    for (const auto &[id, lp] : p.top) top[token_text(s, id)] = lp;
    tops.push_back(top);
    offsets.push_back(*offset);
    *offset += static_cast<int64_t>(t.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

struct stream_state {
  std::shared_ptr<job> j;
  response_meta meta;
  bool include_usage = false;
  bool first = true;
  const server_state *server = nullptr;
  bool logprobs = false;
  int64_t offset = 0;  // text_offset of the next token
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
};

void stream(httplib::Response &res, std::shared_ptr<stream_state> st) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink &sink) {
        const job_output o = st->j->take(std::chrono::milliseconds(100));
        std::string out;
        if (st->first) {
          st->first = false;
          if (st->meta.chat) out += sse_event(chunk(st->meta, "", "", true));  // the role, as OpenAI sends it
        }
        if (!o.text.empty() || !o.probs.empty()) {
          const json lp =
              st->logprobs ? logprobs_json(*st->server, st->meta.chat, o.probs, &st->offset) : json(nullptr);
          out += sse_event(chunk(st->meta, o.text, "", false, lp));
        }
        if (o.finished) {
          if (!o.error.empty()) {
            out += sse_event(api_error(500, o.error).body());
          } else {
            out += sse_event(chunk(st->meta, "", o.finish_reason, false));
            if (st->include_usage) {
              json u = chunk(st->meta, "", "", false);
              u["choices"] = json::array();
              u["usage"] = usage_json(o.prompt_tokens, o.completion_tokens);
              out += sse_event(u);
            }
          }
          out += sse_done();
        }
        // A comment now and then while nothing comes (a prompt in the
        // queue): writing is how a client that left is noticed.
        const auto now = std::chrono::steady_clock::now();
        if (out.empty() && now - st->last_write > std::chrono::seconds(1)) out = ":\n\n";
        if (!out.empty()) {
          st->last_write = now;
          if (!sink.write(out.data(), out.size())) {
            st->j->cancel();  // the client is gone: the scheduler frees its slot at the next step
            return false;
          }
        }
        if (o.finished) sink.done();
        return true;
      },
      [st](bool success) {
        if (!success) st->j->cancel();
      });
}

void complete(server_state &s, const httplib::Request &req, httplib::Response &res, bool chat) {
  s.requests.fetch_add(1);
  std::shared_ptr<job> j;
  completion_request r;
  try {
    check_auth(s, req);
    r = parse_completion_request(req.body, chat, s.limits);
    gen_params gp;
    gp.prompt = prompt_tokens(s, r);
    const uint32_t room = s.sched->config().slot_ctx;
    if (gp.prompt.size() >= room)
      throw api_error(400,
                      "the prompt has " + std::to_string(gp.prompt.size()) + " tokens; a slot holds " +
                          std::to_string(room) + " positions, prompt and answer together (--slot-ctx)",
                      chat ? "messages" : "prompt", "context_length_exceeded");
    // The answer may take what the prompt leaves of the slot, and no more
    // than the server's limit; a request asking for more stops at "length".
    const int64_t left = static_cast<int64_t>(room - gp.prompt.size());
    gp.max_tokens = r.max_tokens < 0 ? std::min(left, s.limits.max_tokens) : std::min(left, r.max_tokens);
    gp.sampler = r.sampler;
    gp.stops = r.stops;
    gp.n_probs = r.n_probs;
    j = std::make_shared<job>(std::move(gp));
    if (!s.sched->submit(j)) {
      s.rejected_busy.fetch_add(1);
      throw api_error(503, "the server is busy: every slot is taken and the queue is full; retry later");
    }
  } catch (const api_error &e) {
    if (e.status != 503) s.rejected_bad.fetch_add(1);
    send_error(res, e);
    return;
  }
  response_meta meta;
  meta.chat = chat;
  meta.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(s.next_id.fetch_add(1));
  meta.model = s.model_id;
  meta.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (r.stream) {
    auto st = std::make_shared<stream_state>();
    st->j = j;
    st->meta = meta;
    st->include_usage = r.include_usage;
    st->server = &s;
    st->logprobs = r.n_probs >= 0;
    stream(res, st);
    return;
  }
  std::string text;
  std::vector<token_prob> probs;
  job_output o;
  do {
    o = j->take(std::chrono::milliseconds(1000));
    text += o.text;
    probs.insert(probs.end(), o.probs.begin(), o.probs.end());
  } while (!o.finished);
  if (!o.error.empty()) {
    s.failed.fetch_add(1);
    send_error(res, api_error(500, o.error));
    return;
  }
  int64_t offset = 0;
  const json lp = r.n_probs >= 0 ? logprobs_json(s, chat, probs, &offset) : json(nullptr);
  res.set_content(full_response(meta, text, o.finish_reason, o.prompt_tokens, o.completion_tokens, lp)
                      .dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

std::string metrics(const server_state &s) {
  const scheduler_stats &st = s.sched->stats();
  std::ostringstream m;
  auto one = [&](const char *name, const char *type, const char *help, double v, const char *labels = "") {
    m << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << labels << ' ' << v << '\n';
  };
  one("bp_server_requests_total", "counter", "Completion requests received.", static_cast<double>(s.requests.load()));
  m << "# HELP bp_server_requests_rejected_total Requests refused before generation, by reason.\n"
       "# TYPE bp_server_requests_rejected_total counter\n"
    << "bp_server_requests_rejected_total{reason=\"busy\"} " << s.rejected_busy.load() << '\n'
    << "bp_server_requests_rejected_total{reason=\"invalid\"} " << s.rejected_bad.load() << '\n';
  one("bp_server_requests_failed_total", "counter", "Generations that failed (500).",
      static_cast<double>(s.failed.load()));
  one("bp_server_requests_cancelled_total", "counter", "Generations ended because their client left.",
      static_cast<double>(st.cancelled.load()));
  one("bp_server_prompt_tokens_total", "counter", "Prompt tokens evaluated.",
      static_cast<double>(st.prompt_tokens.load()));
  one("bp_server_tokens_generated_total", "counter", "Tokens generated (rate() of it is tokens/s).",
      static_cast<double>(st.tokens_generated.load()));
  one("bp_server_steps_total", "counter", "Batched evaluation steps.", static_cast<double>(st.steps.load()));
  one("bp_server_step_seconds_total", "counter", "Time spent in steps.", static_cast<double>(st.busy_ns.load()) * 1e-9);
  one("bp_server_queue_length", "gauge", "Requests waiting for a slot.", static_cast<double>(s.sched->queue_length()));
  one("bp_server_slots_busy", "gauge", "Slots holding a request.", st.slots_busy.load());
  one("bp_server_slots_total", "gauge", "Slots (--parallel).", s.sched->config().parallel);
  one("bp_server_kv_cells_used", "gauge", "KV cache cells some sequence holds.", st.cells_used.load());
  one("bp_server_kv_cells_total", "gauge", "KV cache cells.",
      static_cast<double>(s.sched->config().slot_ctx) * s.sched->config().parallel);
  return m.str();
}

}  // namespace

void add_routes(httplib::Server &http, server_state &s) {
  // The chat page: static, so it needs no key (it asks for one when the
  // API does).
  http.Get("/", [](const httplib::Request &, httplib::Response &res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(chat_page_html, "text/html; charset=utf-8");
  });
  http.Get("/health", [](const httplib::Request &, httplib::Response &res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/v1/models", [&s](const httplib::Request &req, httplib::Response &res) {
    try {
      check_auth(s, req);
    } catch (const api_error &e) {
      return send_error(res, e);
    }
    json m = {{"id", s.model_id}, {"object", "model"}, {"created", s.created}, {"owned_by", "backplane"}};
    m["meta"] = {{"arch", s.info.arch},
                 {"n_vocab", s.info.n_vocab},
                 {"n_ctx_train", s.info.n_ctx_train},
                 {"n_params", s.info.n_params},
                 {"slot_ctx", s.sched->config().slot_ctx},
                 {"chat_template", s.tmpl != nullptr}};
    res.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(), "application/json");
  });
  http.Get("/metrics", [&s](const httplib::Request &req, httplib::Response &res) {
    try {
      check_auth(s, req);
    } catch (const api_error &e) {
      return send_error(res, e);
    }
    res.set_content(metrics(s), "text/plain; version=0.0.4");
  });
  http.Post("/v1/completions",
            [&s](const httplib::Request &req, httplib::Response &res) { complete(s, req, res, false); });
  http.Post("/v1/chat/completions",
            [&s](const httplib::Request &req, httplib::Response &res) { complete(s, req, res, true); });
  // Whatever else fails (an unknown path, a body over the limit) gets the
  // same error JSON, so a client has one shape to read.
  http.set_error_handler([](const httplib::Request &req, httplib::Response &res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                      : res.status == 413 ? "the request body is larger than --max-body allows"
                                          : "the request failed with HTTP " + std::to_string(res.status);
    res.set_content(api_error(res.status, msg).body().dump(), "application/json");
  });
  http.set_exception_handler([](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception &e) {
      msg = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(api_error(500, msg).body().dump(), "application/json");
  });
}

}  // namespace bp::server
