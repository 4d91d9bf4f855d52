// mcr: one command line for the communication runtime and the co-design analyser.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <exception>

#include "commands.hpp"
#include "field_flags.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace mcr::cli

int main(int argc, char** argv) {
  CLI::App app{"mcr: mix-and-match communication runtime and transformer/GPU co-design analyser"};
  app.require_subcommand(1);
  mcr::cli::add_info_command(app);
  mcr::cli::add_bench_command(app);
  mcr::cli::add_tune_command(app);
  mcr::cli::add_explain_command(app);
  mcr::cli::add_shape_command(app);
  mcr::cli::add_gemm_command(app);
  mcr::cli::add_calibrate_command(app);
  mcr::cli::add_plan_command(app);
  mcr::cli::add_doctor_command(app);
  mcr::cli::add_replay_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // Library errors name fields; the user typed flags.
    fmt::print(stderr, "mcr: error: {}\n", mcr::cli::with_flag_names(e.what()));
    return 1;
  }
  return mcr::cli::exit_code();
}
