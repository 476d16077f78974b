// token.hpp: the shared secret of bp-serve: read from a file, compared in
// constant time. The token is never logged or put in a message.
#pragma once

#include <string>

namespace bp::remote::server {

// True when |a| and |b| are equal. The time taken depends on the lengths
// only, never on where the first difference is (no early exit).
bool constant_time_equal(const std::string &a, const std::string &b);

// Reads the token from |path|, without leading and trailing white space.
// Returns false with |error| naming the file and the cause (missing,
// unreadable, empty, or holding a line break inside the token).
bool read_token_file(const std::string &path, std::string *token, std::string *error);

}  // namespace bp::remote::server
