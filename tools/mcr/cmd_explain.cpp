// `mcr explain OP --bytes N`: which backend the loaded rules and tuning table pick, from which
// source, and why every other candidate lost.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_cli.hpp"
#include "commands.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
namespace {

struct ExplainOptions {
  std::string op;
  std::string bytes;
  std::string dtype = "fp32";
  int ranks = 0;  // 0: not given, the job's world size
  std::string reduce = "sum";
  std::string device = "cpu";
  bool async = false;
  bool json = false;
  bool ranks_given = false;  // --ranks 0 was read as "not given"
};

void run_explain(const ExplainOptions& o) {
  auto op = parse_op(o.op);
  if (!op)
    throw InvalidArgument(
        fmt::format("OP '{}': unknown operation (use an API name such as all_reduce)", o.op));
  const std::size_t bytes = parse_size_flag("--bytes", o.bytes);
  auto dtype = parse_dtype(o.dtype);
  if (!dtype) {
    throw InvalidArgument(fmt::format(
        "--dtype '{}': unknown element type (use fp32, fp64, fp16, bf16, i8, u8, i32, i64)",
        o.dtype));
  }
  auto reduce = parse_reduce_op(o.reduce);
  if (!reduce) {
    std::vector<std::string_view> names;
    for (const ReduceOp r : kAllReduceOps)
      names.push_back(to_string(r));
    throw InvalidArgument(fmt::format("--reduce '{}': unknown reduce operator (use {})", o.reduce,
                                      fmt::join(names, ", ")));
  }
  Device device;
  if (o.device == "cuda") {
    device = Device::cuda(0);
  } else if (o.device != "cpu") {
    throw InvalidArgument(fmt::format("--device '{}': must be cpu or cuda", o.device));
  }
  if (o.ranks_given && o.ranks < 1)
    throw InvalidArgument(fmt::format("--ranks {}: must be >= 1", o.ranks));
  Communicator world = init();
  const int ranks = o.ranks > 0 ? o.ranks : world.size();
  // The world itself when asked about its size: its selector, its hosts x ranks per host. Another
  // size has no placement, so only table entries that name no topology apply.
  const bool own = ranks == world.size();
  const HostShape shape = own ? HostShape{world.hosts(), world.ranks_per_host()} : HostShape{};
  const CallForm form = o.async ? CallForm::async : CallForm::sync;
  Selection s;
  try {
    s = own ? world.explain(*op, *dtype, bytes, *reduce, device, form)
            : explain_selection(*op, *dtype, bytes, ranks, *reduce, device, form);
  } catch (...) {
    finalize();
    throw;
  }
  const bool root = world.rank() == 0;
  finalize();
  if (!root) return;
  if (o.json) {
    nlohmann::json j{{"op", std::string(to_string(*op))},
                     {"bytes", bytes},
                     {"dtype", std::string(to_string(*dtype))},
                     {"ranks", ranks},
                     {"hosts", shape.hosts},
                     {"ranks_per_host", shape.ranks_per_host},
                     {"topology", describe(shape)},
                     {"device", o.device},
                     {"form", std::string(to_string(form))},
                     {"backend", s.backend},
                     {"source", s.source},
                     {"candidates", nlohmann::json::array()}};
    if (is_reduction(*op)) j["reduce"] = std::string(to_string(*reduce));
    for (const auto& st : s.steps)
      j["candidates"].push_back(
          {{"backend", st.backend}, {"chosen", st.chosen}, {"reason", st.reason}});
    if (!s.composed.empty()) {
      j["composed_steps"] = nlohmann::json::array();
      for (const auto& c : s.composed) {
        j["composed_steps"].push_back({{"level", c.within_host ? "within hosts" : "between hosts"},
                                       {"op", std::string(to_string(c.op))},
                                       {"bytes", c.bytes},
                                       {"times", c.times},
                                       {"backend", c.backend},
                                       {"source", c.source},
                                       {"reason", c.reason}});
      }
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{} of {} bytes ({}), {}{}, {} ranks ({}), {}, {} call\n", to_string(*op), bytes,
             format_size(bytes), to_string(*dtype),
             is_reduction(*op) ? fmt::format(", reduce {}", to_string(*reduce)) : "", ranks,
             own ? fmt::format("{}: hosts x ranks per host", describe(shape))
                 : std::string("unknown topology: --ranks differs from this job"),
             o.device, to_string(form));
  fmt::print("chosen: {} (source: {})\n", s.backend, s.source);
  for (const auto& st : s.steps) {
    fmt::print("  {:<6} {:<8} {}\n", st.backend, st.chosen ? "chosen" : "rejected", st.reason);
  }
  if (!s.composed.empty()) fmt::print("{} steps, each selected on its own group:\n", s.backend);
  for (const auto& c : s.composed) {
    fmt::print("  {:<13} {:<14} {:>10}{} -> {} (source: {}): {}\n",
               c.within_host ? "within hosts" : "between hosts", to_string(c.op),
               format_size(c.bytes), c.times > 1 ? fmt::format(" x{}", c.times) : "", c.backend,
               c.source, c.reason);
  }
}

}  // namespace

void add_explain_command(CLI::App& app) {
  auto opts = std::make_shared<ExplainOptions>();
  auto* cmd = app.add_subcommand("explain",
                                 "Show which backend runs an operation and why the others do not");
  cmd->add_option("OP", opts->op, "operation, as in the API (all_reduce, all_to_all, ...)")
      ->required();
  cmd->add_option("--bytes", opts->bytes, "the op's message size (nccl-tests size; K/M/G suffixes)")
      ->required();
  cmd->add_option("--dtype", opts->dtype, "element type")->capture_default_str();
  cmd->add_option("--ranks", opts->ranks, "communicator size (default: this job's world size)");
  cmd->add_option("--reduce", opts->reduce, "reduce operator for reductions")
      ->capture_default_str();
  cmd->add_option("--device", opts->device, "cpu or cuda")->capture_default_str();
  cmd->add_flag("--async", opts->async,
                "the asynchronous (i*) form of the call: a table may hold entries per form");
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->callback([opts, cmd] {
    opts->ranks_given = cmd->count("--ranks") > 0;
    run_explain(*opts);
  });
}

}  // namespace mcr::cli
