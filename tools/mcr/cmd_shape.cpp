// Placeholder until the `mcr shape` subcommand lands.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
void add_shape_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("shape", "(not yet available)");
  cmd->callback([] { throw mcr::Error("'mcr shape' is not available in this build"); });
}
}  // namespace mcr::cli
