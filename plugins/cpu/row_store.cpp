// row_store.cpp: which outputs the row kernels write past the caches.
//
// An output at least as large as the last-level cache cannot be in it when
// the next op reads it, so keeping it there only costs: a plain store first
// reads every line it writes (3 bytes of DRAM traffic for every 2 an op like
// RMS_NORM needs). Such outputs are written with non-temporal stores
// (row_store::streamed, row_math.hpp). On the 2-core Zen 4 VM that took
// RMS_NORM over 64 MiB from 33.4 to 43.3 GB/s and ADD from 32.6 to 40.6
// (bp-bench, medians of 4 alternating rounds x 2).
//
// The threshold is the size of the largest cache cpu0 has, as Linux reports
// it in sysfs (cache_size.hpp), 32 MiB when sysfs says nothing.
// BP_CPU_STREAM_MIN_BYTES=N overrides it (0 streams every dense F32 output,
// so the tests can run the streamed loops on small tensors).
#include <cerrno>
#include <cstdlib>

#include "cache_size.hpp"
#include "kernels.hpp"

namespace bp::cpu {
namespace {

constexpr int64_t kDefaultMinBytes = int64_t{32} << 20;

// BP_CPU_STREAM_MIN_BYTES as a byte count; false when unset or not one.
bool min_bytes_from_env(int64_t *out) {
  const char *v = secure_getenv("BP_CPU_STREAM_MIN_BYTES");
  if (!v || !*v) return false;
  char *end = nullptr;
  errno = 0;
  const long long value = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0) return false;
  *out = value;
  return true;
}

}  // namespace

int64_t stream_min_bytes() {
  static const int64_t bytes = [] {
    int64_t b;
    if (min_bytes_from_env(&b)) return b;
    b = plugins::largest_cache_bytes();
    return b > 0 ? b : kDefaultMinBytes;
  }();
  return bytes;
}

const char *stream_env_warning() {
  static const std::string text = [] {
    const char *v = secure_getenv("BP_CPU_STREAM_MIN_BYTES");
    int64_t unused;
    if (!v || !*v || min_bytes_from_env(&unused)) return std::string();
    return std::string("BP_CPU_STREAM_MIN_BYTES=") + v +
           " is not a byte count (a whole number, 0 or more) and is ignored (the cache size decides)";
  }();
  return text.c_str();
}

row_store row_store_for(const bp_tensor *t) {
  const int64_t bytes = bp_tensor_nelements(t) * static_cast<int64_t>(sizeof(float));
  return f32_rows(t) && bytes >= stream_min_bytes() ? row_store::streamed : row_store::cached;
}

}  // namespace bp::cpu
