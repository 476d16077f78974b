// bp-bench: Google Benchmark over Backplane backends. Every op is timed on each
// backend and on a reference in the same run (cblas_sgemm for MUL_MAT, memcpy
// of the same bytes for the rest); a ratio table follows the results, with
// each case also as a fraction of the machine: the FMA peak of the CPU's
// widest vector ISA, memcpy at DRAM size and a read-only pass at DRAM size
// (the roofline of a product that streams its weights), all measured in
// this run with the same threads.
//
//   bp-bench [--device SPEC]... [--threads N] [--plugin-path DIR]... [--trace FILE.json] [--benchmark_* flags]
//
// Our flags are taken out of argv before benchmark::Initialize sees the rest.
// Exit status: 0 when every benchmark ran, 1 when one failed (or a --device
// spec could not be created), 2 for bad flags.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "common/cli.hpp"
#include "common/trace_cli.hpp"

namespace {

struct options {
  std::vector<std::string> devices;
  std::vector<std::string> plugin_paths;
  int threads = 0;
  std::string format = "console";
  std::string color = "auto";
  bool tabular = false;
  std::string filter;  // --benchmark_filter: "Quant" in it adds the quantized cases
  bp::tools::trace_options trace;  // --trace FILE
};

const char kUsage[] =
    "bp-bench: Backplane ops on each backend against a same-run reference (cblas_sgemm, memcpy)\n"
    "\n"
    "  bp-bench [--device SPEC]... [--threads N] [--plugin-path DIR]... [--trace FILE.json] [--benchmark_* flags]\n"
    "\n"
    "  --device SPEC       a backend to benchmark, any spec bp_backend_new takes (repeatable).\n"
    "                      Default: cpu:threads=N, and blas:threads=N when the blas plugin is found.\n"
    "  --threads N         threads of the references (OpenBLAS sgemm, memcpy) and of the default\n"
    "                      devices. Default: the number of hardware threads.\n"
    "  --plugin-path DIR   also search DIR for libbp-*.so (repeatable).\n"
    "  --trace FILE        write a Chrome trace-event JSON of every benchmarked graph to FILE\n"
    "                      (Perfetto opens it); narrow it with --benchmark_filter and\n"
    "                      --benchmark_min_time, every iteration is recorded.\n"
    "  --version           print the version and exit.\n"
    "\n"
    "The summary also gives each case against the machine, measured in the same run with the\n"
    "same threads: the FMA peak of the widest vector ISA, memcpy (DRAM) and a read-only pass\n"
    "(DRAM read, the roofline of products that stream weights) over twice the last-level\n"
    "cache, at least 256 MiB. The _dram products take turns over as many copies of their\n"
    "weights as that size holds, so each call reads its weights from DRAM.\n"
    "\n"
    "Products with model weight types (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, Q5_K, BF16, F16) run only when the filter\n"
    "names them: --benchmark_filter=Quant/ (against sgemm on the f32 product of the same shape).\n"
    "\n"
    "Google Benchmark's flags follow (e.g. --benchmark_filter=REGEX, --benchmark_min_time=SECONDS,\n"
    "--benchmark_repetitions=N, --benchmark_format=json, --benchmark_out=FILE).\n\n";

// The value of "--flag VALUE" or "--flag=VALUE" at argv[i] (advancing i past
// a separate value), or nullptr when argv[i] is not |flag|.
const char *flag_value(int argc, char **argv, int &i, const char *flag, bool &missing) {
  size_t n = std::strlen(flag);
  if (std::strncmp(argv[i], flag, n) != 0) return nullptr;
  if (argv[i][n] == '=') return argv[i] + n + 1;
  if (argv[i][n] != '\0') return nullptr;
  if (i + 1 >= argc) return missing = true, nullptr;
  return argv[++i];
}

// Takes our flags out of argv; the rest goes to Google Benchmark in |rest|.
// Peeks at the benchmark flags that choose the display reporter. False on bad usage.
bool parse(int argc, char **argv, options &opt, std::vector<char *> &rest) {
  rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    bool missing = false;
    if (const char *v = flag_value(argc, argv, i, "--device", missing)) {
      opt.devices.push_back(v);
    } else if (const char *v = flag_value(argc, argv, i, "--plugin-path", missing)) {
      opt.plugin_paths.push_back(v);
    } else if (const char *v = flag_value(argc, argv, i, "--trace", missing)) {
      if (*v == '\0') {
        std::fprintf(stderr, "bp-bench: --trace wants a file name\n");
        return false;
      }
      opt.trace.path = v;
    } else if (const char *v = flag_value(argc, argv, i, "--threads", missing)) {
      char *end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || n < 1 || n > 1024) {
        std::fprintf(stderr, "bp-bench: --threads wants a number in 1..1024, got '%s'\n", v);
        return false;
      }
      opt.threads = static_cast<int>(n);
    } else if (std::strcmp(argv[i], "--version") == 0) {
      std::puts(bp::tools::version_text("bp-bench").c_str());
      std::exit(0);  // nothing started yet
    } else if (missing) {
      std::fprintf(stderr, "bp-bench: %s needs a value\n", argv[i]);
      return false;
    } else {
      if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) std::fputs(kUsage, stdout);
      if (std::strncmp(argv[i], "--benchmark_format=", 19) == 0) opt.format = argv[i] + 19;
      if (std::strncmp(argv[i], "--benchmark_filter=", 19) == 0) opt.filter = argv[i] + 19;
      if (std::strncmp(argv[i], "--benchmark_color=", 18) == 0) opt.color = argv[i] + 18;
      if (std::strncmp(argv[i], "--benchmark_counters_tabular=", 29) == 0) {
        std::string v = argv[i] + 29;
        opt.tabular = v == "true" || v == "yes" || v == "1";
      }
      rest.push_back(argv[i]);
    }
  }
  rest.push_back(nullptr);
  return true;
}

