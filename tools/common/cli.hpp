// cli.hpp: the tools' one rule for command-line errors.
//
// CLI11 reports --help as success and every usage error with its own exit
// code (105, 109, 114, ...). The tools promise 2 for bad usage (docs/tools.md),
// so each parses through this.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "backplane/backplane.h"
#include "backplane/plugin.h"
#include "backplane/version.h"

namespace bp::tools {

// What --version prints: the tool's own version (the headers it was built
// with) and the library it runs with, which can differ when an older
// libbackplane.so is found first on the library path.
inline std::string version_text(const char *tool) {
  return std::string(tool) + " " BP_VERSION_STRING " (libbackplane " + bp_version_string() + ", plugin ABI " +
         std::to_string(BP_PLUGIN_ABI_VERSION) + "." + std::to_string(BP_PLUGIN_ABI_MINOR) + ")";
}

// --version on a CLI11 tool: prints version_text and exits 0 (through
// parse_command_line).
inline void add_version_flag(CLI::App &app, const char *tool) {
  app.set_version_flag(
      "--version", [tool] { return version_text(tool); }, "print the version and exit");
}

// Parses |argv| into |app|. nullopt: go on. Otherwise the tool's exit status:
// 0 after --help (printed), 2 after a usage error (printed to stderr).
inline std::optional<int> parse_command_line(CLI::App &app, int argc, char **argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
}

}  // namespace bp::tools
