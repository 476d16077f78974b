// report.cpp: failf.
#include "report.hpp"

#include <cstdarg>
#include <cstdio>

namespace bp::model {

bp_status failf(bp_status status, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return fail(status, buf);
}

}  // namespace bp::model
