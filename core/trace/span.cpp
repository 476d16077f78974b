// span.cpp: see span.hpp.
#include "core/trace/span.hpp"

namespace bp::core::trace {

void span::begin(const void *backend_ctx, const char *category, const char *name) {
  ctx_ = backend_ctx;
  category_ = category;
  name_ = name;
  begin_ = now_ns();
}

void span::finish() noexcept {
  try {
    event e;
    e.begin = begin_;
    e.end = now_ns();
    e.lane = kLaneHost;
    e.name = std::move(name_);
    e.category = category_;
    e.args = std::move(args_);
    record(ctx_, std::move(e));
  } catch (...) {
    // Out of memory while tracing: the span is lost, the call is not.
  }
}

}  // namespace bp::core::trace
