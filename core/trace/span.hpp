// span.hpp: a core-side span (a scheduler split, a copy between backends, a
// plan build, a submission, a synchronize) on a backend's "host calls" lane.
//
// Costs one branch when no trace records: the clock is read and the label
// kept only when on() said yes at construction.
#pragma once

#include <string>

#include "core/trace/recorder.hpp"

namespace bp::core::trace {

class span {
 public:
  // |backend_ctx|: the plugin's ctx of the backend whose track gets the span.
  span(const void *backend_ctx, const char *category, const char *name) : active_(on()) {
    if (active_) begin(backend_ctx, category, name);
  }
  ~span() {
    if (active_) finish();
  }
  span(const span &) = delete;
  span &operator=(const span &) = delete;

  bool active() const { return active_; }
  // JSON object members (`"bytes":12`), written only when active().
  std::string &args() { return args_; }
  std::string &name() { return name_; }

 private:
  void begin(const void *backend_ctx, const char *category, const char *name);
  void finish() noexcept;

  bool active_;
  const void *ctx_ = nullptr;
  const char *category_ = nullptr;
  uint64_t begin_ = 0;
  std::string name_, args_;
};

}  // namespace bp::core::trace
