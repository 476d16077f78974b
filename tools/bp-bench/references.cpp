// references.cpp: bp-bench's same-run references, each timed like a backend
// benchmark: OpenBLAS sgemm for MUL_MAT, memcpy of the same bytes for the
// other ops (bench.hpp, register_reference_bench); and which kernel OpenBLAS
// chose.
#include <cblas.h>

#include "harness.hpp"

namespace bp::bench {
namespace {

// sgemm exactly as the blas plugin calls it: D (N x M) = B (N x K) * A^T, A
// being M x K row-major, all f32 (an f16 case's reference is the f32 product
// of the same shape).
struct sgemm_setup : setup {
  aligned_floats a, b, d;
  explicit sgemm_setup(const op_case &c)
      : a(static_cast<size_t>(c.m * c.k)), b(static_cast<size_t>(c.n * c.k)), d(static_cast<size_t>(c.m * c.n)) {}
};

// Threads as OpenBLAS knows them: sets |threads| and restores the previous
// count on scope exit, so the blas plugin's cached count stays true.
struct openblas_threads {
  int prev;
  explicit openblas_threads(int threads) : prev(openblas_get_num_threads()) { openblas_set_num_threads(threads); }
  ~openblas_threads() { openblas_set_num_threads(prev); }
};

void sgemm(const op_case &c, sgemm_setup &s) {
  const int M = static_cast<int>(c.m), N = static_cast<int>(c.n), K = static_cast<int>(c.k);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, K, 1.0f, s.b.p, K, s.a.p, K, 0.0f, s.d.p, M);
}

void run_sgemm(benchmark::State &state, const op_case &c, double work, int threads, const std::string &name) {
  std::string err;
  openblas_threads guard(threads);
  sgemm_setup *s = cached_setup<sgemm_setup>(
      name,
      [&](std::string &) {
        auto n = std::make_unique<sgemm_setup>(c);
        fill_random(n->a.p, static_cast<size_t>(c.m * c.k), 1);
        fill_random(n->b.p, static_cast<size_t>(c.n * c.k), 2);
        sgemm(c, *n);  // untimed warm-up, as for the backends
        return n;
      },
      err);
  if (!s) {
    state.SkipWithError(err.c_str());
    return;
  }
  for (auto _ : state) {
    sgemm(c, *s);
    benchmark::ClobberMemory();
  }
  set_rate_counter(state, c, work);
}

void run_memcpy(benchmark::State &state, const op_case &c, double work, int threads, const std::string &name) {
  std::string err;
  memcpy_setup *s = cached_setup<memcpy_setup>(
      name,
      [&](std::string &) {
        auto n = std::make_unique<memcpy_setup>(static_cast<size_t>(work / 2));
        fill_random(n->src.p, n->bytes / 4, 1);
        parallel_memcpy(*n, threads);  // untimed: faults the destination in
        return n;
      },
      err);
  if (!s) {
    state.SkipWithError(err.c_str());
    return;
  }
  for (auto _ : state) {
    parallel_memcpy(*s, threads);
    benchmark::ClobberMemory();
  }
  set_rate_counter(state, c, work);
}

}  // namespace

entry register_reference_bench(const op_case &c, double work, int threads, const std::string &prefix) {
  std::string who = std::string(c.counts_flops() ? "ref:sgemm" : "ref:memcpy") + ":threads=" + std::to_string(threads);
  entry e{
      prefix + c.group() + "/" + c.shape() + "/" + who, prefix + c.group(), c.shape(), who, "", c.counts_flops(), work};
  auto *b = c.counts_flops()
                ? benchmark::RegisterBenchmark(e.name.c_str(),
                                               [c, work, threads, name = e.name](benchmark::State &st) {
                                                 run_sgemm(st, c, work, threads, name);
                                               })
                : benchmark::RegisterBenchmark(e.name.c_str(), [c, work, threads, name = e.name](benchmark::State &st) {
                    run_memcpy(st, c, work, threads, name);
                  });
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
  return e;
}

std::string openblas_corename() {
  const char *name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace bp::bench
