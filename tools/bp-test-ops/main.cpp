// bp-test-ops: the op-conformance runner. Runs every op case of
// tools/conformance on each selected backend, compares with the
// double-precision reference, prints a line per backend and op, the
// failures, and a final op x backend table. Exit 0 only when no case failed
// and at least one backend was tested; 1 on a failure; 2 for bad usage;
// 77 (the automake/CTest "skipped" convention) when --plugin names a plugin
// that has no device on this machine (UNAVAILABLE), when every --device
// matches no device here (it names a plugin that lists none), or when
// --require-description is not met (e.g. BP_CPU_ISA=avx512 on a CPU without
// AVX-512: the cpu device's description names the kernels that run, so a run
// of another path is a skip, not a pass). A device that is listed but whose
// backend fails to start is a failure (1) with the plugin's message, never a
// skip, whatever status the plugin gives. ctest's conformance entries
// (tests/CMakeLists.txt) rely on both.
//
//   bp-test-ops                       every device found
//   bp-test-ops --device cpu:threads=1 -o MUL_MAT -o ROPE   (-b is the older name)
//   bp-test-ops --plugin ./libbp-x.so --json results.json

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "conformance/conformance.hpp"

namespace {

namespace conf = bp::conformance;

constexpr int kExitSkipped = 77;

struct counts {
  int passed = 0, failed = 0, unsupported = 0;
  int unsupported_optional = 0;  // of those, cases of an --optional-feature
};

struct backend_run {
  std::string spec;
  std::string name;   // bp_backend_name, or the spec when creation failed
  std::string label;  // what lines and the table show: the name, plus the spec when it says more
  std::string error;  // set when the backend could not be created
  bool skipped = false;  // its plugin has no device here, or the description lacks the required text
  std::vector<conf::case_result> results;
  std::map<std::string, counts> per_op;
};

std::string last_error() {
  const char *e = bp_last_error();
  return e && *e ? e : "(no message)";
}

// True when |spec| matches no device here: it names a plugin that lists no
// device ("auto": no plugin lists one). Resolved from the device lists
// alone, without starting a backend. A spec whose device is listed is not
// such a spec, even when its backend fails to start.
bool spec_matches_no_device(const std::string &spec) {
  const std::string name = spec.substr(0, spec.find(':'));
  if (name == "auto") return bp_device_count() == 0;
  bp_plugin *p = nullptr;
  bp_registry_find_plugin(name.c_str(), &p);
  return p == nullptr || bp_plugin_device_count(p) == 0;
}

// The spec of every device, optionally only those of |plugin|.
std::vector<std::string> device_specs(const bp_plugin *plugin, std::string &why_none) {
  std::vector<std::string> specs;
  const size_t n = plugin ? bp_plugin_device_count(plugin) : bp_device_count();
  for (size_t i = 0; i < n; ++i) {
    bp_device *dev = plugin ? bp_plugin_device(plugin, i) : bp_device_get(i);
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (!dev || bp_device_describe(dev, &info) != BP_OK || !info.spec) {
      std::fprintf(stderr, "bp-test-ops: skipping device %zu: %s\n", i, last_error().c_str());
      continue;
    }
    specs.emplace_back(info.spec);
  }
  if (specs.empty())
    why_none = plugin ? std::string("plugin '") + bp_plugin_name(plugin) + "' has no devices"
                      : "no device was found: check BP_PLUGIN_PATH and run bp-devices to see rejected plugins";
  return specs;
}

// --expect-log / --forbid-log: every log line at INFO and above, kept (and
// still printed at WARN and above, as without a callback).
struct log_capture {
  std::mutex mu;
  std::vector<std::string> lines;
  static void sink(bp_log_level level, const char *source, const char *message, void *user) {
    auto *self = static_cast<log_capture *>(user);
    const std::string line = std::string(source ? source : "?") + ": " + (message ? message : "");
    if (level >= BP_LOG_WARN) std::fprintf(stderr, "%s\n", line.c_str());
    std::lock_guard<std::mutex> lock(self->mu);
    self->lines.push_back(line);
  }
};

const char *status_word(conf::case_status s) { return conf::case_status_name(s); }

// The description of |be|'s device ("" when it has none).
std::string device_description(bp_backend *be) {
  bp_device *dev = bp_backend_device(be);
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (!dev || bp_device_describe(dev, &info) != BP_OK || !info.description) return "";
  return info.description;
}

void run_backend(backend_run &run, const std::vector<conf::case_desc> &cases, const std::vector<std::string> &ops,
                 const std::string &require_description, const std::vector<std::string> &optional_features,
                 bool verbose, FILE *out) {
  bp_backend *be = nullptr;
  if (const bp_status st = bp_backend_new(run.spec.c_str(), &be); st != BP_OK || !be) {
    run.error = last_error();  // before any other call replaces it
    run.name = run.label = run.spec;
    // UNAVAILABLE is a skip only when the plugin loaded but lists no device
    // here. A plugin may also answer UNAVAILABLE from a listed device's
    // backend_init (its driver would not start): that device is broken.
    run.skipped = st == BP_ERR_UNAVAILABLE && spec_matches_no_device(run.spec);
    const char *what = run.skipped                ? "SKIPPED, no such device here"
                       : st == BP_ERR_UNAVAILABLE ? "FAILED, the device is listed but its backend did not start"
                                                  : "cannot create the backend";
    std::fprintf(out, "[%s] %s: %s\n", run.spec.c_str(), what, run.error.c_str());
    return;
  }
  run.name = bp_backend_name(be);
  run.label = run.name == run.spec ? run.name : run.name + " (" + run.spec + ")";
  if (!require_description.empty()) {
    const std::string desc = device_description(be);
    if (desc.find(require_description) == std::string::npos) {
      run.skipped = true;
      run.error = "the device's description '" + desc + "' lacks '" + require_description + "'";
      std::fprintf(out, "[%s] SKIPPED: %s\n", run.label.c_str(), run.error.c_str());
      bp_backend_free(be);
      return;
    }
    std::fprintf(out, "[%s] device: %s\n", run.label.c_str(), desc.c_str());
  }
  for (const std::string &op : ops) {
    counts &cnt = run.per_op[op];
    std::vector<std::string> lines;
    int total = 0;
    for (const conf::case_desc &c : cases) {
      if (c.op != op) continue;
      ++total;
      conf::case_result r = conf::run_case(c, be);
      switch (r.status) {
        case conf::case_status::passed: ++cnt.passed; break;
        case conf::case_status::failed: ++cnt.failed; break;
        case conf::case_status::unsupported:
          ++cnt.unsupported;
          if (!c.feature.empty() &&
              std::find(optional_features.begin(), optional_features.end(), c.feature) != optional_features.end())
            ++cnt.unsupported_optional;
          break;
      }
      if (r.status == conf::case_status::failed && !r.compared) {
        // Never ran to a comparison: an API or setup error, not a number.
        lines.push_back("  FAIL " + r.name + ": error: " + r.message);
      } else if (r.status == conf::case_status::failed) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "nmse %.3g (max %.3g)", r.nmse, r.max_nmse);
        lines.push_back("  FAIL " + r.name + ": " + buf + ": " + r.message);
      } else if (verbose) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "nmse %.3g", r.nmse);
        lines.push_back(std::string("  ") + (r.status == conf::case_status::passed ? "ok   " : "skip ") + r.name +
                        ": " + (r.status == conf::case_status::passed ? buf : r.message));
      }
      run.results.push_back(std::move(r));
    }
    if (total == 0) continue;
    std::fprintf(out, "[%s] %-9s %3d/%-3d passed", run.label.c_str(), op.c_str(), cnt.passed, total);
    if (cnt.failed) std::fprintf(out, ", %d FAILED", cnt.failed);
    if (cnt.unsupported) std::fprintf(out, ", %d not supported", cnt.unsupported);
    std::fprintf(out, "\n");
    for (const std::string &l : lines) std::fprintf(out, "%s\n", l.c_str());
    std::fflush(out);
  }
  bp_backend_free(be);
}

