// trace_cli.hpp: --trace FILE and --profile, the same on bp-run,
// bp-generate and bp-bench (backplane/trace.h; docs/performance.md,
// "Tracing").
//
// --trace starts a recording before the tool creates its first backend (so
// it wins over BP_TRACE) and writes FILE when the tool is done. --profile
// records too, file or not, and prints the per-op summary at the end.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backplane/trace.h"
#include "common/machine_rates.hpp"
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

// The host CPU's ceilings for the profile: measured once per process (about
// a second) with every CPU the process may run on.
struct host_peaks {
  double flops = 0, read_bytes = 0;
  const char *isa = "";
  int threads = 1;
};
inline const host_peaks &measured_host_peaks() {
  static const host_peaks p = [] {
    host_peaks h;
    cpu_set_t set;
    CPU_ZERO(&set);
    h.threads = sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
    h.flops = measure_fma_peak(h.threads, &h.isa);
    h.read_bytes = measure_dram_read(h.threads);
    return h;
  }();
  return p;
}

// Whether a profile row's backend computes on the host CPU, so the host's
// ceilings apply to it: the cpu and blas plugins' backends.
inline bool runs_on_host_cpu(const char *backend) {
  return std::strncmp(backend, "cpu", 3) == 0 || std::strncmp(backend, "blas", 4) == 0;
}

// The per-op summary of the last recording as a text table: count, total,
// mean, share of all node time, achieved GB/s (bp_op_bytes) and GFLOP/s
// (bp_op_flops), and for rows of host backends (cpu, blas) those two as
// fractions of the host's DRAM read rate and FMA peak, measured here
// (--profile: the tools pass |peaks|). Nodes of plugins that report no node
// spans are missing.
inline std::string profile_table(bool peaks = true) {
  size_t n = 0;
  if (bp_trace_op_stats(nullptr, 0, &n) != BP_OK) return std::string("profile: ") + bp_last_error() + "\n";
  std::vector<bp_trace_op_stat> rows(n);
  if (n && bp_trace_op_stats(rows.data(), rows.size(), &n) != BP_OK)
    return std::string("profile: ") + bp_last_error() + "\n";
  if (n == 0) return "profile: no node spans (the backends' plugins report none, or nothing ran)\n";
  uint64_t all_ns = 0;
  bool host_rows = false;
  for (const auto &r : rows) {
    all_ns += r.total_ns;
    host_rows = host_rows || runs_on_host_cpu(r.backend);
  }
  const host_peaks *hp = peaks && host_rows ? &measured_host_peaks() : nullptr;
  std::vector<std::vector<std::string>> cells{
      {"op", "backend", "count", "total ms", "mean us", "share", "GB/s", "GFLOP/s"}};
  if (hp) {
    cells[0].push_back("of read");
    cells[0].push_back("of peak");
  }
  for (const auto &r : rows) {
    const double ns = static_cast<double>(r.total_ns);
    const double gbs = ns > 0 ? static_cast<double>(r.bytes) / ns : 0.0;
    const double gflops = ns > 0 ? static_cast<double>(r.flops) / ns : 0.0;
    cells.push_back({bp_op_name(r.op), r.backend, std::to_string(r.count), format_fixed(ns / 1e6, 3),
                     format_fixed(ns / 1e3 / static_cast<double>(r.count), 1),
                     format_fixed(all_ns ? 100.0 * ns / static_cast<double>(all_ns) : 0.0, 1) + "%",
                     format_fixed(gbs, 2), format_fixed(gflops, 2)});
    if (hp) {
      const bool host = runs_on_host_cpu(r.backend);
      cells.back().push_back(host && hp->read_bytes > 0 ? format_fixed(gbs * 1e9 / hp->read_bytes, 2) : "");
      cells.back().push_back(host && hp->flops > 0 ? format_fixed(gflops * 1e9 / hp->flops, 2) : "");
    }
  }
  std::string head = "profile (node time " + format_fixed(static_cast<double>(all_ns) / 1e6, 3) + " ms";
  if (hp)
    head += "; host: DRAM read " + format_fixed(hp->read_bytes / 1e9, 1) + " GB/s, FMA peak " +
            format_fixed(hp->flops / 1e9, 1) + " GFLOP/s (" + hp->isa + ", " + std::to_string(hp->threads) +
            " threads)";
  return head + "):\n" + text_table(cells, "  ");
}

}  // namespace bp::tools
