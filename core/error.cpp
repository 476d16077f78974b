// error.cpp: the thread's last status and message, the API-edge scope that
// gives every public call the clear-on-success rule, and status names.
//
// The rule (docs/errors.md): each public call's outcome replaces the last
// one. The outermost entry of a call on a thread forgets the previous
// outcome; a failure records its status and message; a success leaves
// BP_OK and "". Graph-building calls given a NULL tensor or context bring
// back the previous call's failure instead, so a chain of builders can be
// checked once at its end.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "abi/call.hpp"
#include "core/errors.hpp"
#include "core/handles.hpp"
#include "core/liveness.hpp"
#include "core/log.hpp"

namespace {

struct thread_state {
  bp_status status = BP_OK;
  std::string message;
  // The outcome of the call before the current outermost one, kept for
  // NULL propagation (restore_previous_failure).
  bp_status prior_status = BP_OK;
  std::string prior_message;
  int depth = 0;  // nested public calls: only the outermost one clears
  ~thread_state();
};

// A thread's state is destroyed when the thread ends, and on the main
// thread before any static object: a static destructor that frees a
// Backplane object (a global holding a backend or a context) still calls
// the API after that. Such late calls get a state of their own, made on
// first need and never freed (the thread is ending). Both flags are
// trivially destructible, so they stay readable to the end.
thread_local bool g_state_gone = false;
thread_local thread_state *g_late_state = nullptr;
thread_local thread_state g_state_storage;

thread_state::~thread_state() { g_state_gone = true; }

thread_state &state() {
  if (!g_state_gone) return g_state_storage;
  if (g_late_state == nullptr) g_late_state = new thread_state;
  return *g_late_state;
}

const char *const k_status_names[BP_STATUS_COUNT_] = {
    "OK",           "INVALID_ARGUMENT", "NOT_FOUND",           "UNAVAILABLE",
    "INCOMPATIBLE", "UNIMPLEMENTED",    "OUT_OF_HOST_MEMORY",  "OUT_OF_DEVICE_MEMORY",
    "DEVICE_LOST",  "ALREADY_EXISTS",   "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
    "INTERNAL",
};

}  // namespace

namespace bp::core {

api_scope::api_scope() noexcept {
  thread_state &s = state();
  outermost_ = s.depth++ == 0;
  if (!outermost_) return;
  // Swapping keeps both strings' storage: no allocation on the hot path.
  s.prior_status = s.status;
  s.prior_message.swap(s.message);
  s.status = BP_OK;
  s.message.clear();
}

api_scope::~api_scope() { --state().depth; }

bp_status api_scope::finish(bp_status st) noexcept {
  if (!outermost_) return st;
  thread_state &s = state();
  if (st == BP_OK) {
    // An internal step may have failed and been recovered from (a fallback):
    // the caller sees the call's outcome, not the step's.
    s.status = BP_OK;
    s.message.clear();
  } else if (s.status == BP_OK) {
    // A failure that recorded nothing is a bug of ours; still say something.
    set_errorf(st, "the call failed with %s without a message (a Backplane bug: please report it)", bp_status_name(st));
  } else {
    s.status = st;  // the returned code wins over an inner step's
  }
  return st;
}

void api_scope::finish_ok() noexcept {
  if (!outermost_) return;
  state().status = BP_OK;
  state().message.clear();
}

bp_status set_error(bp_status code, const std::string &message) {
  if (code <= BP_OK || code >= BP_STATUS_COUNT_) code = BP_ERR_INTERNAL;
  state().status = code;
  try {
    state().message = message;
  } catch (...) {
    // Out of memory while recording: keep the old text rather than throw.
  }
  log(BP_LOG_DEBUG, "core", std::string(bp_status_name(code)) + ": " + message);
  return code;
}

bp_status set_errorf(bp_status code, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return set_error(code, buf);
}

bp_status set_plugin_error(bp_status code, const bp_error &err, const std::string &context) {
  if (code <= BP_OK || code >= BP_STATUS_COUNT_) code = BP_ERR_INTERNAL;
  // The plugin may have left the buffer unterminated: error_text never reads past it.
  std::string detail = bp::abi::error_text(err);
  if (detail.empty()) detail = std::string("plugin returned ") + bp_status_name(code) + " without a message";
  return set_error(code, context.empty() ? detail : context + ": " + detail);
}

bool restore_previous_failure() {
  thread_state &s = state();
  if (s.prior_status == BP_OK) return false;
  s.status = s.prior_status;
  try {
    s.message = s.prior_message;
  } catch (...) {
  }
  return true;
}

bp_status last_status() { return state().status; }

namespace {
std::atomic<uint64_t> g_clear_epoch{0};
}

uint64_t clear_epoch() { return g_clear_epoch.load(std::memory_order_relaxed); }

}  // namespace bp::core

extern "C" {

// The error-state functions neither clear nor set the state: reading it must
// not change it (docs/errors.md lists them).
BP_API const char *bp_last_error(void) { return state().status == BP_OK ? "" : state().message.c_str(); }

BP_API bp_status bp_last_status(void) { return state().status; }

BP_API bp_status bp_report_error(bp_status status, const char *message) {
  if (status == BP_OK) {
    state().status = BP_OK;
    state().message.clear();
    return BP_OK;
  }
  return bp::core::set_error(status, message ? message : "");
}

BP_API void bp_clear_error(void) {
  bp::core::g_clear_epoch.fetch_add(1, std::memory_order_relaxed);
  state().status = BP_OK;
  state().message.clear();
}

BP_API const char *bp_status_name(bp_status status) {
  if (status < 0 || status >= BP_STATUS_COUNT_) return "UNKNOWN_STATUS";
  return k_status_names[status];
}

}  // extern "C"
