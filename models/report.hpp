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

// Clears the thread's last outcome: every public entry starts with it.
inline void begin_call() { bp_report_error(BP_OK, nullptr); }

}  // namespace bp::model
