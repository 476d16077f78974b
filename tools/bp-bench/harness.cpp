// harness.cpp: see harness.hpp.
#include "harness.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace bp::bench {
namespace {

std::string g_cached_name;
std::unique_ptr<setup> g_cached;

}  // namespace

setup *kept_setup(const std::string &name) {
  if (g_cached && g_cached_name == name) return g_cached.get();
  g_cached.reset();
  g_cached_name.clear();
  return nullptr;
}

void keep_setup(const std::string &name, std::unique_ptr<setup> s) {
  g_cached = std::move(s);
  g_cached_name = name;
}

void release_cached_setup() {
  g_cached.reset();
  g_cached_name.clear();
}

aligned_floats::aligned_floats(size_t n) {
  size_t bytes = (std::max<size_t>(n, 1) * sizeof(float) + 63) / 64 * 64;
  p = static_cast<float *>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
}

aligned_floats::~aligned_floats() { std::free(p); }

void fill_random(float *p, size_t n, uint64_t seed) {
  rng r{seed};
  for (size_t i = 0; i < n; ++i) p[i] = r.uniform();
}

std::string api_error(const char *what) { return std::string(what) + ": " + bp_last_error(); }

void set_rate_counter(benchmark::State &state, const op_case &c, double work) {
  state.counters[c.counts_flops() ? "flops" : "bytes"] =
      benchmark::Counter(work, benchmark::Counter::kIsIterationInvariantRate);
}

void slice_of(size_t total, int threads, int i, size_t align, size_t *begin, size_t *end) {
  const size_t slice = (total / static_cast<size_t>(threads) + align - 1) / align * align;
  *begin = std::min(total, slice * static_cast<size_t>(i));
  *end = std::min(total, *begin + slice);
}

void parallel_memcpy(memcpy_setup &s, int threads) {
  auto *dst = reinterpret_cast<unsigned char *>(s.dst.p);
  const auto *src = reinterpret_cast<const unsigned char *>(s.src.p);
  on_threads(threads, [&](int i) {
    size_t at, end;
    slice_of(s.bytes, threads, i, 64, &at, &end);
    std::memcpy(dst + at, src + at, end - at);
  });
}

}  // namespace bp::bench
