// bp-devices: lists the plugins Backplane found, their devices (with the exact
// spec string that selects each one) and every candidate file that was
// refused, with the reason.
//
//   bp-devices [--json] [--plugin-path DIR]... [--plugin FILE]...
//
// A plugin that fails to load is shown, never hidden, and is not an error of
// this tool: the exit status is 0 unless the command line itself is wrong.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "report.hpp"

int main(int argc, char **argv) {
  CLI::App app{"bp-devices: plugins, devices and rejected plugin files of Backplane"};
  bool json = false;
  std::vector<std::string> paths, files;
  app.add_flag("--json", json, "print the same information as one JSON object");
  app.add_option("--plugin-path", paths, "also search this folder for libbp-*.so (repeatable)");
  app.add_option("--plugin", files, "load this plugin file explicitly, whatever its name (repeatable)");
  CLI11_PARSE(app, argc, argv);
  // Every refusal is printed below with its reason; the registry's own
  // warnings on stderr would only repeat them. BP_LOG still wins.
  if (!std::getenv("BP_LOG")) bp_log_set_level(BP_LOG_ERROR);

  bp::tools::inventory inv = bp::tools::collect(paths, files);
  if (json) {
    std::printf("%s\n", bp::tools::to_json(inv).dump(2).c_str());
  } else {
    std::fputs(bp::tools::to_text(inv).c_str(), stdout);
  }
  return 0;
}
