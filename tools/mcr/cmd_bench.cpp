// Placeholder until the `mcr bench` subcommand lands.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not yet available)");
  cmd->callback([] { throw mcr::Error("'mcr bench' is not available in this build"); });
}
}  // namespace mcr::cli
