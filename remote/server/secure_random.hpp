// secure_random.hpp: unpredictable ids from the kernel's cryptographic
// generator (getrandom), for session ids and handles. Nothing a client sees
// may let it guess another id: no seeded PRNG, no counter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bp::remote::server {

// Fills |out| with |n| random bytes. False only when the kernel refuses
// (no getrandom and no /dev/urandom): the caller refuses the request.
bool secure_random_bytes(void *out, size_t n);

// A random non-zero 64-bit value; 0 when no randomness could be had.
uint64_t secure_random_u64();

// 128 random bits as 32 lowercase hex digits; empty when no randomness.
std::string secure_random_hex128();

// True when |text| has the shape of a session id (32 lowercase hex digits).
bool is_session_id(const std::string &text);

}  // namespace bp::remote::server
