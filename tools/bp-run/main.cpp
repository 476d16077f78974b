// bp-run: runs a small transformer decoder on a device list through the
// scheduler, checks its logits against cpu alone, and prints the plan
// (splits, nodes per backend, copies), memory per buffer and time per run.
//
//   bp-run [--device "blas;cpu"] [--plugin-path DIR]... [--plugin FILE]... [--layers N] [--dim N] [--heads N] [--ff N]
//          [--vocab N] [--tokens N] [--seed N] [--runs N] [--dot FILE] [--json]
//          [--save FILE.gguf] [--load FILE.gguf] [--logits-out FILE.f32] [--trace FILE.json] [--profile]
//
// Exit status: 0 when the logits match (NMSE < 1e-6), 1 when they do not or a
// step failed, 2 for bad flags.
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdio>

#include "common/cli.hpp"
#include "common/trace_cli.hpp"
#include "gguf_io.hpp"
#include "run.hpp"

int main(int argc, char **argv) {
  bp::run::options opt;
  CLI::App app{"bp-run: a small transformer decoder on a Backplane device list, checked against cpu alone"};
  bp::tools::add_version_flag(app, "bp-run");
  app.add_option("--device", opt.device, "device list in priority order, e.g. \"blas;cpu\" (default auto, else cpu)");
  app.add_option("--plugin-path", opt.plugin_paths, "also search this folder for libbp-*.so (repeatable)");
  app.add_option("--plugin", opt.plugin_files, "load this plugin file explicitly, whatever its name (repeatable)");
  app.add_option("--layers", opt.cfg.layers, "decoder layers")->check(CLI::Range(1, 1024));
  app.add_option("--dim", opt.cfg.dim, "model width")->check(CLI::Range(2, 65536));
  app.add_option("--heads", opt.cfg.heads, "attention heads (must divide --dim)")->check(CLI::Range(1, 4096));
  app.add_option("--ff", opt.cfg.ff, "feed-forward width")->check(CLI::Range(1, 262144));
  app.add_option("--vocab", opt.cfg.vocab, "vocabulary size")->check(CLI::Range(1, 1 << 20));
  app.add_option("--tokens", opt.cfg.tokens, "tokens in the sequence")->check(CLI::Range(1, 65536));
  app.add_option("--seed", opt.cfg.seed, "seed of the weights and token ids")
      ->check(CLI::Validator(
          [](std::string &s) { return s.find('-') != std::string::npos ? std::string("the seed must be 0 or more") : ""; },
          "UINT"));
  std::string weights = "f32";
  CLI::Option *weights_opt =
      app.add_option("--weights", weights,
                     "type of the 2-D weights: f32, or q8_0, q4_0, q5_0, q4_k, q5_k, q6_k, bf16 (quantized by "
                     "bp_quantize_rows; the report adds the memory saved and the logits' NMSE against f32 weights)")
          ->check(CLI::IsMember({"f32", "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k", "bf16"}, CLI::ignore_case));
  app.add_option("--runs", opt.runs, "timed runs (min and median are reported)")->check(CLI::Range(1, 100000));
  app.add_option("--dot", opt.dot_path, "write the split graph as Graphviz to FILE")
      ->check(CLI::Validator([](std::string &s) { return s.empty() ? std::string("the path is empty") : ""; },
                             "FILE"));
  app.add_flag("--json", opt.json, "print the plan, memory, timings and check as JSON");
  app.add_flag("--plans,!--no-plans", opt.plans,
               "replay graph plans on backends that have them (default on; --no-plans to compare)");
  std::string save_path, load_path, logits_path;
  app.add_option("--save", save_path, "write the weights and sizes to a GGUF file after the run");
  app.add_option("--load", load_path, "take the sizes, seed and weights from a GGUF file --save wrote");
  app.add_option("--logits-out", logits_path, "write the logits as little-endian f32");
  bp::tools::trace_options trace;
  app.add_option("--trace", trace.path, "write a Chrome trace-event JSON of every run to FILE (Perfetto opens it)");
  app.add_flag("--profile", trace.profile, "print the per-op time summary at the end (to stderr with --json)");
  if (auto rc = bp::tools::parse_command_line(app, argc, argv)) return *rc;
  if (!load_path.empty()) {
    if (std::string why = bp::run::read_gguf_config(load_path, opt.cfg); !why.empty()) {
      std::fprintf(stderr, "bp-run: %s\n", why.c_str());
      return 1;
    }
  }
  // --load takes the weights' type from the file unless --weights names one.
  for (bp_type t : {BP_TYPE_F32, BP_TYPE_Q8_0, BP_TYPE_Q4_0, BP_TYPE_Q5_0, BP_TYPE_Q4_K, BP_TYPE_Q5_K, BP_TYPE_Q6_K,
                    BP_TYPE_BF16}) {
    std::string name = bp_type_name(t);
    for (char &ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string want = weights;
    for (char &ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name == want && (load_path.empty() || weights_opt->count() > 0)) opt.cfg.weights = t;
  }
  std::string bad = bp::run::check_config(opt.cfg);
  if (!bad.empty()) {
    std::fprintf(stderr, "bp-run: %s\n", bad.c_str());
    return 2;
  }

  if (std::string why = bp::tools::trace_begin(trace); !why.empty()) {
    std::fprintf(stderr, "bp-run: --trace: %s\n", why.c_str());
    return 1;
  }
  bp::run::run_report report;
  bool ok = bp::run::run_all(opt, report);
  if (std::string why = bp::tools::trace_end(trace); !why.empty()) {
    ok = false;
    if (report.error.empty()) report.error = "--trace: " + why;
  }
  if (opt.json) {
    std::printf("%s\n", bp::run::to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputs(bp::run::to_text(report).c_str(), stdout);
  }
  if (trace.profile) std::fputs(bp::tools::profile_table().c_str(), opt.json ? stderr : stdout);
  if (!ok) {
    // The report (stdout) is for the results; the error goes to stderr.
    std::fprintf(stderr, "bp-run: error: %s\n", report.error.c_str());
    return 1;
  }
  if (!bp::run::write_outputs(opt.cfg, save_path, logits_path, report.logits)) return 1;
  return report.pass ? 0 : 1;
}
