// splitmix64.hpp: the tools' one random number generator.
//
// splitmix64 rather than <random>: the standard distributions differ between
// library implementations, and every tool must turn a seed into the same
// numbers on every platform (bp-run's weights, bp-test-ops' cases, bp-bench's
// inputs).
#pragma once

#include <cstdint>

namespace bp::tools {

struct splitmix64 {
  uint64_t state;

  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // [-1, 1) in steps of 2^-23: every value exact in float.
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-23f - 1.0f; }
  // [0, 1) in steps of 2^-53.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

}  // namespace bp::tools