void print_table(const std::vector<backend_run> &runs, const std::vector<std::string> &ops, FILE *out) {
  std::fprintf(out, "\nSummary (passed/failed/not supported):\n%-10s", "op");
  std::vector<size_t> width;
  for (const backend_run &r : runs) {
    width.push_back(std::max<size_t>(r.label.size(), 12));
    std::fprintf(out, "  %-*s", static_cast<int>(width.back()), r.label.c_str());
  }
  std::fprintf(out, "\n");
  for (const std::string &op : ops) {
    std::fprintf(out, "%-10s", op.c_str());
    for (size_t i = 0; i < runs.size(); ++i) {
      std::string cell = "-";
      if (runs[i].skipped) {
        cell = "skipped";
      } else if (!runs[i].error.empty()) {
        cell = "no backend";
      } else if (auto it = runs[i].per_op.find(op); it != runs[i].per_op.end()) {
        const counts &c = it->second;
        cell = std::to_string(c.passed) + "/" + std::to_string(c.failed) + "/" + std::to_string(c.unsupported);
        if (c.failed) cell += " !";
      }
      std::fprintf(out, "  %-*s", static_cast<int>(width[i]), cell.c_str());
    }
    std::fprintf(out, "\n");
  }
}

nlohmann::json to_json(const std::vector<backend_run> &runs, bool ok) {
  nlohmann::json j;
  j["ok"] = ok;
  j["backends"] = nlohmann::json::array();
  for (const backend_run &r : runs) {
    nlohmann::json b;
    b["spec"] = r.spec;
    b["name"] = r.name;
    b["error"] = r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error);
    nlohmann::json summary = nlohmann::json::object();
    for (const auto &[op, c] : r.per_op)
      summary[op] = {{"passed", c.passed}, {"failed", c.failed}, {"not_supported", c.unsupported}};
    b["summary"] = summary;
    b["results"] = nlohmann::json::array();
    for (const conf::case_result &c : r.results) {
      b["results"].push_back({{"op", c.op},
                              {"name", c.name},
                              {"status", status_word(c.status)},
                              {"nmse", c.compared && std::isfinite(c.nmse) ? nlohmann::json(c.nmse) : nlohmann::json(nullptr)},
                              {"max_nmse", c.max_nmse},
                              {"message", c.message}});
    }
    j["backends"].push_back(std::move(b));
  }
  return j;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"bp-test-ops: checks every op of each backend against a double-precision reference"};
  bp::tools::add_version_flag(app, "bp-test-ops");
  std::vector<std::string> specs, ops;
  std::string plugin_path, json_path, require_description;
  std::vector<std::string> expect_logs, forbid_logs, optional_features;
  bool verbose = false, list = false, require_support = false;
  app.add_option("-d,--device,-b,--backend", specs,
                 "device spec to test, as in bp-run and bp-bench (repeatable; default: every device found); -b and "
                 "--backend are the older names");
  app.add_option("-o,--op", ops, "op to test, e.g. MUL_MAT (repeatable; default: all)");
  app.add_option("--plugin", plugin_path, "load this plugin file and test only its devices");
  app.add_option("--json", json_path, "write the results as JSON to FILE ('-' = stdout)");
  app.add_option("--require-description", require_description,
                 "skip (exit 77) a device whose description lacks TEXT, e.g. 'kernels avx512' with BP_CPU_ISA=avx512 "
                 "(the cpu device names the kernels that run)");
  app.add_flag("--require-support", require_support,
               "count a case the backend does not support as a failure (for a plugin that implements every op)");
  app.add_option("--optional-feature", optional_features,
                 "with --require-support, a case of this feature (e.g. 'quant', the quantized types) the backend does "
                 "not support is not a failure (repeatable): for a plugin that has not got those kernels yet");
  app.add_option("--expect-log", expect_logs,
                 "fail unless some log line (INFO and above) matches this regular expression (repeatable): shows "
                 "that a path ran, e.g. with vulkan:profile=true the shader variants dispatched");
  app.add_option("--forbid-log", forbid_logs, "fail when a log line matches this regular expression (repeatable)");
  app.add_flag("-v,--verbose", verbose, "print every case, not only failures");
  app.add_flag("--list", list, "list the cases and exit");
  if (auto rc = bp::tools::parse_command_line(app, argc, argv)) return *rc;

  const std::vector<std::string> known = conf::conformance_ops();
  for (std::string &op : ops) {
    std::transform(op.begin(), op.end(), op.begin(), [](unsigned char c) { return std::toupper(c); });
    if (std::find(known.begin(), known.end(), op) == known.end()) {
      std::string all;
      for (const auto &k : known) all += (all.empty() ? "" : " ") + k;
      std::fprintf(stderr, "bp-test-ops: unknown op '%s'; the ops are: %s\n", op.c_str(), all.c_str());
      return 2;
    }
  }
  const std::vector<std::string> run_ops = ops.empty() ? known : ops;
  const std::vector<conf::case_desc> cases = conf::conformance_cases(ops);
  if (list) {
    for (const auto &c : cases) std::printf("%s\n", c.name.c_str());
    return 0;
  }

  // With --json - the JSON owns stdout; the report goes to stderr.
  FILE *out = json_path == "-" ? stderr : stdout;
  // Opened before the run, so a bad path fails in a second, not after it.
  std::ofstream json_file;
  if (!json_path.empty() && json_path != "-") {
    json_file.open(json_path);
    if (!json_file) {
      std::fprintf(stderr, "bp-test-ops: cannot write --json '%s': %s\n", json_path.c_str(), std::strerror(errno));
      return 2;
    }
  }

  std::vector<std::regex> expect_re, forbid_re;
  try {
    for (const auto &e : expect_logs) expect_re.emplace_back(e);
    for (const auto &e : forbid_logs) forbid_re.emplace_back(e);
  } catch (const std::regex_error &e) {
    std::fprintf(stderr, "bp-test-ops: bad --expect-log/--forbid-log expression: %s\n", e.what());
    return 2;
  }
  static log_capture logs;
  if (!expect_re.empty() || !forbid_re.empty()) {
    bp_log_set_callback(&log_capture::sink, &logs);
    if (bp_log_get_level() > BP_LOG_INFO) bp_log_set_level(BP_LOG_INFO);
  }

  bp_plugin *plugin = nullptr;
  if (!plugin_path.empty()) {
    bp_status st = bp_registry_load(plugin_path.c_str(), &plugin);
    if (st == BP_ERR_UNAVAILABLE) {
      // No hardware for this plugin here: nothing failed, nothing was tested.
      std::fprintf(stderr, "bp-test-ops: SKIPPED: plugin '%s' has no device on this machine: %s\n",
                   plugin_path.c_str(), last_error().c_str());
      return kExitSkipped;
    }
    if (st != BP_OK) {
      std::fprintf(stderr, "bp-test-ops: cannot load plugin '%s': %s\n", plugin_path.c_str(), last_error().c_str());
      return 1;
    }
    // A plugin that finds its devices on first use (ABI 1.1) reports a
    // missing driver here rather than at load.
    const char *why = nullptr;
    if (bp_plugin_status(plugin, &why) == BP_ERR_UNAVAILABLE) {
      std::fprintf(stderr, "bp-test-ops: SKIPPED: plugin '%s' has no device on this machine: %s\n",
                   plugin_path.c_str(), why ? why : "");
      return kExitSkipped;
    }
  }
  if (specs.empty()) {
    std::string why;
    specs = device_specs(plugin, why);
    if (specs.empty()) {
      std::fprintf(stderr, "bp-test-ops: nothing to test: %s\n", why.c_str());
      return 1;
    }
  }

  std::vector<backend_run> runs;
  for (const std::string &spec : specs) {
    backend_run r;
    r.spec = spec;
    run_backend(r, cases, run_ops, require_description, optional_features, verbose, out);
    if (require_support)
      for (auto &[op, c] : r.per_op) c.failed += c.unsupported - c.unsupported_optional;
    runs.push_back(std::move(r));
  }
  print_table(runs, run_ops, out);

  int failed = 0, created = 0, skipped = 0;
  for (const backend_run &r : runs) {
    if (r.skipped)
      ++skipped;
    else if (r.error.empty())
      ++created;
    for (const auto &[op, c] : r.per_op) failed += c.failed;
  }
  if (skipped == static_cast<int>(runs.size())) {
    // Nothing here to test: no device, or not the path asked for.
    std::fprintf(out, "\nbp-test-ops: SKIPPED: no device here matches %s\n",
                 require_description.empty() ? "the spec(s)" : ("'" + require_description + "'").c_str());
    return kExitSkipped;
  }
  // The paths the run had to show (or not) in its log.
  int log_failures = 0;
  {
    std::lock_guard<std::mutex> lock(logs.mu);
    for (size_t i = 0; i < expect_re.size(); ++i) {
      const auto hit = std::find_if(logs.lines.begin(), logs.lines.end(),
                                    [&](const std::string &l) { return std::regex_search(l, expect_re[i]); });
      if (hit == logs.lines.end()) {
        ++log_failures;
        std::fprintf(out, "FAIL: no log line matches --expect-log '%s'\n", expect_logs[i].c_str());
      } else {
        std::fprintf(out, "log shows '%s': %s\n", expect_logs[i].c_str(), hit->c_str());
      }
    }
    for (size_t i = 0; i < forbid_re.size(); ++i)
      for (const std::string &l : logs.lines)
        if (std::regex_search(l, forbid_re[i])) {
          ++log_failures;
          std::fprintf(out, "FAIL: log line matches --forbid-log '%s': %s\n", forbid_logs[i].c_str(), l.c_str());
        }
  }
  bp_log_set_callback(nullptr, nullptr);
  const bool ok = failed == 0 && log_failures == 0 && created + skipped == static_cast<int>(runs.size());
  if (created == 0)
    std::fprintf(out, "\nbp-test-ops: no backend could be created\n");
  else if (ok)
    std::fprintf(out, "\nOK: every case passed or is not supported, on %d backend(s)\n", created);
  else
    std::fprintf(out, "\nFAILED: %d case(s) failed, %d log check(s); %d of %zu backend(s) could not be created\n",
                 failed, log_failures, static_cast<int>(runs.size()) - created - skipped, runs.size());

  if (!json_path.empty()) {
    const std::string text = to_json(runs, ok).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (json_path == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else if (!(json_file << text) || !json_file.flush()) {
      std::fprintf(stderr, "bp-test-ops: cannot write --json '%s': %s\n", json_path.c_str(), std::strerror(errno));
      return 1;
    }
  }
  return ok ? 0 : 1;
}
