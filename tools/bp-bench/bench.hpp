// bench.hpp: the pieces of bp-bench (Google Benchmark over Backplane backends).
//
// What it is: the benchmark cases (one op at one shape), the benchmarks that
// run a case on a backend or on its same-run reference (cblas_sgemm for
// MUL_MAT, memcpy of the same bytes for the rest), the two machine
// references (the FMA peak of the CPU's widest vector ISA, memcpy at DRAM
// size), and the reporter that prints the ratio summary after the run. What it is not: a test; results are
// only sanity-checked (a few sampled outputs) so a broken kernel cannot post
// a good figure.
#pragma once

#include <benchmark/benchmark.h>

#include <backplane/backplane.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace bp::bench {

// Row-op tensors of at least this many bytes are "DRAM" cases (far past the
// last-level cache); their group names end in "_dram".
constexpr int64_t kDramCaseBytes = int64_t{32} << 20;

enum class op_kind { mul_mat, rms_norm, norm, soft_max, add, mul, scale, silu, gelu };

// One op at one shape. MUL_MAT: a [K, M] (f32, f16 or quantized) x b [K, N] f32 -> [M, N];
// the others: f32 [ne0, ne1] (rows of ne0 elements).
struct op_case {
  op_kind op = op_kind::mul_mat;
  bp_type a_type = BP_TYPE_F32;
  int64_t m = 0, n = 0, k = 0;
  int64_t ne0 = 0, ne1 = 0;
  // Quantized a: false puts it in the device's weight buffer type where it
  // has one (bp_device_weight_buffer_type, as models load it), true keeps
  // the file's layout in the default type (group "..._plain").
  bool plain = false;
  // One of quant_cases(): the group is "Quant/MUL_MAT_<type>" whatever the
  // type (F16 weights too, beside the default run's "MUL_MAT_f16xf32").
  bool weights = false;

  std::string group() const;  // "MUL_MAT_f32", "MUL_MAT_f16xf32", "RMS_NORM", ...
  std::string shape() const;  // "M=1024,N=1024,K=1024" or "4096x512"
  bool counts_flops() const { return op == op_kind::mul_mat; }
  // Bytes of the weights (a), which a product with few rows of b streams
  // from memory once per call: its bound is bandwidth, not FLOPs.
  double weight_bytes() const { return static_cast<double>(bp_type_row_size(a_type, k)) * static_cast<double>(m); }
  // A weights case too large for the cache budget of an in-cache case
  // (group "..._dram"): it is timed taking turns over copies of its weights
  // that together pass the last-level cache.
  bool weights_from_dram() const { return op == op_kind::mul_mat && weights && weight_bytes() > kDramCaseBytes; }
};

// The cases a plain `bp-bench` runs, in order (cases.cpp).
std::vector<op_case> default_cases();

// MUL_MAT with the weight types of model files (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K,
// Q5_K, BF16, F16: groups "Quant/MUL_MAT_<type>"), run only when --benchmark_filter names "Quant"
// (quant_cases.cpp): M = K = 4096 with N = 1, 8, 32, 512 against OpenBLAS
// sgemm on the f32 product of the same shape ("Quant/MUL_MAT_f32"), and
// N = 1 at M = 32768 ("_dram": weights past the last-level cache, so the
// product streams them from DRAM on every call; no sgemm of 512 MiB).
std::vector<op_case> quant_cases();
// The reference a quantized case is measured against: |c| with f32 weights
// ("Quant/MUL_MAT_f32"), or none (a_type stays quantized) for the _dram ones.
op_case quant_reference(const op_case &c);

// What one registered benchmark measures; the summary pairs each backend
// entry with its reference through |ref|.
struct entry {
  std::string name;         // the registered name: group/shape/who
  std::string group;        // op_case::group()
  std::string shape;        // op_case::shape()
  std::string who;          // the backend spec, or "ref:sgemm:threads=N" / "ref:memcpy:threads=N"
  std::string ref;          // the reference's name; "" when this entry is a reference
  bool flops = true;        // the rate is FLOP/s (else bytes read + written per second)
  double work = 0;          // flops or bytes per iteration (bp_op_flops / bp_op_bytes)
  double weight_bytes = 0;  // MUL_MAT: bytes of a (op_case::weight_bytes); else 0
};

