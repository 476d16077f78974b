// enum_value.hpp: reading a C enum argument safely (not installed). Used by
// core/ (through tensor_util.hpp) and gguf/.
#pragma once

#include <cstring>

namespace bp::core {

// The integer behind an enum a C caller passed, read without an enum load:
// C callers may pass any int, and loading an out-of-range value as a C++
// enum is undefined (UBSan's -fsanitize=enum flags it). Validate with this
// before using the value as the enum.
template <typename E>
int enum_value(const E &e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace bp::core
