// machine_rates.hpp: the host CPU's two ceilings, measured in-process: the
// FMA peak of its widest vector ISA (a register-only loop, FLOP/s) and a
// read-only pass far past the caches (the DRAM read rate, bytes/s), each
// the best of five runs on |threads| threads. bp-bench puts its figures
// beside them; --profile divides the achieved rates by them.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cache_size.hpp"  // plugins/common: the sysfs reader the cpu plugin uses too

namespace bp::tools {

// Rounds of the peak loop per thread per run: ~2^26 FMA instructions, ~10 ms
// on a 3.5 GHz core with two FMA pipes, so starting the threads costs well
// under 1%.
constexpr int64_t kPeakRounds = int64_t{1} << 22;
constexpr int kPeakAccumulators = 16;  // 4 cycles of latency x 2 pipes x 2 for slack
// The smallest pass that counts as "far past the caches".
constexpr size_t kMinPastCacheBytes = size_t{256} << 20;
// The largest: machines with more cache than half of this are rare, and the
// pass must fit in memory.
constexpr size_t kMaxPastCacheBytes = size_t{4} << 30;

// Bytes a pass must cover so that none of it is still in the caches when it
// starts again: twice the last-level cache Linux reports in sysfs, at least
// 256 MiB, at most 4 GiB, in whole MiB. Servers with 260-512 MiB of L3
// exist, and on them a 256 MiB pass would measure the cache.
inline size_t past_cache_bytes() {
  const int64_t llc = bp::plugins::largest_cache_bytes();
  size_t bytes = llc > 0 ? 2 * static_cast<size_t>(llc) : 0;
  bytes = (bytes + (size_t{1} << 20) - 1) >> 20 << 20;
  return std::min(kMaxPastCacheBytes, std::max(kMinPastCacheBytes, bytes));
}

// "520 MiB": a byte count for the tools' labels.
inline std::string mib_label(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// acc = acc * x + y on independent registers: nothing but FMAs and a loop
// branch, no memory. Returns a sum so the work is kept.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) inline float peak_loop_avx512(int64_t rounds) {
  __m512 acc[kPeakAccumulators];
  for (int i = 0; i < kPeakAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.5f), y = _mm512_set1_ps(0.5f);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kPeakAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kPeakAccumulators; ++i) s = _mm512_add_ps(s, acc[i]);
  float f[16];  // (not _mm512_reduce_add_ps: GCC 12 warns inside it)
  _mm512_storeu_ps(f, s);
  float sum = 0;
  for (float v : f) sum += v;
  return sum;
}

__attribute__((target("avx2,fma"))) inline float peak_loop_avx2(int64_t rounds) {
  // 12 of the 16 ymm registers: enough for 2 pipes x 4 cycles, no spills.
  constexpr int n = 12;
  __m256 acc[n];
  for (int i = 0; i < n; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.5f), y = _mm256_set1_ps(0.5f);
  for (int64_t r = 0; r < rounds * kPeakAccumulators / n; ++r) {
#pragma GCC unroll 12
    for (int i = 0; i < n; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  __m256 s = acc[0];
  for (int i = 1; i < n; ++i) s = _mm256_add_ps(s, acc[i]);
  float f[8];
  _mm256_storeu_ps(f, s);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#endif

// Baseline x86-64 has no FMA: a multiply and an add (two FLOPs) per lane.
inline float peak_loop_sse(int64_t rounds) {
  typedef float v4f __attribute__((vector_size(16)));
  constexpr int n = 12;
  v4f acc[n];
  for (int i = 0; i < n; ++i) acc[i] = v4f{} + static_cast<float>(i);
  const v4f x = v4f{} + 0.5f, y = v4f{} + 0.5f;
  for (int64_t r = 0; r < rounds * kPeakAccumulators / n; ++r) {
#pragma GCC unroll 12
    for (int i = 0; i < n; ++i) acc[i] = acc[i] * x + y;
  }
  v4f s = acc[0];
  for (int i = 1; i < n; ++i) s += acc[i];
  return s[0] + s[1] + s[2] + s[3];
}

struct peak_isa {
  const char *name;
  float (*loop)(int64_t);
  int lanes;  // floats per vector
};

// The widest vector ISA this CPU runs, whatever BP_CPU_ISA says: the peak is
// the machine's, not the kernels'.
inline peak_isa widest_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return {"avx512", peak_loop_avx512, 16};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2", peak_loop_avx2, 8};
#endif
  return {"sse2", peak_loop_sse, 4};
}

// Runs part(i) for every i in [0, threads) at once, part 0 on the calling
// thread, and returns when all have.
template <class F>
void run_on_threads(int threads, F part) {
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(part, i);
  part(0);
  for (auto &t : pool) t.join();
}

// Best of |tries| timings of |body| in seconds: other processes on a shared
// machine only ever slow a run down, so the fastest is the machine's.
template <class F>
double best_seconds(int tries, F &&body) {
  double best = 1e30;
  for (int t = 0; t < tries; ++t) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// FLOP/s of the FMA loop on |threads| threads; *isa names the ISA it used.
inline double measure_fma_peak(int threads, const char **isa_name = nullptr) {
  const peak_isa isa = widest_isa();
  std::vector<float> sink(static_cast<size_t>(threads));
  const double s = best_seconds(5, [&] {
    run_on_threads(threads, [&](int i) { sink[static_cast<size_t>(i)] = isa.loop(kPeakRounds); });
    // The sums are read, so the loops are kept.
    volatile float keep = sink[0];
    (void)keep;
  });
  if (isa_name) *isa_name = isa.name;
  return 2.0 * isa.lanes * kPeakAccumulators * static_cast<double>(kPeakRounds) * threads / s;
}

// Bytes/s of a read-only pass over past_cache_bytes() split over |threads|.
inline double measure_dram_read(int threads) {
  const size_t total = past_cache_bytes(), words = total / sizeof(uint64_t);
  auto *p = static_cast<uint64_t *>(std::aligned_alloc(64, total));
  if (p == nullptr) return 0;
  for (size_t w = 0; w < words; ++w) p[w] = w * 0x9e3779b97f4a7c15ull;  // faults every page in
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  // Eight independent sums per thread: enough loads in flight for DRAM on
  // any ISA; the sums are kept so the reads are not optimised away.
  auto read = [&](int i) {
    const size_t per = words / static_cast<size_t>(threads) / 8 * 8;
    const size_t at = per * static_cast<size_t>(i), end = i + 1 == threads ? words : at + per;
    uint64_t s[8] = {};
    for (size_t w = at; w + 8 <= end; w += 8)
      for (int j = 0; j < 8; ++j) s[j] += p[w + j];
    sums[static_cast<size_t>(i)] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
  };
  const double s = best_seconds(5, [&] {
    run_on_threads(threads, read);
    volatile uint64_t keep = sums[0];
    (void)keep;
  });
  std::free(p);
  return static_cast<double>(total) / s;
}

}  // namespace bp::tools
