// machine.cpp: bp-bench's machine ceilings (bench.hpp, measure_peak,
// measure_dram, measure_dram_read): the FMA peak and the read pass of
// common/machine_rates.hpp (which --profile shares), and memcpy far past the
// caches.
#include <algorithm>

#include "common/machine_rates.hpp"
#include "harness.hpp"

namespace bp::bench {

machine_rate measure_peak(int threads) {
  const char *isa = "";
  const double rate = bp::tools::measure_fma_peak(threads, &isa);
  return {rate, std::string("fma ") + isa};
}

machine_rate measure_dram(int threads) {
  const size_t bytes = bp::tools::past_cache_bytes();
  memcpy_setup m(bytes);
  fill_random(m.src.p, m.bytes / 4, 1);
  parallel_memcpy(m, threads);  // faults the destination in
  const double s = bp::tools::best_seconds(5, [&] {
    parallel_memcpy(m, threads);
    benchmark::ClobberMemory();
  });
  return {2 * static_cast<double>(bytes) / s, "memcpy " + bp::tools::mib_label(bytes)};
}

machine_rate measure_dram_read(int threads) {
  return {bp::tools::measure_dram_read(threads), "read " + bp::tools::mib_label(bp::tools::past_cache_bytes())};
}

}  // namespace bp::bench
