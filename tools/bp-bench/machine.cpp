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
  memcpy_setup m(static_cast<size_t>(kDramBytes));
  fill_random(m.src.p, m.bytes / 4, 1);
  parallel_memcpy(m, threads);  // faults the destination in
  const double s = bp::tools::best_seconds(5, [&] {
    parallel_memcpy(m, threads);
    benchmark::ClobberMemory();
  });
  return {2 * kDramBytes / s, "memcpy 256 MiB"};
}

machine_rate measure_dram_read(int threads) { return {bp::tools::measure_dram_read(threads), "read 256 MiB"}; }

}  // namespace bp::bench
