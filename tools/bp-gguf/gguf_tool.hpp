// gguf_tool.hpp: the commands of bp-gguf (show, get, check; synth in synth.hpp), each in
// its own file. Each returns the process exit status: 0 done, 1 a bad file or
// a failed step (the message on stderr).
#pragma once

#include <string>

#include "backplane/gguf.h"

namespace bp::gguf_tool {

int show(const std::string &path, bool json);
int get(const std::string &path, const std::string &tensor, const std::string &out_path);
// |cold|: also after dropping the page cache, where this process may.
int check(const std::string &path, const std::string &device, bool json, bool cold);

// "bp-gguf: <what>: <bp_last_error()>" on stderr; returns 1.
int fail(const std::string &what);

// Opens |path| or prints why not (nullptr).
bp_gguf *open_or_report(const std::string &path);

}  // namespace bp::gguf_tool
