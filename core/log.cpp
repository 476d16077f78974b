// log.cpp: one sink for the core and every plugin, through spdlog.
//
// BP_LOG=debug|info|warn|error|off sets the first level; an application may
// replace the sink with a callback (bp_log_set_callback).
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/errors.hpp"
#include "core/log.hpp"
#include "core/tensor_util.hpp"

namespace {

struct log_state {
  std::mutex mutex;
  bp_log_callback callback = nullptr;
  void *user_data = nullptr;
  std::shared_ptr<spdlog::logger> logger;
};

std::atomic<int> g_level{-1};  // -1: not read from BP_LOG yet

// True while this thread runs the application's callback (with the mutex
// held). A Backplane call made from inside the callback may log too (every
// recorded error logs at debug level, and a plugin's init logs while the
// registry loads it); locking again would deadlock this thread, so such
// nested lines are dropped, and bp_log_set_callback from inside the callback
// updates the state under the lock this thread already holds.
thread_local bool t_in_callback = false;

log_state &state() {
  // Leaked on purpose: logging may happen during static destruction of the
  // application (docs/failures.md #18), and a destroyed logger would crash.
  static log_state *s = [] {
    auto *st = new log_state;
    st->logger = std::make_shared<spdlog::logger>("backplane", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    st->logger->set_pattern("[backplane %l] %v");
    st->logger->set_level(spdlog::level::trace);
    return st;
  }();
  return *s;
}

int level_from_env() {
  const char *v = std::getenv("BP_LOG");
  if (!v || !*v) return BP_LOG_WARN;
  if (!strcasecmp(v, "debug")) return BP_LOG_DEBUG;
  if (!strcasecmp(v, "info")) return BP_LOG_INFO;
  if (!strcasecmp(v, "warn") || !strcasecmp(v, "warning")) return BP_LOG_WARN;
  if (!strcasecmp(v, "error")) return BP_LOG_ERROR;
  if (!strcasecmp(v, "off")) return BP_LOG_OFF;
  return BP_LOG_WARN;
}

int current_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = level_from_env();
    g_level.store(l, std::memory_order_relaxed);
  }
  return l;
}

spdlog::level::level_enum to_spdlog(bp_log_level level) {
  switch (level) {
    case BP_LOG_DEBUG:
      return spdlog::level::debug;
    case BP_LOG_INFO:
      return spdlog::level::info;
    case BP_LOG_WARN:
      return spdlog::level::warn;
    case BP_LOG_ERROR:
      return spdlog::level::err;
    default:
      return spdlog::level::off;
  }
}

}  // namespace

namespace bp::core {

bool log_enabled(bp_log_level level) { return level < BP_LOG_OFF && static_cast<int>(level) >= current_level(); }

void log(bp_log_level level, const char *source, const std::string &message) {
  if (!log_enabled(level) || t_in_callback) return;
  try {
    log_state &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.callback) {
      struct in_callback {
        in_callback() { t_in_callback = true; }
        ~in_callback() { t_in_callback = false; }
      } mark;
      s.callback(level, source, message.c_str(), s.user_data);
    } else {
      s.logger->log(to_spdlog(level), "{}: {}", source, message);
    }
  } catch (...) {
    // Logging never throws into its caller.
  }
}

void logf(bp_log_level level, const char *source, const char *fmt, ...) {
  if (!log_enabled(level)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  log(level, source, buf);
}

}  // namespace bp::core

extern "C" {

BP_API void bp_log_set_level(bp_log_level level) {
  // A C caller may pass any int: check the integer before any enum load.
  int v = bp::core::enum_value(level);
  if (v < BP_LOG_DEBUG || v > BP_LOG_OFF) v = BP_LOG_OFF;
  g_level.store(v, std::memory_order_relaxed);
}

BP_API bp_log_level bp_log_get_level(void) { return static_cast<bp_log_level>(current_level()); }

BP_API void bp_log_set_callback(bp_log_callback callback, void *user_data) {
  log_state &s = state();
  std::unique_lock<std::mutex> lock(s.mutex, std::defer_lock);
  if (!t_in_callback) lock.lock();  // else this thread holds it, in log()
  s.callback = callback;
  s.user_data = user_data;
}

}  // extern "C"
