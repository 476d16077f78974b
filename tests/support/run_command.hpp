// run_command.hpp: runs a shell command from a test and captures its
// standard output, for the tests that drive the tools (bp-gguf, bp-generate,
// bp-devices, ...) as a user would.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace bp::test {

struct command_result {
  int status = -1;  // the exit status; 128 + N when killed by signal N; -1 when it could not run
  std::string out;  // standard output (append 2>&1 to the command for standard error too)
};

inline command_result run_command(const std::string &cmd) {
  command_result r;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
  return r;
}

}  // namespace bp::test
