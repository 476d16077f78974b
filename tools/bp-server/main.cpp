// bp-server: an OpenAI-compatible HTTP server over libbackplane-model with
// continuous batching (docs/server.md).
//
//   bp-server --model FILE [--host 127.0.0.1] [--port 8080] [--parallel 4]
//             [--queue 64] [--slot-ctx N] [--batch 512] [--device LIST]
//             [--api-key KEY] [--chat-template NAME|FILE] [--max-tokens N]
//             [--max-body BYTES]
#include <httplib.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "backplane/gguf.h"
#include "common/cli.hpp"
#include "server.hpp"

namespace {

using namespace bp::server;

httplib::Server *g_http = nullptr;

void on_signal(int) {
  if (g_http) g_http->stop();
}

int fail(const std::string &what) {
  std::fprintf(stderr, "bp-server: %s\n", what.c_str());
  return 1;
}

std::string basename_of(const std::string &path) {
  const size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

// The file's tokenizer.chat_template, or "".
std::string file_template(const std::string &path) {
  bp_gguf *f = nullptr;
  if (bp_gguf_open(path.c_str(), &f) != BP_OK) return "";
  std::string out;
  size_t i = 0;
  const char *data = nullptr;
  size_t len = 0;
  if (bp_gguf_find_key(f, "tokenizer.chat_template", &i) == BP_OK &&
      bp_gguf_kv_read_string(f, i, 0, &data, &len) == BP_OK)
    out.assign(data, len);
  bp_gguf_close(f);
  return out;
}

std::string piece(const bp_model *m, bp_token t) {
  const char *d = nullptr;
  size_t n = 0;
  if (t < 0 || bp_model_token_piece(m, t, &d, &n) != BP_OK) return "";
  return std::string(d, n);
}

bool loopback(const std::string &host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

}  // namespace

int main(int argc, char **argv) {
  std::string model_path, device, host = "127.0.0.1", api_key, chat_template_opt;
  int port = 8080;
  uint32_t parallel = 4, slot_ctx = 0, batch = 512;
  size_t queue = 64, max_body = 1 << 20;
  int64_t max_tokens = 4096;
  CLI::App app{"bp-server: an OpenAI-compatible HTTP server for GGUF llama-family models"};
  bp::tools::add_version_flag(app, "bp-server");
  app.add_option("-m,--model", model_path, "the GGUF model file")->required();
  app.add_option("--device", device, "device list in priority order, e.g. \"vulkan;cpu\" (default cpu)");
  app.add_option("--host", host, "address to bind (default 127.0.0.1; another needs --api-key)");
  app.add_option("--port", port, "port to bind; 0 = any free one (printed)")->check(CLI::Range(0, 65535));
  app.add_option("--parallel", parallel, "slots: requests generated at once, each a sequence (default 4)")
      ->check(CLI::Range(1u, 256u));
  app.add_option("--queue", queue, "requests waiting for a slot at most; past it 503 (default 64)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  app.add_option("--slot-ctx", slot_ctx, "positions per slot, prompt and answer (default min(n_ctx_train, 4096))")
      ->check(CLI::Range(2u, 1u << 20));
  app.add_option("--batch", batch, "tokens per step: decode tokens plus a prompt chunk (default 512)")
      ->check(CLI::Range(1u, 1u << 16));
  app.add_option("--api-key", api_key, "require 'Authorization: Bearer KEY' (needed to bind a non-loopback address)");
  app.add_option("--chat-template", chat_template_opt,
                 "template NAME (llama3, qwen2.5, chatml, mistral) or FILE instead of the model's own");
  app.add_option("--max-tokens", max_tokens, "the largest max_tokens a request may ask (default 4096)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--max-body", max_body, "the largest request body in bytes (default 1 MiB)")
      ->check(CLI::Range(size_t{64}, size_t{1} << 30));
  CLI11_PARSE(app, argc, argv);

  if (!loopback(host) && api_key.empty()) {
    std::fprintf(stderr, "bp-server: binding %s exposes the model to the network: set --api-key KEY as well\n",
                 host.c_str());
    return 2;
  }
  // A client that leaves mid-write must not end the process.
  std::signal(SIGPIPE, SIG_IGN);

  server_state s;
  s.api_key = api_key;
  s.limits.max_tokens = max_tokens;
  s.model_id = basename_of(model_path);
  s.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

  std::string tmpl_source;
  if (!chat_template_opt.empty()) {
    if (const char *b = builtin_chat_template(chat_template_opt)) {
      tmpl_source = b;
    } else {
      std::ifstream f(chat_template_opt, std::ios::binary);
      if (!f) {
        std::fprintf(stderr,
                     "bp-server: --chat-template %s is neither a template name (llama3, qwen2.5, chatml, mistral) "
                     "nor a readable file\n",
                     chat_template_opt.c_str());
        return 2;
      }
      std::ostringstream ss;
      ss << f.rdbuf();
      tmpl_source = ss.str();
    }
  } else {
    tmpl_source = file_template(model_path);
  }

  bp_model_options mo{};
  mo.struct_size = sizeof mo;
  mo.devices = device.empty() ? nullptr : device.c_str();
  mo.offload_layers = -1;
  bp_model *model = nullptr;
  if (bp_model_load(model_path.c_str(), &mo, &model) != BP_OK) return fail(bp_last_error());
  s.model = model;
  s.info.struct_size = sizeof s.info;
  bp_model_describe(model, &s.info);
  s.bos_text = piece(model, s.info.bos);
  s.eos_text = piece(model, s.info.eos);
  if (tmpl_source.empty()) {
    s.template_problem =
        "the model file has no tokenizer.chat_template, so /v1/chat/completions cannot format messages: start "
        "bp-server with --chat-template NAME|FILE (llama3, qwen2.5, chatml, mistral), or use /v1/completions";
  } else {
    try {
      s.tmpl = std::make_unique<chat_template>(tmpl_source);
    } catch (const template_error &e) {
      s.template_problem = std::string("the model's chat template cannot be used: ") + e.what();
      std::fprintf(stderr, "bp-server: warning: %s\n", s.template_problem.c_str());
    }
  }

  if (slot_ctx == 0) slot_ctx = static_cast<uint32_t>(std::min<int32_t>(std::max(s.info.n_ctx_train, 2), 4096));
  bp_model_context_options co{};
  co.struct_size = sizeof co;
  co.n_ctx = slot_ctx * parallel;  // each slot's room is reserved, so no step runs out of cells
  co.n_batch = batch;
  co.n_seq = parallel;
  bp_model_context *ctx = nullptr;
  if (bp_model_context_new(model, &co, &ctx) != BP_OK) {
    const std::string e = bp_last_error();
    bp_model_free(model);
    return fail(e);
  }

  int rc = 0;
  {
    scheduler_config sc;
    sc.parallel = parallel;
    sc.queue = queue;
    sc.batch = batch;
    sc.slot_ctx = slot_ctx;
    scheduler sched(model, ctx, sc);
    s.sched = &sched;

    httplib::Server http;
    // One thread per open request (a stream holds its thread), and a few for
    // /health and /metrics while every slot and queue place is taken.
    const size_t threads = parallel + queue + 4;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(std::min<size_t>(threads, 1024)); };
    http.set_payload_max_length(max_body);
    add_routes(http, s);
    g_http = &http;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    int bound = port;
    if (port == 0)
      bound = http.bind_to_any_port(host);
    else if (!http.bind_to_port(host, port))
      bound = -1;
    if (bound <= 0) {
      rc = fail("cannot bind " + host + ":" + std::to_string(port) + " (in use, or not an address of this machine)");
    } else {
      std::printf("bp-server: %s on http://%s:%d (%u slots of %u positions, queue %zu)\n", s.model_id.c_str(),
                  host.c_str(), bound, parallel, slot_ctx, queue);
      std::fflush(stdout);
      if (!http.listen_after_bind()) rc = fail("the server stopped with an error");
    }
    g_http = nullptr;
  }  // the scheduler stops before the context it uses is freed
  bp_model_context_free(ctx);
  bp_model_free(model);
  return rc;
}
