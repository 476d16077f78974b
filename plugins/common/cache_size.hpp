// cache_size.hpp: the size of the largest cache the host's first CPU has, as
// Linux reports it in sysfs (/sys/devices/system/cpu/cpu0/cache/index*/size).
// Header-only, so the cpu plugin (which outputs to stream past the caches)
// and the tools (how far a pass must go to measure DRAM) read it the same way.
//
// Not sysconf(_SC_LEVEL3_CACHE_SIZE): on a 2-core Zen 4 VM it said 320 MiB
// where sysfs and lscpu say 32 MiB.
#ifndef BP_PLUGIN_COMMON_CACHE_SIZE_HPP_
#define BP_PLUGIN_COMMON_CACHE_SIZE_HPP_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace bp::plugins {

// One sysfs size file ("32768K", "2M", ...) in bytes; 0 when unreadable.
inline int64_t read_cache_size(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "r");
  if (!f) return 0;
  char text[32] = {};
  const bool got = std::fgets(text, sizeof text, f) != nullptr;
  std::fclose(f);
  if (!got) return 0;
  char *end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || value <= 0) return 0;
  switch (*end) {
    case 'K':
      return value << 10;
    case 'M':
      return value << 20;
    case 'G':
      return value << 30;
    default:
      return value;
  }
}

// The largest of cpu0's caches in bytes (the last level); 0 when sysfs says
// nothing (another OS, a container without /sys).
inline int64_t largest_cache_bytes() {
  int64_t largest = 0;
  for (int i = 0; i < 8; ++i) {
    const int64_t size = read_cache_size("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    largest = size > largest ? size : largest;
  }
  return largest;
}

}  // namespace bp::plugins

#endif  // BP_PLUGIN_COMMON_CACHE_SIZE_HPP_
