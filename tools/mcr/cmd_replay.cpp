// `mcr replay TRACE`: replays a recorded communication trace with real, verified buffers under one
// or more backend policies and prints the total time of each. The trace reading and the replay
// are mcr::bench's (replay.hpp); this file maps flags to its options and prints its result.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "commands.hpp"
#include "mcr/bench/replay.hpp"
#include "mcr/comm.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
namespace {

struct ReplayFlags {
  std::string trace;
  std::vector<std::string> policies;  ///< empty: every usable backend, then auto
  int repetitions = 5;
  int warmup = 1;
  double scale = 1.0;
  std::uint64_t seed = 1;
  bool json = false;
};

nlohmann::json to_json(const bench::Trace& trace, const bench::ReplayResult& r, double scale) {
  nlohmann::json policies = nlohmann::json::array();
  for (const auto& p : r.policies) {
    nlohmann::json per_op = nlohmann::json::object();
    for (const auto& t : p.per_op) {
      per_op[std::string(to_string(t.op))] = {
          {"count", t.count}, {"bytes", t.bytes}, {"time_s", t.seconds}};
    }
    policies.push_back({{"backend", p.policy},
                        {"total_time_s", p.seconds},
                        {"min_time_s", p.min_seconds},
                        {"reps", p.repetitions},
                        {"per_op", per_op},
                        {"fallbacks", p.fallbacks},
                        {"checked_buffers", p.checked_points}});
  }
  return {{"trace", trace.path},
          {"format", trace.format},
          {"ranks", r.ranks},
          {"ops", trace.ops.size()},
          {"scale", scale},
          {"skipped_p2p", trace.skipped_p2p},
          {"skipped_unsized", trace.skipped_unsized},
          {"policies", policies},
          {"best_single", r.best_single.empty() ? nlohmann::json() : nlohmann::json(r.best_single)},
          {"auto_vs_best", r.auto_vs_best > 0 ? nlohmann::json(r.auto_vs_best) : nlohmann::json()}};
}

void print_table(const bench::Trace& trace, const bench::ReplayResult& r, int reps) {
  fmt::print("# mcr replay {} ({}): {} ops per pass on {} ranks, median of {} timed pass{}\n",
             trace.path, trace.format, trace.ops.size(), r.ranks, reps, reps == 1 ? "" : "es");
  fmt::print("{:<10} {:>12} {:>12} {:>10} {:>10}\n", "policy", "median_ms", "min_ms", "best/this",
             "fallbacks");
  for (const auto& p : r.policies) {
    const std::string ratio = r.best_single_s > 0 && p.seconds > 0
                                  ? fmt::format("{:.3f}", r.best_single_s / p.seconds)
                                  : "-";
    fmt::print("{:<10} {:>12.3f} {:>12.3f} {:>10} {:>10}\n", p.policy, p.seconds * 1e3,
               p.min_seconds * 1e3, ratio, p.fallbacks);
  }
  fmt::print("# per op type, median ms per pass:\n{:<16} {:>7} {:>12}", "op", "count", "MiB");
  for (const auto& p : r.policies)
    fmt::print(" {:>10}", p.policy);
  fmt::print("\n");
  const auto& first = r.policies.front().per_op;
  for (std::size_t k = 0; k < first.size(); ++k) {
    fmt::print("{:<16} {:>7} {:>12.2f}", to_string(first[k].op), first[k].count,
               static_cast<double>(first[k].bytes) / (1 << 20));
    for (const auto& p : r.policies)
      fmt::print(" {:>10.3f}", p.per_op[k].seconds * 1e3);
    fmt::print("\n");
  }
  if (!r.best_single.empty()) fmt::print("# best single backend: {}", r.best_single);
  if (r.auto_vs_best > 0) fmt::print("; auto's speed relative to it: {:.3f}", r.auto_vs_best);
  if (!r.best_single.empty()) fmt::print("\n");
  if (trace.skipped_p2p > 0)
    fmt::print(
        "# {} send/recv records of the trace were not replayed (their peers are not "
        "logged)\n",
        trace.skipped_p2p);
  if (trace.skipped_unsized > 0)
    fmt::print(
        "# {} all_to_all_v records of the trace were not replayed (issued without a size hint, "
        "their size is not logged)\n",
        trace.skipped_unsized);
}

void run_replay(Communicator& world, bench::Trace& trace, const ReplayFlags& f) {
  bench::check_trace_fits(trace, world.size());
  bench::ReplayOptions o;
  o.policies = f.policies;
  if (o.policies.empty()) {
    o.policies = world.backends();
    o.policies.push_back("auto");
  }
  o.repetitions = f.repetitions;
  o.warmup = f.warmup;
  o.seed = f.seed;
  const bench::ReplayResult result = bench::replay(world, trace, o);
  if (world.rank() != 0) return;
  if (f.json) {
    fmt::print("{}\n", to_json(trace, result, f.scale).dump(2));
  } else {
    print_table(trace, result, f.repetitions);
  }
}

// MCR_LOG left set from the run that recorded TRACE would have the replay's finalize() write its
// own log over it (its trace, or its summary). Refused before anything is run.
void refuse_a_log_over_the_trace(const std::string& trace) {
  const CommLogOutputs log = env_comm_log_outputs();
  const auto same_file = [&trace](const std::string& file) {
    std::error_code ec;
    return !file.empty() && (file == trace || std::filesystem::equivalent(file, trace, ec));
  };
  const char* what = log.trace && same_file(log.trace_file)       ? "MCR_TRACE_FILE"
                     : log.summary && same_file(log.summary_file) ? "MCR_LOG_FILE"
                                                                  : nullptr;
  if (what == nullptr) return;
  throw InvalidArgument(fmt::format(
      "TRACE '{}' is where MCR_LOG writes this replay's own log ({}='{}'), which would overwrite "
      "it: unset MCR_LOG or set {} to another file",
      trace, what, what == std::string_view("MCR_TRACE_FILE") ? log.trace_file : log.summary_file,
      what));
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto f = std::make_shared<ReplayFlags>();
  auto* cmd = app.add_subcommand(
      "replay", "Replay a communication trace with verified data per backend (run under mpirun)");
  cmd->add_option("TRACE", f->trace,
                  "an MCR_LOG=trace file, or a JSON op list (\"format\": \"mcr-trace\")")
      ->required();
  cmd->add_option("--backend", f->policies,
                  "policies, comma separated: mpi, gloo, nccl, auto (default: every usable "
                  "backend, then auto)")
      ->delimiter(',');
  cmd->add_option("--reps", f->repetitions, "timed passes per policy (the median is reported)")
      ->capture_default_str();
  cmd->add_option("-w,--warmup", f->warmup, "untimed passes per policy first")
      ->capture_default_str();
  cmd->add_option("--scale", f->scale,
                  "multiply every op's size by this factor (e.g. 0.01 for a quick check)")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "seed of the verifiable data")->capture_default_str();
  cmd->add_flag("--json", f->json, "print the result as JSON (rank 0)");
  cmd->callback([f] {
    // The trace is read and checked before init(), so a bad file fails alike on every rank
    // before any of them communicates.
    refuse_a_log_over_the_trace(f->trace);
    bench::Trace trace = bench::load_trace(f->trace);
    if (f->scale != 1.0) bench::scale_trace(trace, f->scale);
    Communicator world = init();
    try {
      run_replay(world, trace, *f);
    } catch (...) {
      finalize();
      throw;
    }
    finalize();
  });
}

}  // namespace mcr::cli
