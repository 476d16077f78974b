// errors.hpp: the core's error recording (core/error.cpp; not installed).
//
// What it is: the thread's last status and message (set_error and its
// variants), the NULL-propagation state of the graph-building calls, and the
// API edge every public entry point opens (api_scope, api_guard), which
// turns C++ exceptions into statuses. Used by core/, registry/ and gguf/.
// What it is not: logging (log.hpp) or handle checks (liveness.hpp).
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "backplane/backplane.h"
#include "backplane/plugin.h"  // bp_error

namespace bp::core {

// Records |message| as this thread's last error and returns |code| (an
// out-of-range code, BP_OK included, is recorded as INTERNAL).
bp_status set_error(bp_status code, const std::string &message);
// printf-style variant.
bp_status set_errorf(bp_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Converts a plugin's bp_error to the thread's last error, prefixed with
// |context| ("vulkan: allocating 64 MiB: "). Returns the plugin's code (or
// INTERNAL if the plugin returned an out-of-range code).
bp_status set_plugin_error(bp_status code, const bp_error &err, const std::string &context);
// The thread's current status (what bp_last_status() returns).
bp_status last_status();
// Moves on with every bp_clear_error(): a context's recorded first
// graph-building failure counts only while its epoch is the current one.
uint64_t clear_epoch();
// For graph-building calls given a NULL tensor or context: when the call
// before the current public call failed, makes its status and message this
// call's again and returns true (the NULL is that failure's result);
// returns false, changing nothing, when it succeeded.
bool restore_previous_failure();

// The API edge. Every public entry point opens one scope first (BP_API_SCOPE
// or api_guard/api_guard_ptr, which open one): the outermost scope on a
// thread forgets the previous call's outcome, so a successful call leaves
// BP_OK and "" and a failing one only its own message. Nested public calls
// (a failure path that frees a buffer) change nothing on entry.
// NullArgs.EveryDefinitionOpensTheApiScope (tests/core/null_args_test.cpp)
// checks that every definition opens one.
class api_scope {
 public:
  api_scope() noexcept;
  ~api_scope();
  api_scope(const api_scope &) = delete;
  api_scope &operator=(const api_scope &) = delete;
  // Makes the thread state agree with the call's result |st| (outermost
  // scope only): OK clears what a recovered inner step recorded; a failure
  // that recorded nothing still gets a message. Returns |st|.
  bp_status finish(bp_status st) noexcept;
  // For calls that return a pointer: clears when |p| is non-NULL.
  template <typename T>
  T *finish(T *p) noexcept {
    if (p != nullptr) finish_ok();
    return p;
  }

 private:
  void finish_ok() noexcept;
  bool outermost_ = false;
};
#define BP_API_SCOPE() ::bp::core::api_scope bp_api_scope_

// Runs |body| in an api_scope and turns any C++ exception into a status
// (the API barrier).
template <typename Body>
bp_status api_guard(Body &&body) noexcept {
  api_scope scope;
  try {
    return scope.finish(body());
  } catch (const std::bad_alloc &) {
    return set_error(BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
  } catch (const std::exception &e) {
    return set_error(BP_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return set_error(BP_ERR_INTERNAL, "internal error: unknown exception");
  }
}
// Same for entry points returning a pointer: nullptr on exception.
template <typename T, typename Body>
T *api_guard_ptr(Body &&body) noexcept {
  api_scope scope;
  try {
    return scope.finish(static_cast<T *>(body()));
  } catch (const std::bad_alloc &) {
    set_error(BP_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
  } catch (const std::exception &e) {
    set_error(BP_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    set_error(BP_ERR_INTERNAL, "internal error: unknown exception");
  }
  return nullptr;
}

}  // namespace bp::core
