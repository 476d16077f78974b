// report.cpp: bp-run's output, as aligned text and as JSON (same facts).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "run.hpp"
#include "common/text_table.hpp"

namespace bp::run {
namespace {

using json = nlohmann::json;

std::string human_bytes(uint64_t n) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double min_of(const std::vector<double> &v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

using bp::tools::text_table;

std::string ops_text(const std::map<std::string, int> &ops) {
  std::string s;
  for (const auto &[op, n] : ops) s += (s.empty() ? "" : ", ") + op + " " + std::to_string(n);
  return s;
}

json timing_json(const std::vector<double> &v) {
  return {{"runs_ms", v}, {"min_ms", min_of(v)}, {"median_ms", median_of(v)}};
}

}  // namespace

json to_json(const run_report &r) {
  const model_config &c = r.opt.cfg;
  json j;
  j["config"] = {{"layers", c.layers}, {"dim", c.dim},       {"heads", c.heads}, {"ff", c.ff},
                 {"vocab", c.vocab},   {"tokens", c.tokens}, {"seed", c.seed},   {"runs", r.opt.runs}};
  j["device"] = r.opt.device;
  j["backends"] = r.backends;
  j["notes"] = r.notes;
  json splits = json::array();
  for (const auto &s : r.splits)
    splits.push_back({{"backend", s.backend},
                      {"first_node", s.first_node},
                      {"n_nodes", s.n_nodes},
                      {"n_inputs", s.n_inputs},
                      {"bytes_copied", s.bytes_copied},
                      {"graph_plan", s.n_plans > 0}});
  json per = json::array();
  for (const auto &b : r.per_backend) per.push_back({{"backend", b.name}, {"n_nodes", b.n_nodes}, {"ops", b.ops}});
  j["plan"] = {{"n_splits", r.splits.size()},
               {"n_copies", r.n_copies},
               {"bytes_copied", r.bytes_copied},
               {"splits", splits},
               {"backends", per}};
  json bufs = json::array();
  for (const auto &b : r.buffers)
    bufs.push_back({{"role", b.role}, {"backend", b.backend}, {"type", b.type}, {"bytes", b.bytes}});
  j["memory"] = {{"buffers", bufs},
                 {"gallocr_peak", r.gallocr_peak},
                 {"largest_live_set", r.largest_live_set},
                 {"largest_live_set_no_inplace", r.largest_live_set_no_inplace},
                 {"peak_over_live_set", r.largest_live_set ? static_cast<double>(r.gallocr_peak) /
                                                                 static_cast<double>(r.largest_live_set)
                                                           : 0.0}};
  j["timings"] = {{"device_list", timing_json(r.run_ms)}, {"cpu_reference", timing_json(r.reference_ms)}};
  j["check"] = {{"nmse", r.nmse}, {"tolerance", kNmseTolerance}, {"pass", r.error.empty() && r.pass}};
  j["weights"] = {{"type", bp_type_name(r.opt.cfg.weights)},
                  {"bytes", r.weight_bytes},
                  {"bytes_f32", r.weight_bytes_f32},
                  {"nmse_vs_f32", r.nmse_vs_f32}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

std::string to_text(const run_report &r) {
  const model_config &c = r.opt.cfg;
  std::ostringstream o;
  o << "bp-run: " << c.layers << " layers, dim " << c.dim << ", " << c.heads << " heads, ff " << c.ff << ", vocab "
    << c.vocab << ", " << c.tokens << " tokens, seed " << c.seed << "\n";
  // No backend list before a spec error: main prints the error itself.
  if (!r.backends.empty()) {
    o << "devices: \"" << r.opt.device << "\" ->";
    for (const auto &b : r.backends) o << " " << b;
    o << "\n";
  }
  for (const auto &n : r.notes) o << "note: " << n << "\n";
  if (!r.error.empty()) return o.str();  // main prints the error to stderr

  o << "\nPlan: " << r.splits.size() << " splits, " << r.n_copies << " tensor copies, "
    << human_bytes(r.bytes_copied) << " moved per run\n";
  std::vector<std::vector<std::string>> rows{{"SPLIT", "BACKEND", "FIRST", "NODES", "INPUTS", "BYTES IN", "RUNS AS"}};
  for (size_t i = 0; i < r.splits.size(); ++i) {
    const auto &s = r.splits[i];
    rows.push_back({std::to_string(i), s.backend, std::to_string(s.first_node), std::to_string(s.n_nodes),
                    std::to_string(s.n_inputs), human_bytes(s.bytes_copied),
                    s.n_plans > 0 ? "graph plan (replayed)" : "graph compute"});
  }
  o << text_table(rows, "  ");
  o << "Nodes per backend (views not counted):\n";
  rows.clear();
  for (const auto &b : r.per_backend) rows.push_back({b.name, std::to_string(b.n_nodes), ops_text(b.ops)});
  o << text_table(rows, "  ");

  o << "\nMemory:\n";
  rows = {{"ROLE", "BACKEND", "TYPE", "SIZE"}};
  for (const auto &b : r.buffers) rows.push_back({b.role, b.backend, b.type, human_bytes(b.bytes)});
  o << text_table(rows, "  ");
  o << "  graph allocator (cpu alone): peak " << human_bytes(r.gallocr_peak) << ", largest live set "
    << human_bytes(r.largest_live_set);
  if (r.largest_live_set)
    o << fmt(" (peak / live set = %.3f)", static_cast<double>(r.gallocr_peak) / static_cast<double>(r.largest_live_set));
  o << "\n  (live set without in-place reuse: " << human_bytes(r.largest_live_set_no_inplace) << ")\n";

  o << "\nTime per run (" << r.run_ms.size() << " runs):\n";
  rows = {{"", "MIN", "MEDIAN"},
          {"device list", fmt("%.3f ms", min_of(r.run_ms)), fmt("%.3f ms", median_of(r.run_ms))},
          {"cpu alone", fmt("%.3f ms", min_of(r.reference_ms)), fmt("%.3f ms", median_of(r.reference_ms))}};
  o << text_table(rows, "  ");

  o << "\nCheck: NMSE of the logits vs cpu alone = " << fmt("%.3g", r.nmse) << " (tolerance "
    << fmt("%.0e", kNmseTolerance) << "): " << (r.pass ? "PASS" : "FAIL") << "\n";
  if (bp_type_is_quantized(c.weights) && r.weight_bytes_f32 > 0)
    o << "Weights " << bp_type_name(c.weights) << ": " << human_bytes(r.weight_bytes)
      << " (f32: " << human_bytes(r.weight_bytes_f32)
      << fmt(", %.0f%% saved)",
             100.0 * (1.0 - static_cast<double>(r.weight_bytes) / static_cast<double>(r.weight_bytes_f32)))
      << "; NMSE of the logits vs the f32 model = " << fmt("%.3g", r.nmse_vs_f32) << "\n";
  return o.str();
}

}  // namespace bp::run
