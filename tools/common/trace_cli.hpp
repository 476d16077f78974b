// trace_cli.hpp: --trace FILE and --profile, the same on bp-run,
// bp-generate and bp-bench (backplane/trace.h; docs/performance.md,
// "Tracing").
//
// --trace starts a recording before the tool creates its first backend (so
// it wins over BP_TRACE) and writes FILE when the tool is done. --profile
// records too, file or not, and prints the per-op summary at the end.
#pragma once

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "common/text_table.hpp"

namespace bp::tools {

struct trace_options {
  std::string path;      // --trace FILE ("" for none)
  bool profile = false;  // --profile
  bool wanted() const { return !path.empty() || profile; }
};

// Starts the recording the options ask for. "" or the reason it failed.
inline std::string trace_begin(const trace_options &o) {
  if (!o.wanted()) return "";
  if (bp_trace_start(o.path.empty() ? nullptr : o.path.c_str()) != BP_OK) return bp_last_error();
  return "";
}

// Stops the recording trace_begin started and writes its file. "" or the
// reason it failed. A recording BP_TRACE started is left to process exit.
inline std::string trace_end(const trace_options &o) {
  if (!o.wanted() || !bp_trace_active()) return "";
  if (bp_trace_stop() != BP_OK) return bp_last_error();
  return "";
}

inline std::string format_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The per-op summary of the last recording as a text table: count, total,
// mean, share of all node time, achieved GB/s (bp_op_bytes) and GFLOP/s
// (bp_op_flops). Nodes of plugins that report no node spans are missing.
inline std::string profile_table() {
  size_t n = 0;
  if (bp_trace_op_stats(nullptr, 0, &n) != BP_OK) return std::string("profile: ") + bp_last_error() + "\n";
  std::vector<bp_trace_op_stat> rows(n);
  if (n && bp_trace_op_stats(rows.data(), rows.size(), &n) != BP_OK)
    return std::string("profile: ") + bp_last_error() + "\n";
  if (n == 0) return "profile: no node spans (the backends' plugins report none, or nothing ran)\n";
  uint64_t all_ns = 0;
  for (const auto &r : rows) all_ns += r.total_ns;
  std::vector<std::vector<std::string>> cells{
      {"op", "backend", "count", "total ms", "mean us", "share", "GB/s", "GFLOP/s"}};
  for (const auto &r : rows) {
    const double ns = static_cast<double>(r.total_ns);
    cells.push_back({bp_op_name(r.op), r.backend, std::to_string(r.count), format_fixed(ns / 1e6, 3),
                     format_fixed(ns / 1e3 / static_cast<double>(r.count), 1),
                     format_fixed(all_ns ? 100.0 * ns / static_cast<double>(all_ns) : 0.0, 1) + "%",
                     format_fixed(ns > 0 ? static_cast<double>(r.bytes) / ns : 0.0, 2),
                     format_fixed(ns > 0 ? static_cast<double>(r.flops) / ns : 0.0, 2)});
  }
  return "profile (node time " + format_fixed(static_cast<double>(all_ns) / 1e6, 3) + " ms):\n" +
         text_table(cells, "  ");
}

}  // namespace bp::tools
