// static_teardown_test.cpp: Backplane called from a static destructor, after
// the main thread's thread_local error state is gone (a global that owns a
// context and frees it at exit). The calls still work and report their
// outcome; under AddressSanitizer a use of the destroyed state would abort
// the child instead of letting it exit 0.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <cstring>

#include "backplane/backplane.h"

namespace {

struct late_user {
  bp_context *ctx = bp_context_new(0);
  ~late_user() {
    bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, -1);
    if (t != nullptr || bp_last_status() != BP_ERR_INVALID_ARGUMENT || std::strlen(bp_last_error()) == 0) _exit(3);
    bp_context_free(ctx);
    if (bp_last_status() != BP_OK || std::strcmp(bp_last_error(), "") != 0) _exit(4);
  }
};

void use_backplane_until_exit() {
  static late_user user;
  // A failure leaves a message long enough to live on the heap: the state's
  // destructor frees it, and a later use of the state would touch freed memory.
  if (bp_tensor_new_1d(user.ctx, BP_TYPE_F32, -5) != nullptr) _exit(2);
  std::exit(0);
}

TEST(StaticTeardown, CallsFromStaticDestructorsStillReportTheirOutcome) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(use_backplane_until_exit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
