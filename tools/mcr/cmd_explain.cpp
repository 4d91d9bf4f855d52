// Placeholder until the `mcr explain` subcommand lands.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
void add_explain_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("explain", "(not yet available)");
  cmd->callback([] { throw mcr::Error("'mcr explain' is not available in this build"); });
}
}  // namespace mcr::cli
