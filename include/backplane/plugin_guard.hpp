// plugin_guard.hpp: the exception barrier for plugins written in C++.
//
// Every ABI slot a C++ plugin implements wraps its body in bp_plugin_guard so
// that no exception crosses the C boundary (docs/failures.md #10): std::bad_alloc
// becomes OUT_OF_HOST_MEMORY, bp::plugin_error keeps its code, any other
// exception becomes INTERNAL with what() copied into the caller's bp_error.
// Header-only; a plugin links nothing of Backplane.
//
//   static bp_status my_set(void *buf, ..., bp_error *err) noexcept {
//     return bp::plugin_guard(err, [&] { ...; return BP_OK; });
//   }
#ifndef BACKPLANE_PLUGIN_GUARD_HPP_
#define BACKPLANE_PLUGIN_GUARD_HPP_

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "backplane/plugin.h"

namespace bp {

// Throw inside a guarded body to return a specific status with a message.
class plugin_error : public std::runtime_error {
 public:
  plugin_error(bp_status code, const std::string &message) : std::runtime_error(message), code_(code) {}
  bp_status code() const noexcept { return code_; }

 private:
  bp_status code_;
};

// Runs |body| (returning bp_status) and converts any exception to a status.
template <typename Body>
bp_status plugin_guard(bp_error *err, Body &&body) noexcept {
  try {
    return body();
  } catch (const plugin_error &e) {
    return bp_error_set(err, e.code(), e.what());
  } catch (const std::bad_alloc &) {
    return bp_error_set(err, BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
  } catch (const std::exception &e) {
    return bp_error_set(err, BP_ERR_INTERNAL, e.what());
  } catch (...) {
    return bp_error_set(err, BP_ERR_INTERNAL, "unknown exception inside plugin");
  }
}

// For slots that return a value instead of a status: |fallback| on exception.
template <typename T, typename Body>
T plugin_guard_value(T fallback, Body &&body) noexcept {
  try {
    return body();
  } catch (...) {
    return fallback;
  }
}

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_GUARD_HPP_
