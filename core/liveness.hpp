// liveness.hpp: how a handle the API gave out is recognised (core/objects.cpp,
// core/error.cpp; not installed).
//
// What it is: the tag every handle struct starts with, the set of live
// handles (live_mark) that a free function asks before reading a handle, and
// the quarantine that keeps a freed handle's storage marked TAG_DEAD
// (docs/failures.md #24). Used by core/ (handles.hpp) and gguf/ (its own
// handles). What it is not: the handle structs (handles.hpp).
#pragma once

#include <cstdint>

#include "backplane/tensor.h"  // bp_status

namespace bp::core {

// Handle tags catch NULL and wrong-type handles (docs/failures.md #24). The
// GGUF tags are listed here too (gguf/ retires its handles through the
// helpers below), so every tag of libbackplane is unique and named in
// messages; core/ never reads a GGUF struct.
enum handle_tag : uint32_t {
  TAG_PLUGIN = 0x504c5547u,
  TAG_DEVICE = 0x44455643u,
  TAG_BUFT = 0x42554654u,
  TAG_BUFFER = 0x42554646u,
  TAG_BACKEND = 0x42434b4eu,
  TAG_EVENT = 0x45564e54u,
  TAG_CONTEXT = 0x43545854u,
  TAG_GRAPH = 0x47525048u,
  TAG_SCHED = 0x53434844u,
  TAG_GALLOCR = 0x47414c43u,
  TAG_PLAN = 0x504c414eu,
  TAG_GGUF_FILE = 0x47475546u,     // "GGUF"
  TAG_GGUF_WEIGHTS = 0x47475754u,  // "GGWT"
  TAG_GGUF_WRITER = 0x47475752u,   // "GGWR"
  TAG_DEAD = 0xdeadbeefu,
};

// True when |h| is non-NULL and carries |tag| (every handle struct starts
// with its tag, so reading it from a wrong-type handle is defined enough).
template <typename T>
bool handle_ok(const T *h, handle_tag tag) {
  return h != nullptr && h->tag == tag;
}

// INVALID_ARGUMENT for a NULL, freed or wrong-type |what| handle passed to |fn|.
bp_status bad_handle(const char *fn, const char *what, const void *h, handle_tag expected);

// Membership of the set of live handles. Every handle struct the API gives
// out (and frees) holds one as a member: constructing the struct registers
// it, destroying it unregisters it. A free function asks the set before it
// reads anything from the handle, so a second free of the same handle is
// recognised without touching freed memory, in every build.
class live_mark {
 public:
  live_mark() noexcept { enter(); }
  live_mark(const live_mark &) noexcept { enter(); }  // a copy is a handle of its own
  live_mark &operator=(const live_mark &) noexcept { return *this; }
  ~live_mark() { leave(); }
  bool live() const noexcept;

 private:
  void enter() noexcept;
  void leave() noexcept;
};

// For the free functions: true when |h| is a live handle carrying |tag|.
// Otherwise records INVALID_ARGUMENT ("already freed, or not a handle the
// API returned"), logs it and returns false, without reading |h|'s memory.
bool free_check_live(bool live, const void *h, handle_tag tag, const char *fn, const char *what);
template <typename T>
bool free_check(const T *h, handle_tag tag, const char *fn, const char *what) {
  return free_check_live(h->live.live() && h->tag == tag, h, tag, fn, what);
}

// Destroys |h| and keeps its storage, marked TAG_DEAD, in a bounded
// quarantine (every build), so a later call with the freed handle still
// reads TAG_DEAD instead of reused memory (docs/failures.md #24).
void quarantine_storage(void *h);
template <typename T>
void retire_handle(T *h) {
  h->~T();
  *static_cast<uint32_t *>(static_cast<void *>(h)) = TAG_DEAD;
  quarantine_storage(h);
}

}  // namespace bp::core