// backend_bench.cpp: the benchmarks of a case on a backend.

// Flops (MUL_MAT) or bytes read + written of |c|, from the core's own
// estimates (bp_op_flops, bp_op_bytes) of the graph's node. 0 with |why| set
// when the graph cannot be built.
double case_work(const op_case &c, std::string &why);

// True when |be| accepts the case's node (bp_backend_supports_op); |why| says
// why not otherwise.
bool backend_supports(bp_backend *be, const op_case &c, std::string &why);

// Registers the benchmark of |c| on |be| (borrowed; must outlive the run).
entry register_backend_bench(const op_case &c, double work, bp_backend *be, const std::string &spec,
                             const std::string &ref_name);
// references.cpp: registers the reference of |c| with |threads| threads
// (OpenBLAS threads for sgemm, memcpy split over that many std::threads).
// |prefix| goes before the name ("Quant/": the quantized cases' references).
entry register_reference_bench(const op_case &c, double work, int threads, const std::string &prefix = "");

// machine.cpp: the machine references, measured with |threads| threads
// outside Google Benchmark (so a --benchmark_filter never drops them), best
// of 5 runs: a register-only FMA loop of the widest vector ISA the CPU has
// (the compute ceiling, FLOP/s), and memcpy far past the caches (the DRAM
// ceiling, bytes read + written per second), and a read-only pass far past
// them (the ceiling of a product that streams its weights from DRAM, bytes
// read per second). "Far past": common/machine_rates.hpp's
// past_cache_bytes(), twice the last-level cache and at least 256 MiB.
struct machine_rate {
  double rate = 0;
  std::string what;  // "fma avx512", "memcpy 520 MiB", "read 520 MiB"
};
machine_rate measure_peak(int threads);
machine_rate measure_dram(int threads);
machine_rate measure_dram_read(int threads);

// Which kernel OpenBLAS chose (openblas_get_corename: "Haswell", "SkylakeX", ...;
// references.cpp).
std::string openblas_corename();

// Frees the buffers, graphs and host arrays the last benchmark kept between
// its calls (the benchmark body is called several times per benchmark;
// harness.hpp).
void release_cached_setup();

// graph_cases.cpp: graph registration (graph/build_per_node/N: a DAG of N
// nodes built by N calls of bp_graph_build, N = 1024 .. 65536), fitted to O(N).
void register_graph_benches();

// remote_cases.cpp: transfers to remote:0, a TCP loopback reference and a
// registered graph's round trip, when BP_REMOTE is set (else one skip line).
void register_remote_benches();
// Frees what the remote cases hold (before bp_runtime_shutdown).
void release_remote_benches();

// Result of one benchmark as the summary sees it.
struct result {
  double rate = 0;  // flops or bytes per second (median of repetitions when there are any)
  std::string error;
};

// Forwards everything to |inner| (the console, JSON or CSV reporter) and keeps
// each run's rate counter for the summary.
class collecting_reporter : public benchmark::BenchmarkReporter {
 public:
  explicit collecting_reporter(std::unique_ptr<benchmark::BenchmarkReporter> inner) : inner_(std::move(inner)) {}
  bool ReportContext(const Context &context) override { return inner_->ReportContext(context); }
  void ReportRuns(const std::vector<Run> &runs) override;
  void Finalize() override { inner_->Finalize(); }
  const std::map<std::string, result> &results() const { return results_; }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  std::map<std::string, result> results_;
  std::map<std::string, std::vector<double>> samples_;  // iteration runs per name
};

// The ratio table: one line per backend benchmark that ran, with its rate,
// its reference's rate and the ratio, and its fraction of the machine:
// FLOP/s against |peak| for compute-bound cases, bytes/s against |dram| for
// memory-bound ones, and for a product whose weights DRAM cannot stream
// fast enough to reach the peak, its weight bytes/s against |dram| and
// against |dram_read| (its fraction of that roofline). Empty when nothing ran.
std::string summary_text(const std::vector<entry> &entries, const std::map<std::string, result> &results,
                         const machine_rate &peak, const machine_rate &dram, const machine_rate &dram_read);

}  // namespace bp::bench
