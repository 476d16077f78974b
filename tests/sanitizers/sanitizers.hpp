// sanitizers.hpp: which sanitizer this test binary is built with, for gcc
// (__SANITIZE_ADDRESS__, __SANITIZE_THREAD__) and clang (__has_feature),
// as BP_TEST_ASAN and BP_TEST_TSAN (0 or 1).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define BP_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BP_TEST_ASAN 1
#endif
#endif
#ifndef BP_TEST_ASAN
#define BP_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define BP_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BP_TEST_TSAN 1
#endif
#endif
#ifndef BP_TEST_TSAN
#define BP_TEST_TSAN 0
#endif
