// error.cpp: the thread's last error and status names.
#include <cstdio>
#include <cstring>
#include <string>

#include "core/internal.hpp"

namespace {
thread_local std::string g_last_error;

const char *const k_status_names[BP_STATUS_COUNT_] = {
    "OK",          "INVALID_ARGUMENT",     "NOT_FOUND",          "UNAVAILABLE",
    "INCOMPATIBLE", "UNIMPLEMENTED",       "OUT_OF_HOST_MEMORY", "OUT_OF_DEVICE_MEMORY",
    "DEVICE_LOST", "ALREADY_EXISTS",       "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
    "INTERNAL",
};
}  // namespace

namespace bp::core {

bp_status set_error(bp_status code, const std::string &message) {
  try {
    g_last_error = message;
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
  // The plugin may have left the buffer unterminated: never read past it.
  std::string detail(err.message, strnlen(err.message, sizeof err.message));
  if (detail.empty()) detail = std::string("plugin returned ") + bp_status_name(code) + " without a message";
  return set_error(code, context.empty() ? detail : context + ": " + detail);
}

}  // namespace bp::core

extern "C" {

BP_API const char *bp_last_error(void) { return g_last_error.c_str(); }

BP_API void bp_clear_error(void) { g_last_error.clear(); }

BP_API const char *bp_status_name(bp_status status) {
  if (status < 0 || status >= BP_STATUS_COUNT_) return "UNKNOWN_STATUS";
  return k_status_names[status];
}

}  // extern "C"
