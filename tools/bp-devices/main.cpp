// bp-devices: lists the plugins Backplane found, their devices (with the exact
// spec string that selects each one) and every candidate file that was
// refused, with the reason.
//
//   bp-devices [--json] [--probe] [--plugin-path DIR]... [--plugin FILE]...
//
// A plugin that fails to load is shown, never hidden, and is not an error of
// this tool: the exit status is 0 unless the command line is wrong (2) or
// the report cannot be written (1).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "common/cli.hpp"
#include "report.hpp"

int main(int argc, char **argv) {
  CLI::App app{"bp-devices: plugins, devices and rejected plugin files of Backplane"};
  bp::tools::add_version_flag(app, "bp-devices");
  bool json = false;
  std::vector<std::string> paths, files;
  app.add_flag("--json", json, "print the same information as one JSON object");
  app.add_option("--plugin-path", paths, "also search this folder for libbp-*.so (repeatable)");
  app.add_option("--plugin", files, "load this plugin file explicitly, from any folder (repeatable)");
  bool probe = false;
  app.add_flag("--probe", probe,
               "load each plugin file in a child process first, with a time limit (BP_PLUGIN_PROBE_TIMEOUT, "
               "default 10 s): a file whose constructors or init crash, exit or hang is refused with the cause "
               "instead of taking this tool down (same as BP_PLUGIN_PROBE=1)");
  if (auto rc = bp::tools::parse_command_line(app, argc, argv)) return *rc;
  // Before anything loads: the registry reads it for every candidate.
  if (probe) setenv("BP_PLUGIN_PROBE", "1", 1);
  // Log messages are collected into the report (collect.cpp): refusals are
  // listed with their reasons, other warnings under "Problems".

  bp::tools::inventory inv = bp::tools::collect(paths, files);
  if (json) {
    std::printf("%s\n", bp::tools::to_json(inv).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputs(bp::tools::to_text(inv).c_str(), stdout);
  }
  // Failed plugins are reported, not an error; a report that did not reach
  // its reader (a full disk, a closed pipe) is.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "bp-devices: cannot write the report: %s\n", std::strerror(errno));
    return 1;
  }
  return 0;
}
