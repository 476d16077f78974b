// bp-generate: runs a llama-family GGUF model (libbackplane-model.so) on a
// device list: streams generated text, prints timings and memory, or measures
// prompt and generation speed the way llama-bench does (--bench).
//
//   bp-generate --model FILE.gguf [--device SPEC] [-p TEXT | -f FILE] [-n N] [--ctx N] [--batch N]
//               [--offload N] [--kv-f32] [--temp T] [--top-k K] [--top-p P] [--min-p M]
//               [--repeat-penalty R] [--repeat-last-n N] [--seed S] [--stop STRING]... [--special]
//               [--json] [--logits-out FILE] [--tokenize] [--bench [--pp N] [--tg N] [--reps R]]
//               [--trace FILE.json] [--profile]
//
// Exit status: 0 done, 1 a step failed (the message names it and carries
// bp_last_error()), 2 bad flags. docs/tools.md describes every output.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/gguf.h"
#include "backplane/model.h"
#include "common/cli.hpp"
#include "common/splitmix64.hpp"
#include "common/text_table.hpp"
#include "common/trace_cli.hpp"

namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

static_assert(std::endian::native == std::endian::little, "--logits-out writes the host's floats as they are");

struct options {
  std::string model, device, prompt, prompt_file, logits_out;
  int n_predict = 128;
  uint32_t ctx = 0, batch = 0;
  int offload = -1;
  bool kv_f32 = false, special = false, json = false, tokenize = false, bench = false, unfused_attention = false;
  float temp = 0.0f, top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  int top_k = 40, repeat_last_n = 64;
  uint64_t seed = 0;
  std::vector<std::string> stops;
  int pp = 512, tg = 128, reps = 3;
};

// Prints "bp-generate: <step>: <bp_last_error()>" and gives the exit status 1.
int failed(const std::string &step) {
  std::fprintf(stderr, "bp-generate: %s: %s\n", step.c_str(), bp_last_error());
  return 1;
}
int failed_msg(const std::string &step, const std::string &why) {
  std::fprintf(stderr, "bp-generate: %s: %s\n", step.c_str(), why.c_str());
  return 1;
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}
double per_s(size_t n, double ms) { return ms > 0.0 ? static_cast<double>(n) * 1000.0 / ms : 0.0; }

std::string bytes_text(uint64_t b) {
  const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, unit[u]);
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Owners of the library's handles.
struct handles {
  bp_model *model = nullptr;
  bp_model_context *ctx = nullptr;
  bp_generator *generator = nullptr;
  ~handles() {
    bp_generator_free(generator);
    bp_model_context_free(ctx);
    bp_model_free(model);
  }
};

// The weights' types by share of bytes, largest first ("q4_k 78%, q6_k 14%,
// f32 8%"), from the file's tensor table; "" when it cannot be read.
std::string type_mix(const std::string &path) {
  bp_gguf *f = nullptr;
  if (bp_gguf_open(path.c_str(), &f) != BP_OK) return "";
  std::map<std::string, uint64_t> by_type;
  uint64_t total = 0;
  for (size_t i = 0; i < bp_gguf_tensor_count(f); ++i) {
    bp_gguf_tensor_info ti{};
    ti.struct_size = sizeof ti;
    if (bp_gguf_tensor_describe(f, i, &ti) != BP_OK) continue;
    by_type[ti.type_name] += ti.nbytes;
    total += ti.nbytes;
  }
  bp_gguf_close(f);
  std::vector<std::pair<uint64_t, std::string>> v;
  for (const auto &[name, bytes] : by_type) v.emplace_back(bytes, name);
  std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
  std::string out;
  for (const auto &[bytes, name] : v) {
    if (!out.empty()) out += ", ";
    out += name + " " + fixed(total ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total) : 0.0, 0) + "%";
  }
  return out;
}

json devices_json(const bp_model *m) {
  json d = json::array();
  for (size_t i = 0; i < bp_model_backend_count(m); ++i) {
    bp_model_backend_info bi{};
    bi.struct_size = sizeof bi;
    if (bp_model_backend_describe(m, i, &bi) != BP_OK) continue;
    d.push_back({{"backend", bi.backend ? bi.backend : ""},
                 {"layers", bi.layers},
                 {"weight_bytes", bi.weight_bytes},
                 {"mapped", bi.mapped}});
  }
  return d;
}

