// Subcommands of the `mcr` tool. Each lives in its own cmd_<name>.cpp and registers itself on the
// top-level app; the callbacks throw mcr::Error on failure and main() turns that into exit code 1.
#pragma once

namespace CLI {
class App;
}

namespace mcr::cli {

void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_shape_command(CLI::App& app);
void add_gemm_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_doctor_command(CLI::App& app);
void add_replay_command(CLI::App& app);
/// `mcr shape`'s subcommands gemm and sweep (cmd_shape_gemm.cpp, cmd_shape_sweep.cpp).
void add_shape_gemm_command(CLI::App* shape);
void add_shape_sweep_command(CLI::App* shape);

/// Exit code a subcommand asks for (e.g. a benchmark that found wrong values). 0 by default.
int& exit_code();

}  // namespace mcr::cli
