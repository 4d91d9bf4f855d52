// `mcr doctor DIR [--json]`: the flight records of a job's ranks, merged and explained
// (mcr::diagnose_flight_records; format: docs/reliability.md, "Flight recorder and `mcr doctor`").
#include <memory>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "mcr/comm/flight_analysis.hpp"

namespace mcr::cli {

void add_doctor_command(CLI::App& app) {
  struct Options {
    std::string dir;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "Merge the flight records of a job's ranks (MCR_FLIGHT_DIR) and name the ranks that never "
      "reached or never completed an operation, and where ranks diverged");
  cmd->add_option("DIR", o->dir, "Directory holding flight-rank<N>.json files")->required();
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->callback([o] {
    const FlightDiagnosis d = diagnose_flight_records(o->dir);
    fmt::print("{}", o->json ? d.json + "\n" : d.text);
  });
}

}  // namespace mcr::cli
