// MCR_LOG=summary|trace: attaches a CommLog to the world communicator at init() and writes its
// summary (MCR_LOG_FILE, default standard error) and trace (MCR_TRACE_FILE, default
// mcr_trace.json) from rank 0 at finalize().
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "comm_log_hooks.hpp"
#include "mcr/comm_log.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

struct EnvLog {
  std::shared_ptr<CommLog> log;
  bool summary = false;
  bool trace = false;
};

EnvLog& env_log() {
  static EnvLog state;
  return state;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

}  // namespace

void attach_env_comm_log(Communicator& world) {
  auto& state = env_log();
  state = EnvLog{};
  const std::string modes = env_or("MCR_LOG", "");
  if (modes.empty() || modes == "off" || modes == "0" || modes == "none") return;
  std::size_t pos = 0;
  while (pos <= modes.size()) {
    const auto comma = modes.find(',', pos);
    const auto token =
        modes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (token == "summary") {
      state.summary = true;
    } else if (token == "trace") {
      state.trace = true;
    } else {
      throw InvalidArgument(fmt::format(
          "MCR_LOG='{}': unknown mode '{}' (use summary, trace, or summary,trace)", modes, token));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  state.log = std::make_shared<CommLog>();
  world.set_observer(state.log);
}

void finish_env_comm_log(Communicator& world) {
  auto& state = env_log();
  if (!state.log) return;
  auto log = std::move(state.log);
  state.log.reset();
  try {
    world.set_observer(nullptr);  // the gather below is not part of the user's communication
    const GatheredLog all = log->collect(world);
    if (world.rank() != 0) return;
    if (state.summary) {
      const auto text = format_summary(summarize(all), all);
      const auto path = env_or("MCR_LOG_FILE", "");
      if (path.empty()) {
        fmt::print(stderr, "{}", text);
      } else {
        std::ofstream out(path);
        if (!out) throw Error(fmt::format("MCR_LOG_FILE='{}' cannot be written", path));
        out << text;
      }
    }
    if (state.trace) {
      const auto path = env_or("MCR_TRACE_FILE", "mcr_trace.json");
      std::ofstream out(path);
      if (!out) throw Error(fmt::format("MCR_TRACE_FILE='{}' cannot be written", path));
      write_chrome_trace(all, out);
      fmt::print(stderr, "mcr: communication trace ({} events) written to {}\n", all.records.size(),
                 path);
    }
  } catch (const std::exception& e) {
    // finalize() must still tear down; report instead of throwing out of it.
    fmt::print(stderr, "mcr: communication log not written: {}\n", e.what());
  }
}

}  // namespace mcr::detail