// The display reporter Google Benchmark would make for these flags (console
// or JSON; the CSV reporter is deprecated).
std::unique_ptr<benchmark::BenchmarkReporter> make_display_reporter(const options &opt) {
  if (opt.format == "json") return std::make_unique<benchmark::JSONReporter>();
  bool color =
      opt.color == "auto" ? isatty(STDOUT_FILENO) != 0 : opt.color == "true" || opt.color == "yes" || opt.color == "1";
  int oo =
      (color ? benchmark::ConsoleReporter::OO_Color : 0) | (opt.tabular ? benchmark::ConsoleReporter::OO_Tabular : 0);
  return std::make_unique<benchmark::ConsoleReporter>(static_cast<benchmark::ConsoleReporter::OutputOptions>(oo));
}

struct backend_slot {
  std::string spec;
  bp_backend *be = nullptr;
};

}  // namespace

int main(int argc, char **argv) {
  options opt;
  std::vector<char *> rest;
  if (!parse(argc, argv, opt, rest)) return 2;
  if (opt.format != "console" && opt.format != "json") {  // the CSV reporter is deprecated
    std::fprintf(stderr, "bp-bench: --benchmark_format must be console or json\n");
    return 2;
  }
  if (opt.threads == 0) opt.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string threads = std::to_string(opt.threads);
  // Before any plugin work: --help prints Google Benchmark's usage and exits here.
  int bench_argc = static_cast<int>(rest.size()) - 1;
  benchmark::Initialize(&bench_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, rest.data())) return 2;
  // Before the first backend, so that --trace wins over BP_TRACE.
  if (std::string why = bp::tools::trace_begin(opt.trace); !why.empty()) {
    std::fprintf(stderr, "bp-bench: --trace: %s\n", why.c_str());
    return 1;
  }

  for (const std::string &dir : opt.plugin_paths)
    if (bp_registry_add_path(dir.c_str()) != BP_OK)
      std::fprintf(stderr, "bp-bench: --plugin-path %s: %s\n", dir.c_str(), bp_last_error());
  bp_registry_discover();

  // Backends, created once and kept for the whole run.
  std::vector<backend_slot> backends;
  const bool defaults = opt.devices.empty();
  if (defaults) {
    opt.devices.push_back("cpu:threads=" + threads);
    if (bp_plugin *blas = nullptr; bp_registry_find_plugin("blas", &blas) == BP_OK)
      opt.devices.push_back("blas:threads=" + threads);
  }
  for (const std::string &spec : opt.devices) {
    backend_slot slot{spec, nullptr};
    if (bp_backend_new(spec.c_str(), &slot.be) != BP_OK) {
      std::fprintf(stderr, "bp-bench: cannot create backend '%s': %s\n", spec.c_str(), bp_last_error());
      if (!defaults) return 1;
      continue;
    }
    backends.push_back(slot);
  }
  if (backends.empty()) {
    std::fprintf(stderr, "bp-bench: no backend to benchmark (run bp-devices to see what was found)\n");
    return 1;
  }

  // Per case: each backend that supports it, then the reference.
  std::vector<bp::bench::entry> entries;
  std::vector<std::string> unsupported(backends.size());  // per backend: "RMS_NORM 4096x512, ..."
  for (const bp::bench::op_case &c : bp::bench::default_cases()) {
    std::string why;
    double work = bp::bench::case_work(c, why);
    if (work <= 0) {
      std::fprintf(stderr, "bp-bench: %s %s: %s\n", c.group().c_str(), c.shape().c_str(), why.c_str());
      return 1;
    }
    std::string ref_name =
        c.group() + "/" + c.shape() + "/" + (c.counts_flops() ? "ref:sgemm" : "ref:memcpy") + ":threads=" + threads;
    for (size_t i = 0; i < backends.size(); ++i) {
      if (!bp::bench::backend_supports(backends[i].be, c, why)) {
        unsupported[i] += (unsupported[i].empty() ? "" : ", ") + c.group() + " " + c.shape();
        continue;
      }
      entries.push_back(bp::bench::register_backend_bench(c, work, backends[i].be, backends[i].spec, ref_name));
    }
    entries.push_back(bp::bench::register_reference_bench(c, work, opt.threads));
  }
  bp::bench::register_graph_benches();
  bp::bench::register_remote_benches();
  // The quantized products, when the filter asks for them (a plain run stays short).
  if (opt.filter.find("Quant") != std::string::npos) {
    std::set<std::string> refs;
    for (const bp::bench::op_case &c : bp::bench::quant_cases()) {
      std::string why;
      const bp::bench::op_case r = bp::bench::quant_reference(c);
      const bool has_ref = r.a_type == BP_TYPE_F32;
      const double work = bp::bench::case_work(c, why);
      if (work <= 0) {
        std::fprintf(stderr, "bp-bench: %s %s: %s\n", c.group().c_str(), c.shape().c_str(), why.c_str());
        return 1;
      }
      const std::string ref_name =
          has_ref ? "Quant/" + r.group() + "/" + r.shape() + "/ref:sgemm:threads=" + threads : "-";
      for (size_t i = 0; i < backends.size(); ++i) {
        if (!bp::bench::backend_supports(backends[i].be, c, why)) {
          unsupported[i] += (unsupported[i].empty() ? "" : ", ") + c.group() + " " + c.shape();
          continue;
        }
        entries.push_back(bp::bench::register_backend_bench(c, work, backends[i].be, backends[i].spec, ref_name));
      }
      if (has_ref && refs.insert(ref_name).second)
        entries.push_back(bp::bench::register_reference_bench(r, work, opt.threads, "Quant/"));
    }
  }
  for (size_t i = 0; i < backends.size(); ++i)
    if (!unsupported[i].empty())
      std::fprintf(stderr, "bp-bench: %s does not support %s: not benchmarked there\n", backends[i].spec.c_str(),
                   unsupported[i].c_str());

  std::string specs;
  for (const backend_slot &b : backends) specs += (specs.empty() ? "" : ";") + b.spec;
  benchmark::AddCustomContext("bp-bench backends", specs);
  benchmark::AddCustomContext("bp-bench reference threads", threads);
  // Which sgemm the MUL_MAT references are: OpenBLAS picks its kernel by CPU
  // and OPENBLAS_CORETYPE, so the ratios depend on it.
  const std::string corename = bp::bench::openblas_corename();
  benchmark::AddCustomContext("bp-bench openblas core", corename);
  const char *isa_env = std::getenv("BP_CPU_ISA");
  benchmark::AddCustomContext("bp-bench BP_CPU_ISA", isa_env && *isa_env ? isa_env : "(unset: best available)");

  // The machine references, before and after the benchmarks (the better of
  // the two: a neighbour's load only ever lowers them).
  bp::bench::machine_rate peak = bp::bench::measure_peak(opt.threads);
  bp::bench::machine_rate dram = bp::bench::measure_dram(opt.threads);
  char line[128];
  std::snprintf(line, sizeof line, "%.1f GFLOP/s (%s)", peak.rate / 1e9, peak.what.c_str());
  benchmark::AddCustomContext("bp-bench peak (before)", line);
  std::snprintf(line, sizeof line, "%.1f GB/s (%s)", dram.rate / 1e9, dram.what.c_str());
  benchmark::AddCustomContext("bp-bench dram (before)", line);
  bp::bench::machine_rate dram_read = bp::bench::measure_dram_read(opt.threads);
  std::snprintf(line, sizeof line, "%.1f GB/s (%s)", dram_read.rate / 1e9, dram_read.what.c_str());
  benchmark::AddCustomContext("bp-bench dram read (before)", line);

  bp::bench::collecting_reporter reporter(make_display_reporter(opt));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const std::string trace_error = bp::tools::trace_end(opt.trace);
  if (!trace_error.empty()) std::fprintf(stderr, "bp-bench: --trace: %s\n", trace_error.c_str());
  bp::bench::release_cached_setup();
  bp::bench::release_remote_benches();
  benchmark::Shutdown();
  peak.rate = std::max(peak.rate, bp::bench::measure_peak(opt.threads).rate);
  dram.rate = std::max(dram.rate, bp::bench::measure_dram(opt.threads).rate);
  dram_read.rate = std::max(dram_read.rate, bp::bench::measure_dram_read(opt.threads).rate);

  // The summary goes to stdout after a console report, to stderr after JSON
  // so that stdout stays machine-readable.
  std::string summary = "\nOpenBLAS core: " + corename + "\n" +
                        bp::bench::summary_text(entries, reporter.results(), peak, dram, dram_read);
  std::fputs(summary.c_str(), opt.format == "console" ? stdout : stderr);

  bool failed = false;
  for (const auto &[name, r] : reporter.results()) failed = failed || !r.error.empty();
  failed = failed || !trace_error.empty();
  for (backend_slot &b : backends) bp_backend_free(b.be);
  bp_runtime_shutdown();
  return failed ? 1 : 0;
}
