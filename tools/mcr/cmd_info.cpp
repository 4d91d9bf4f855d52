// `mcr info`: version, build options, backends (compiled in, usable here), capabilities, rules.
#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"

namespace mcr::cli {
namespace {

nlohmann::json to_json(const RuntimeInfo& info) {
  nlohmann::json j;
  j["version"] = info.version;
  j["build"] = info.build;
  j["launcher"] = info.launcher;
  j["rendezvous"] = {{"store", info.rendezvous},
                     {"world_exchange", info.world_exchange},
                     {"store_host", info.store_host}};
  j["rank"] = info.rank;
  j["size"] = info.size;
  j["timeout_ms"] = info.timeout.count();
  j["rules"] = {{"resolved", info.rules}, {"source", info.rules_source}};
  j["tuning"] =
      info.tuning_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.tuning_source);
  j["backends"] = nlohmann::json::array();
  for (const auto& b : info.backends) {
    nlohmann::json jb{{"name", b.name}, {"library", b.library}, {"usable", b.usable}};
    if (!b.usable) jb["reason"] = b.reason;
    jb["capabilities"] = nlohmann::json::array();
    for (const auto& c : b.capabilities) {
      nlohmann::json jc{{"op", to_string(c.op)},
                        {"dtype", to_string(c.dtype)},
                        {"device", to_string(c.device)},
                        {"supported", c.supported},
                        {c.supported ? "how" : "why", c.detail}};
      if (is_reduction(c.op)) jc["reduce_op"] = to_string(c.reduce);
      jb["capabilities"].push_back(std::move(jc));
    }
    j["backends"].push_back(std::move(jb));
  }
  return j;
}

// A one-letter code per way of running an op, explained in the legend.
std::string short_code(const std::string& how) {
  if (how.rfind("native", 0) == 0) return "y";
  if (how.rfind("staged", 0) == 0) return "S";
  if (how.rfind("user-defined", 0) == 0) return "U";
  if (how.rfind("emulated", 0) == 0) return "E";
  if (how.rfind("cuda-aware", 0) == 0) return "C";
  return how.substr(0, 5);
}

// One row per op: which dtypes run (sum for reductions), per device kind.
void print_table(const BackendInfo& b, Device::Kind kind) {
  fmt::print("    {:<15}", to_string(kind));
  for (DType t : kAllDTypes)
    fmt::print(" {:>5}", to_string(t));
  fmt::print("\n");
  for (OpType op : kAllOpTypes) {
    fmt::print("    {:<15}", to_string(op));
    for (DType t : kAllDTypes) {
      std::string cell = "-";
      for (const auto& c : b.capabilities) {
        if (c.op == op && c.dtype == t && c.device == kind && c.reduce == ReduceOp::sum &&
            c.supported) {
          cell = short_code(c.detail);
        }
      }
      fmt::print(" {:>5}", cell);
    }
    fmt::print("\n");
  }
}

void print_text(const RuntimeInfo& info) {
  fmt::print("mcr {}\n", info.version);
  fmt::print("build:");
  for (const auto& [k, v] : info.build)
    fmt::print(" {}={}", k, v);
  fmt::print("\nlauncher: {} (rank {} of {}), default timeout {} s\n", info.launcher, info.rank,
             info.size, info.timeout.count() / 1000.0);
  fmt::print("rendezvous: {}{}, world exchange through {}\n", info.rendezvous,
             info.store_host.empty() ? "" : fmt::format(" at {}", info.store_host),
             info.world_exchange);
  fmt::print("rules: {} (source: {})\n", info.rules.empty() ? "(none)" : info.rules,
             info.rules_source);
  fmt::print("tuning table: {}\n", info.tuning_source.empty() ? "(none)" : info.tuning_source);
  fmt::print("backends (default priority order):\n");
  for (const auto& b : info.backends) {
    fmt::print("  {:<6} {} ({})\n", b.name,
               b.usable ? "usable" : fmt::format("unusable: {}", b.reason), b.library);
    if (!b.usable) continue;
    fmt::print(
        "    capabilities, sum for reductions (y native, U user-defined op, E emulated, S staged "
        "through host memory, C CUDA-aware; - unsupported):\n");
    print_table(b, Device::Kind::cpu);
    bool any_cuda = false;
    for (const auto& c : b.capabilities)
      any_cuda = any_cuda || (c.device == Device::Kind::cuda && c.supported);
    if (any_cuda) print_table(b, Device::Kind::cuda);
    std::vector<std::string> notes;
    for (const auto& c : b.capabilities) {
      if (c.supported || c.device != Device::Kind::cpu) continue;
      auto note = fmt::format("{} {} {}: {}", to_string(c.op), to_string(c.dtype),
                              is_reduction(c.op) ? to_string(c.reduce) : "", c.detail);
      if (notes.size() < 8) notes.push_back(note);
    }
    for (const auto& n : notes)
      fmt::print("    unsupported: {}\n", n);
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("info", "Version, build options, backends and their capabilities, rules");
  static bool json = false;
  cmd->add_flag("--json", json, "Print JSON");
  cmd->callback([] {
    mcr::init();
    auto info = runtime_info();
    if (info.rank == 0) {
      if (json) {
        fmt::print("{}\n", to_json(info).dump(2));
      } else {
        print_text(info);
      }
    }
    mcr::finalize();
  });
}

}  // namespace mcr::cli
