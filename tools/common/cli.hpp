// cli.hpp: the tools' one rule for command-line errors.
//
// CLI11 reports --help as success and every usage error with its own exit
// code (105, 109, 114, ...). The tools promise 2 for bad usage (docs/tools.md),
// so each parses through this.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bp::tools {

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