// "cpu:0 40.12 MiB (mapped), vulkan:0 1.2 GiB"
std::string devices_text(const bp_model *m) {
  std::string out;
  for (const auto &d : devices_json(m)) {
    if (!out.empty()) out += ", ";
    out += d["backend"].get<std::string>() + " " + bytes_text(d["weight_bytes"].get<uint64_t>()) + " weights";
    if (d["mapped"].get<bool>()) out += " (mapped)";
  }
  return out;
}

bp_status tokenize(const bp_model *m, const std::string &text, bool add_bos, bool special, std::vector<bp_token> &out) {
  out.assign(text.size() + 2, 0);
  size_t n = 0;
  bp_status st = bp_model_tokenize(m, text.data(), text.size(), add_bos, special, out.data(), out.size(), &n);
  if (st == BP_ERR_RESOURCE_EXHAUSTED) {
    out.assign(n, 0);
    st = bp_model_tokenize(m, text.data(), text.size(), add_bos, special, out.data(), out.size(), &n);
  }
  if (st == BP_OK) out.resize(n);
  return st;
}

bool write_rows(std::FILE *f, const float *rows, size_t n_rows, int32_t n_vocab) {
  size_t n = n_rows * static_cast<size_t>(n_vocab);
  return std::fwrite(rows, sizeof(float), n, f) == n;
}

int run_bench(const options &opt, handles &h, const bp_model_info &info) {
  std::vector<bp_token> ids(static_cast<size_t>(std::max(opt.pp, opt.tg)));
  bp::tools::splitmix64 rng{opt.seed};
  for (bp_token &t : ids) t = static_cast<bp_token>(rng.next() % static_cast<uint64_t>(info.n_vocab));

  // Warm-up (not timed): one prompt and one generated token.
  if (opt.pp > 0 && bp_model_context_eval(h.ctx, ids.data(), static_cast<size_t>(opt.pp), false) != BP_OK)
    return failed("warm-up prompt eval");
  if (bp_model_context_rewind(h.ctx, 0) != BP_OK) return failed("rewind");
  if (opt.tg > 0 && bp_model_context_eval(h.ctx, ids.data(), 1, false) != BP_OK) return failed("warm-up token eval");

  double best_pp = 0.0, best_tg = 0.0;
  std::vector<double> pp_ms, tg_ms;
  for (int r = 0; r < opt.reps; ++r) {
    if (opt.pp > 0) {
      if (bp_model_context_rewind(h.ctx, 0) != BP_OK) return failed("rewind");
      auto t0 = clock_type::now();
      if (bp_model_context_eval(h.ctx, ids.data(), static_cast<size_t>(opt.pp), false) != BP_OK)
        return failed("prompt eval (pp " + std::to_string(opt.pp) + ")");
      pp_ms.push_back(ms_since(t0));
      best_pp = std::max(best_pp, per_s(static_cast<size_t>(opt.pp), pp_ms.back()));
    }
    if (opt.tg > 0) {
      if (bp_model_context_rewind(h.ctx, 0) != BP_OK) return failed("rewind");
      auto t0 = clock_type::now();
      for (int i = 0; i < opt.tg; ++i)
        if (bp_model_context_eval(h.ctx, &ids[static_cast<size_t>(i)], 1, false) != BP_OK)
          return failed("token eval (tg, token " + std::to_string(i) + ")");
      tg_ms.push_back(ms_since(t0));
      best_tg = std::max(best_tg, per_s(static_cast<size_t>(opt.tg), tg_ms.back()));
    }
  }

  std::string mix = type_mix(opt.model);
  std::string device = opt.device.empty() ? "cpu" : opt.device;
  if (opt.json) {
    json j = {{"model", opt.model},
              {"arch", info.arch ? info.arch : ""},
              {"n_params", info.n_params},
              {"weight_bytes", info.weight_bytes},
              {"types", mix},
              {"device", device},
              {"devices", devices_json(h.model)},
              {"context_bytes", bp_model_context_memory(h.ctx)},
              {"n_ctx", bp_model_context_size(h.ctx)},
              {"n_batch", opt.batch},
              {"kv_f32", opt.kv_f32},
              {"unfused_attention", opt.unfused_attention},
              {"pp", opt.pp},
              {"tg", opt.tg},
              {"reps", opt.reps},
              {"seed", opt.seed},
              {"pp_ms", pp_ms},
              {"tg_ms", tg_ms},
              {"pp_tokens_per_s", best_pp},
              {"tg_tokens_per_s", best_tg}};
    std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"MODEL", "SIZE", "TYPES", "DEVICE", "TEST", "TOKENS/S"}};
  std::string name =
      opt.model.substr(opt.model.find_last_of('/') == std::string::npos ? 0 : opt.model.find_last_of('/') + 1);
  std::string size = bytes_text(info.weight_bytes);
  if (opt.pp > 0) rows.push_back({name, size, mix, device, "pp" + std::to_string(opt.pp), fixed(best_pp, 2)});
  if (opt.tg > 0) rows.push_back({name, size, mix, device, "tg" + std::to_string(opt.tg), fixed(best_tg, 2)});
  std::fputs(bp::tools::text_table(rows, "").c_str(), stdout);
  std::fprintf(stderr, "best of %d; memory: %s; context %s\n", opt.reps, devices_text(h.model).c_str(),
               bytes_text(bp_model_context_memory(h.ctx)).c_str());
  return 0;
}

