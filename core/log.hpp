// log.hpp: the one log sink of the core and every plugin (core/log.cpp;
// not installed): spdlog underneath, the level and callback of backplane.h.
#pragma once

#include <string>

#include "backplane/backplane.h"

namespace bp::core {

void log(bp_log_level level, const char *source, const std::string &message);
void logf(bp_log_level level, const char *source, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool log_enabled(bp_log_level level);

}  // namespace bp::core
