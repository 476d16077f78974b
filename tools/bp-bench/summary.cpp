// summary.cpp: collects each benchmark's rate counter and prints the ratios
// of every backend against its reference from the same run.
#include <algorithm>
#include <cstdio>

#include "bench.hpp"
#include "common/text_table.hpp"

namespace bp::bench {
namespace {

std::string format_rate(double rate, bool flops) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", rate / 1e9, flops ? "GFLOP/s" : "GB/s");
  return buf;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

void collecting_reporter::ReportRuns(const std::vector<Run> &runs) {
  inner_->ReportRuns(runs);
  for (const Run &run : runs) {
    // The registered name (no "/real_time", "/repeats:N" or "_median").
    const std::string &name = run.run_name.function_name;
    result &r = results_[name];
    if (run.error_occurred) {
      r.error = run.error_message;
      continue;
    }
    double rate = 0;
    for (const char *key : {"flops", "bytes"}) {
      auto it = run.counters.find(key);
      if (it != run.counters.end()) rate = it->second.value;
    }
    if (run.run_type == Run::RT_Aggregate) {
      // With repetitions the median aggregate wins over the single runs.
      if (run.aggregate_name == "median") r.rate = rate, samples_[name].clear();
    } else {
      samples_[name].push_back(rate);
      r.rate = median(samples_[name]);
    }
  }
}

namespace {

// The case's fraction of the machine: FLOP/s of peak for a product, bytes/s
// of DRAM memcpy for the rest. A product whose roofline is below the peak
// (DRAM's bytes/s x its FLOPs per byte of weights: few rows of b, f32 N = 8
// included on a 2-core VM) is bound by streaming its weights, so their
// bytes/s follow, against memcpy and against a read-only pass: the latter is
// its fraction of the roofline. (Weights read over and over, as a benchmark
// does, can stay partly in L3 and pass 1.0.)
std::string machine_fraction(const entry &e, double rate, const machine_rate &peak, const machine_rate &dram,
                             const machine_rate &dram_read) {
  char buf[128];
  if (!e.flops) {
    if (dram.rate <= 0) return "-";
    std::snprintf(buf, sizeof buf, "%.2f DRAM", rate / dram.rate);
    return buf;
  }
  if (peak.rate <= 0) return "-";
  int n = std::snprintf(buf, sizeof buf, "%.2f peak", rate / peak.rate);
  const double stream = std::max(dram.rate, dram_read.rate);
  if (e.weight_bytes > 0 && dram.rate > 0 && dram_read.rate > 0 && e.work > 0 &&
      stream * e.work / e.weight_bytes < peak.rate) {
    const double weights_per_s = rate / e.work * e.weight_bytes;
    std::snprintf(buf + n, sizeof buf - n, ", %.2f DRAM, %.2f read (%.1f GB/s weights)", weights_per_s / dram.rate,
                  weights_per_s / dram_read.rate, weights_per_s / 1e9);
  }
  return buf;
}

}  // namespace

std::string summary_text(const std::vector<entry> &entries, const std::map<std::string, result> &results,
                         const machine_rate &peak, const machine_rate &dram, const machine_rate &dram_read) {
  std::vector<std::vector<std::string>> rows = {
      {"OP", "SHAPE", "BACKEND", "RATE", "REFERENCE", "REF RATE", "RATIO", "OF MACHINE"}};
  for (const entry &e : entries) {
    if (e.ref.empty()) continue;
    auto it = results.find(e.name);
    if (it == results.end()) continue;  // filtered out
    std::vector<std::string> row = {e.group, e.shape, e.who};
    const result &r = it->second;
    if (!r.error.empty()) {
      row.push_back("error: " + r.error);
      rows.push_back(row);
      continue;
    }
    row.push_back(format_rate(r.rate, e.flops));
    auto ref = std::find_if(entries.begin(), entries.end(), [&](const entry &x) { return x.name == e.ref; });
    auto rr = results.find(e.ref);
    row.push_back(ref != entries.end() ? ref->who : e.ref);
    if (e.ref == "-") {  // no reference for this case (bench.hpp: quant_cases)
      row.push_back("-");
      row.push_back("-");
      row.push_back(machine_fraction(e, r.rate, peak, dram, dram_read));
    } else if (rr == results.end() || !rr->second.error.empty() || rr->second.rate <= 0) {
      row.push_back(rr == results.end() ? "not run" : "error");
      row.push_back("-");
      row.push_back(machine_fraction(e, r.rate, peak, dram, dram_read));
    } else {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.3gx", r.rate / rr->second.rate);
      row.push_back(format_rate(rr->second.rate, e.flops));
      row.push_back(ratio);
      row.push_back(machine_fraction(e, r.rate, peak, dram, dram_read));
    }
    rows.push_back(row);
  }
  if (rows.size() == 1) return "";
  char head[256];
  std::snprintf(head, sizeof head,
                "Machine: peak %.1f GFLOP/s (%s), DRAM %.1f GB/s (%s), %.1f GB/s (%s), measured in this run\n",
                peak.rate / 1e9, peak.what.c_str(), dram.rate / 1e9, dram.what.c_str(), dram_read.rate / 1e9,
                dram_read.what.c_str());
  return std::string(head) +
         "\nSummary: each backend against its reference measured in this run "
         "(RATIO = RATE / REF RATE, higher is better; OF MACHINE = RATE / peak or DRAM memcpy, "
         "weights / DRAM memcpy and / DRAM read)\n" +
         bp::tools::text_table(rows, "  ");
}

}  // namespace bp::bench