int run_generate(const options &opt, handles &h, const bp_model_info &info, const std::vector<bp_token> &prompt) {
  const int32_t n_vocab = info.n_vocab;
  std::FILE *logits_file = nullptr;
  if (!opt.logits_out.empty()) {
    logits_file = std::fopen(opt.logits_out.c_str(), "wb");
    if (!logits_file) return failed_msg("open " + opt.logits_out, std::strerror(errno));
  }
  struct closer {
    std::FILE *&f;
    ~closer() {
      if (f) std::fclose(f);
    }
  } close_logits{logits_file};

  const uint32_t n_ctx = bp_model_context_size(h.ctx);
  if (prompt.size() > n_ctx)
    return failed_msg("prompt", "the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                                    std::to_string(n_ctx) + "; raise --ctx or shorten the prompt");

  // The prompt is evaluated here, not by the generator: its time is
  // reported on its own, and --logits-out wants every row of it.
  auto t0 = clock_type::now();
  if (bp_model_context_eval(h.ctx, prompt.data(), prompt.size(), logits_file != nullptr) != BP_OK)
    return failed("prompt eval");
  size_t rows = 0;
  const float *logits = bp_model_context_logits(h.ctx, &rows);
  const double prompt_ms = ms_since(t0);
  if (logits == nullptr || rows == 0) return failed_msg("prompt eval", "no logits after the prompt");
  if (logits_file && !write_rows(logits_file, logits, rows, n_vocab))
    return failed_msg("write " + opt.logits_out, std::strerror(errno));

  bp_sampler_options so = bp_sampler_default_options();
  so.temperature = opt.temp;
  so.top_k = opt.top_k;
  so.top_p = opt.top_p;
  so.min_p = opt.min_p;
  so.repeat_penalty = opt.repeat_penalty;
  so.repeat_last_n = opt.repeat_last_n;
  so.seed = opt.seed;
  // --stop "" has always been ignored; the library refuses an empty one.
  std::vector<const char *> stops;
  for (const std::string &s : opt.stops)
    if (!s.empty()) stops.push_back(s.c_str());
  bp_generator_options go = bp_generator_default_options();
  go.prompt = prompt.data();
  go.n_prompt = prompt.size();
  go.prompt_evaluated = true;
  go.max_tokens = opt.n_predict;
  go.sampler = &so;
  go.stops = stops.data();
  go.n_stops = stops.size();
  if (bp_generator_new(h.ctx, &go, &h.generator) != BP_OK) return failed("generator");

  std::vector<bp_token> generated;
  std::string text;
  bp_stop_reason stop = BP_STOP_NONE;
  auto t1 = clock_type::now();
  while (stop == BP_STOP_NONE) {
    bp_generator_step step{};
    step.struct_size = sizeof step;
    if (bp_generator_next(h.generator, &step) != BP_OK)
      return failed("generating token " + std::to_string(generated.size()));
    stop = step.stop;
    if (step.token >= 0) {
      // Every token but the first was drawn from the row of the token
      // before it, evaluated in this step.
      if (logits_file && !generated.empty()) {
        logits = bp_model_context_logits(h.ctx, &rows);
        if (logits == nullptr || rows == 0) return failed_msg("eval", "no logits after a generated token");
        if (!write_rows(logits_file, logits + (rows - 1) * static_cast<size_t>(n_vocab), 1, n_vocab))
          return failed_msg("write " + opt.logits_out, std::strerror(errno));
      }
      generated.push_back(step.token);
    }
    text.append(step.text, step.text_len);
    if (!opt.json && step.text_len) {
      std::fwrite(step.text, 1, step.text_len, stdout);
      std::fflush(stdout);
    }
  }
  const double gen_ms = ms_since(t1);
  if (!opt.json) {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (logits_file) {
    if (std::fclose(logits_file) != 0) {
      logits_file = nullptr;
      return failed_msg("write " + opt.logits_out, std::strerror(errno));
    }
    logits_file = nullptr;
  }

  const uint64_t ctx_bytes = bp_model_context_memory(h.ctx);
  if (opt.json) {
    json j = {{"prompt_tokens", prompt},
              {"tokens", generated},
              {"text", text},
              {"stop", bp_stop_reason_name(stop)},
              {"n_vocab", n_vocab},
              {"logits_rows", prompt.size() + (generated.empty() ? 0 : generated.size() - 1)},
              {"timings",
               {{"prompt_ms", prompt_ms},
                {"prompt_tokens_per_s", per_s(prompt.size(), prompt_ms)},
                {"generate_ms", gen_ms},
                {"generate_tokens_per_s", per_s(generated.size(), gen_ms)}}},
              {"devices", devices_json(h.model)},
              {"context_bytes", ctx_bytes}};
    std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  }
  std::fprintf(stderr,
               "prompt: %zu tokens, %.2f tokens/s; generated: %zu tokens, %.2f tokens/s (stop: %s); memory: %s; "
               "context %s\n",
               prompt.size(), per_s(prompt.size(), prompt_ms), generated.size(), per_s(generated.size(), gen_ms),
               bp_stop_reason_name(stop), devices_text(h.model).c_str(), bytes_text(ctx_bytes).c_str());
  return 0;
}

}  // namespace

// Ends the recording of --trace/--profile on every way out of main: the
// file is written and the summary printed whatever step ended the run.
struct trace_scope {
  const bp::tools::trace_options &opt;
  FILE *profile_to;
  ~trace_scope() {
    if (std::string why = bp::tools::trace_end(opt); !why.empty())
      std::fprintf(stderr, "bp-generate: --trace: %s\n", why.c_str());
    if (opt.profile) std::fputs(bp::tools::profile_table().c_str(), profile_to);
  }
};

int main(int argc, char **argv) {
  options opt;
  CLI::App app{"bp-generate: run a llama-family GGUF model: generate text, tokenize, or benchmark"};
  bp::tools::add_version_flag(app, "bp-generate");
  app.add_option("-m,--model", opt.model, "the GGUF model file")->required();
  app.add_option("--device", opt.device, "device list in priority order, e.g. \"vulkan;cpu\" (default cpu)");
  auto *p_opt = app.add_option("-p,--prompt", opt.prompt, "the prompt text");
  auto *f_opt = app.add_option("-f,--file", opt.prompt_file, "read the prompt from FILE");
  p_opt->excludes(f_opt);
  app.add_option("-n,--n-predict", opt.n_predict, "tokens to generate at most")->check(CLI::Range(0, 1 << 24));
  app.add_option("--ctx", opt.ctx, "positions in the KV cache (default min(n_ctx_train, 4096))")
      ->check(CLI::Range(1u, 1u << 24));
  app.add_option("--batch", opt.batch, "tokens per prompt graph (default 512)")->check(CLI::Range(1u, 1u << 24));
  app.add_option("--offload", opt.offload, "layers on the first device of the list (default -1 = all that fit)")
      ->check(CLI::Range(-1, 1 << 20));
  app.add_flag("--kv-f32", opt.kv_f32, "keep the KV cache in f32 instead of f16");
  app.add_flag("--unfused-attention", opt.unfused_attention,
               "attention as two products around SOFT_MAX instead of the fused ATTENTION op");
  app.add_option("--temp", opt.temp, "temperature; <= 0 is greedy (default 0)");
  app.add_option("--top-k", opt.top_k, "keep the k most likely tokens; <= 0 = all (default 40)");
  app.add_option("--top-p", opt.top_p, "nucleus: keep the smallest set with this probability (default 0.95)");
  app.add_option("--min-p", opt.min_p, "drop tokens below min_p x the top probability (default 0.05)");
  app.add_option("--repeat-penalty", opt.repeat_penalty, "penalty on recent tokens; 1 = none (default 1)");
  app.add_option("--repeat-last-n", opt.repeat_last_n, "tokens the penalty looks at (default 64)");
  app.add_option("--seed", opt.seed, "seed of the sampler (and of --bench's token ids)")
      ->check(CLI::Validator(
          [](std::string &s) {
            return s.find('-') != std::string::npos ? std::string("the seed must be 0 or more") : "";
          },
          "UINT"));
  app.add_option("--stop", opt.stops, "stop when the text contains STRING (repeatable; not printed)");
  app.add_flag("--special", opt.special, "recognise special tokens (<|im_start|>) in the prompt text");
  app.add_flag("--json", opt.json, "print one JSON object at the end instead of streaming text");
  app.add_option("--logits-out", opt.logits_out, "write every evaluated position's logits as little-endian f32");
  auto *tok_opt = app.add_flag("--tokenize", opt.tokenize, "print the prompt's token ids as a JSON list and exit");
  auto *bench_opt = app.add_flag("--bench", opt.bench, "measure prompt (pp) and generation (tg) speed");
  auto *pp_opt = app.add_option("--pp", opt.pp, "--bench: prompt tokens in one batch (default 512)")
                     ->check(CLI::Range(0, 1 << 20));
  auto *tg_opt = app.add_option("--tg", opt.tg, "--bench: tokens generated one at a time (default 128)")
                     ->check(CLI::Range(0, 1 << 20));
  auto *reps_opt = app.add_option("--reps", opt.reps, "--bench: repetitions; the best is reported (default 3)")
                       ->check(CLI::Range(1, 1000));
  pp_opt->needs(bench_opt);
  tg_opt->needs(bench_opt);
  reps_opt->needs(bench_opt);
  tok_opt->excludes(bench_opt);
  bp::tools::trace_options trace;
  app.add_option("--trace", trace.path, "write a Chrome trace-event JSON of the whole run to FILE (Perfetto opens it)");
  app.add_flag("--profile", trace.profile,
               "print the per-op time summary at the end (stdout after --bench's table, else stderr)");
  if (auto rc = bp::tools::parse_command_line(app, argc, argv)) return *rc;
  if (opt.bench && opt.pp == 0 && opt.tg == 0) {
    std::fprintf(stderr, "bp-generate: --pp and --tg are both 0: nothing to measure\n");
    return 2;
  }

  if (!opt.prompt_file.empty()) {
    std::ifstream in(opt.prompt_file, std::ios::binary);
    if (!in) return failed_msg("read " + opt.prompt_file, std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    opt.prompt = ss.str();
  }

  if (std::string why = bp::tools::trace_begin(trace); !why.empty()) {
    std::fprintf(stderr, "bp-generate: --trace: %s\n", why.c_str());
    return 1;
  }
  // Declared before |h|: the recording ends after the model is freed.
  const trace_scope traced{trace, opt.bench && !opt.json ? stdout : stderr};
  handles h;
  bp_model_options mo{};
  mo.struct_size = sizeof mo;
  mo.devices = opt.device.empty() ? nullptr : opt.device.c_str();
  mo.offload_layers = opt.offload;
  if (bp_model_load(opt.model.c_str(), &mo, &h.model) != BP_OK) return failed("load " + opt.model);
  bp_model_info info{};
  info.struct_size = sizeof info;
  if (bp_model_describe(h.model, &info) != BP_OK) return failed("model info");

  if (!opt.bench) {
    std::vector<bp_token> prompt;
    if (tokenize(h.model, opt.prompt, info.add_bos, opt.special, prompt) != BP_OK) return failed("tokenize");
    if (opt.tokenize) {
      std::printf("%s\n", json(prompt).dump().c_str());
      return 0;
    }
    if (prompt.empty())
      return failed_msg("tokenize", "the prompt is empty and the model adds no BOS token; give -p TEXT or -f FILE");
    bp_model_context_options co{};
    co.struct_size = sizeof co;
    co.n_ctx = opt.ctx;
    co.n_batch = opt.batch;
    co.kv_f32 = opt.kv_f32;
    co.unfused_attention = opt.unfused_attention;
    if (bp_model_context_new(h.model, &co, &h.ctx) != BP_OK) return failed("context");
    return run_generate(opt, h, info, prompt);
  }

  // --bench: the prompt in one graph, the context just big enough unless --ctx says.
  bp_model_context_options co{};
  co.struct_size = sizeof co;
  co.n_ctx = opt.ctx ? opt.ctx : static_cast<uint32_t>(std::max(opt.pp, opt.tg));
  co.n_batch = std::max<uint32_t>(opt.batch, static_cast<uint32_t>(opt.pp));
  co.kv_f32 = opt.kv_f32;
  co.unfused_attention = opt.unfused_attention;
  opt.batch = co.n_batch;
  if (bp_model_context_new(h.model, &co, &h.ctx) != BP_OK) return failed("context");
  return run_bench(opt, h, info);
}
