// harness.hpp: what bp-bench's benchmark files share (internal to the tool):
// the setup a benchmark keeps between calls of its body, host arrays, random
// fills, threads and the rate counter.
//
//   backend_bench.cpp  the benchmark bodies that run a case on a backend
//   references.cpp     the same-run references (OpenBLAS sgemm, memcpy)
//   machine.cpp        the machine's ceilings (FMA peak, DRAM bandwidth)
//   cases.cpp          the case list and the cases' names
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "common/splitmix64.hpp"

namespace bp::bench {

// ---------------------------------------------------------------------------
// Setup kept between calls of one benchmark's body.

struct setup {
  virtual ~setup() = default;
};

// The setup kept for benchmark |name|; NULL, after freeing any other
// benchmark's setup, when none is (so only one is alive at a time).
setup *kept_setup(const std::string &name);
// Keeps |s| as benchmark |name|'s setup.
void keep_setup(const std::string &name, std::unique_ptr<setup> s);

// The setup of benchmark |name|: the cached one, else |make|'s (the previous
// benchmark's setup is freed first, so only one is alive at a time). NULL
// with |err| set when |make| fails.
template <class T>
T *cached_setup(const std::string &name, const std::function<std::unique_ptr<T>(std::string &)> &make,
                std::string &err) {
  if (setup *kept = kept_setup(name)) return static_cast<T *>(kept);
  std::unique_ptr<T> s;
  try {
    s = make(err);
  } catch (const std::exception &e) {  // bad_alloc from the host arrays
    err = std::string("setting up: ") + e.what();
  }
  if (!s) return nullptr;
  T *raw = s.get();
  keep_setup(name, std::move(s));
  return raw;
}

using rng = bp::tools::splitmix64;

// Host memory aligned like the plugins' buffers (64 bytes).
struct aligned_floats {
  float *p = nullptr;
  explicit aligned_floats(size_t n);
  ~aligned_floats();
  aligned_floats(const aligned_floats &) = delete;
  aligned_floats &operator=(const aligned_floats &) = delete;
};

void fill_random(float *p, size_t n, uint64_t seed);

std::string api_error(const char *what);

// The benchmark's rate counter: |work| flops (MUL_MAT) or bytes per iteration.
void set_rate_counter(benchmark::State &state, const op_case &c, double work);

// ---------------------------------------------------------------------------
// Threads and memcpy (the memcpy reference and the DRAM ceiling).

// memcpy of half the op's bytes, so the bytes read + written equal the op's.
struct memcpy_setup : setup {
  size_t bytes;
  aligned_floats src, dst;
  explicit memcpy_setup(size_t n) : bytes(n), src(n / 4 + 1), dst(n / 4 + 1) {}
};

// Runs part(i) for every i in [0, threads) at once, part 0 on the calling
// thread, and returns when all have.
template <class F>
void on_threads(int threads, F part) {
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(part, i);
  part(0);
  for (auto &t : pool) t.join();
}

// Slice |i| of [0, total) cut into |threads| slices whose length is a
// multiple of |align|: [*begin, *end).
void slice_of(size_t total, int threads, int i, size_t align, size_t *begin, size_t *end);

// Copies |s| split into |threads| slices, one per thread (the caller's included).
void parallel_memcpy(memcpy_setup &s, int threads);

}  // namespace bp::bench
