// Placeholder until the `mcr tune` subcommand lands.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
void add_tune_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tune", "(not yet available)");
  cmd->callback([] { throw mcr::Error("'mcr tune' is not available in this build"); });
}
}  // namespace mcr::cli
