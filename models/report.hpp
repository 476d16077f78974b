// report.hpp: how the model library reports a failure: a status plus a
// message recorded with bp_report_error, so callers read it through
// bp_last_error like any other Backplane failure.
#pragma once

#include <string>

#include "backplane/backplane.h"

namespace bp::model {

// Records |status| and |message| and returns |status|.
inline bp_status fail(bp_status status, const std::string &message) { return bp_report_error(status, message.c_str()); }

// printf-style variant.
bp_status failf(bp_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Runs |cleanup|, whose frees are Backplane calls that reset the thread's
// error, then reports |status| again with the message that was current
// before: a failure's cause survives the cleanup after it.
template <class Cleanup>
bp_status fail_after(bp_status status, Cleanup &&cleanup) {
  const std::string why = bp_last_error();
  cleanup();
  return fail(status, why);
}

// Clears the thread's last outcome: every public entry starts with it.
inline void begin_call() { bp_report_error(BP_OK, nullptr); }

}  // namespace bp::model
