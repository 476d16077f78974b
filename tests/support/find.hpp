// find.hpp: the find functions as expressions, for tests that look things up
// on the way to what they check (the status form is tested where the find
// itself is the subject: tests/core/context_test.cpp, tests/registry).
#ifndef BP_TESTS_SUPPORT_FIND_HPP_
#define BP_TESTS_SUPPORT_FIND_HPP_

#include "backplane/backplane.h"

namespace bp_test {

// The tensor called |name|, or nullptr.
inline bp_tensor *find_tensor(const bp_context *ctx, const char *name) {
  bp_tensor *t = nullptr;
  bp_context_find_tensor(ctx, name, &t);
  return t;
}

// The plugin called |name| (loaded on demand), or nullptr.
inline bp_plugin *find_plugin(const char *name) {
  bp_plugin *p = nullptr;
  bp_registry_find_plugin(name, &p);
  return p;
}

}  // namespace bp_test

#endif  // BP_TESTS_SUPPORT_FIND_HPP_
