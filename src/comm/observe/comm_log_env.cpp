// MCR_LOG=summary|trace: attaches a CommLog to the world communicator at init() and writes its
// summary (MCR_LOG_FILE, default standard error) and trace (MCR_TRACE_FILE, default
// mcr_trace.json) from rank 0 at finalize(). When the run ends abnormally, each rank writes its own
// records instead (write_local_env_comm_log).
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "mcr/comm/comm_log.hpp"
#include "mcr/errors.hpp"
#include "observe/comm_log_hooks.hpp"

namespace mcr::detail {
namespace {

struct EnvLog {
  std::shared_ptr<CommLog> log;
  bool summary = false;
  bool trace = false;
  int world_rank = 0;
  int world_size = 1;
  // Written once, by finalize or by an abnormal exit. While finalize gathers (kGathering) the
  // log stays in place: an abnormal exit meanwhile (the watchdog, a signal, a peer gone) writes
  // this rank's own records, and finalize, finding it written, writes nothing.
  enum Phase : int { kIdle, kGathering, kWritten };
  std::atomic<int> phase{kIdle};
  /// Moves `from` to kWritten; false when the log was already written (or taken by the other).
  bool take(int from) { return phase.compare_exchange_strong(from, kWritten); }
};

EnvLog& env_log() {
  // Never destroyed: an exit handler may still write the log after static destruction began.
  static EnvLog& state = *new EnvLog;
  return state;
}

// MCR_LOG's log and an observer of the program's, each told of every operation.
class BesideEnvLog final : public OpObserver {
 public:
  BesideEnvLog(std::shared_ptr<OpObserver> log, std::shared_ptr<OpObserver> other)
      : log_(std::move(log)), other_(std::move(other)) {}
  void on_complete(const OpRecord& record) noexcept override {
    log_->on_complete(record);
    other_->on_complete(record);
  }
  const std::shared_ptr<OpObserver>& log() const noexcept { return log_; }

 private:
  std::shared_ptr<OpObserver> log_;
  std::shared_ptr<OpObserver> other_;
};

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

std::string summary_file() {
  return env_or("MCR_LOG_FILE", "");
}
std::string trace_file() {
  return env_or("MCR_TRACE_FILE", "mcr_trace.json");
}

// "dir/summary.txt" -> "dir/summary.rank3.txt"; "log" -> "log.rank3".
std::string with_rank(const std::string& path, int rank) {
  const auto slash = path.rfind('/');
  const auto dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1)) {
    return fmt::format("{}.rank{}", path, rank);
  }
  return fmt::format("{}.rank{}{}", path.substr(0, dot), rank, path.substr(dot));
}

// Whether `path` is written beside itself and renamed into place: absent, or a plain regular
// file. A symlink (renaming over it would replace the link, not write its target), a device or a
// pipe (/dev/stderr, /dev/full) is written where it is.
bool written_by_rename(const std::string& path) {
  std::error_code ec;
  const auto type = std::filesystem::symlink_status(path, ec).type();
  return type == std::filesystem::file_type::not_found ||
         type == std::filesystem::file_type::regular;
}

// Writes `body` to `path`; throws Error naming `var`, the path and the system's reason. A file
// written by rename goes to a name of its own beside it first (host and pid, created exclusively:
// processes sharing the directory, even with equal pids on two hosts, never share it), so an
// interrupted write (a signal, a full disk) leaves the previous file whole, never half a new one.
void write_file(const char* var, const std::string& path,
                const std::function<void(std::ostream&)>& body) {
  const auto fail = [&](int err) {
    throw Error(fmt::format("{}: '{}' cannot be written{}", var, path,
                            err != 0 ? fmt::format(": {}", std::strerror(err)) : ""));
  };
  const auto write_to = [&](const std::string& target) {  // 0, or why not
    errno = 0;
    std::ofstream out(target);
    if (out) {
      body(out);
      out.close();
    }
    return out ? 0 : (errno != 0 ? errno : EIO);
  };
  if (written_by_rename(path)) {
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    const std::string tmp =
        fmt::format("{}.tmp.{}.{}", path, host.data(), static_cast<long>(::getpid()));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      struct Remove {
        const std::string& file;
        bool armed = true;
        ~Remove() {
          if (armed) (void)std::remove(file.c_str());
        }
      } leftover{tmp};
      if (const int err = write_to(tmp); err != 0) fail(err);
      if (std::rename(tmp.c_str(), path.c_str()) == 0) {
        leftover.armed = false;
        return;
      }
      // A file that cannot be replaced (one mounted in by itself) is written where it is.
      if (errno != EBUSY && errno != EXDEV) fail(errno);
    }
    // No name of its own beside it (a directory not writable, a stale one of this pid): in place.
  }
  if (const int err = write_to(path); err != 0) fail(err);
}

// MCR_LOG's summary and trace of `g`, rank 0's of the whole job (`rank` < 0) or a rank's own
// (`rank`: the files are path.rank<N>). Each on its own: one that cannot be written is reported,
// and the other is still written.
void write_outputs(const GatheredLog& g, const std::string& header, int rank) {
  const auto& state = env_log();
  const auto file_for = [rank](const std::string& path) {
    return rank >= 0 ? with_rank(path, rank) : path;
  };
  const std::string who = rank >= 0 ? fmt::format("mcr[{}]: ", rank) : "mcr: ";
  if (state.summary) {
    try {
      const auto text = header + format_summary(summarize(g), g);
      const auto path = summary_file();
      if (path.empty()) {
        fmt::print(stderr, "{}", text);
      } else {
        write_file("MCR_LOG_FILE", file_for(path), [&](std::ostream& out) { out << text; });
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}communication summary not written: {}\n", who, e.what());
    }
  }
  if (state.trace) {
    try {
      const auto path = file_for(trace_file());
      write_file("MCR_TRACE_FILE", path, [&](std::ostream& out) { write_chrome_trace(g, out); });
      fmt::print(stderr, "{}communication trace {}({} events) written to {}\n", who,
                 rank >= 0 ? "of this rank " : "", g.records.size(), path);
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}communication trace not written: {}\n", who, e.what());
    }
  }
}

void write_local(const CommLog& log, std::string_view reason) {
  const auto& state = env_log();
  GatheredLog mine;
  mine.ranks = state.world_size;
  mine.records = log.records();
  mine.dropped.assign(static_cast<std::size_t>(state.world_size), 0);
  if (state.world_rank >= 0 && state.world_rank < state.world_size) {
    mine.dropped[static_cast<std::size_t>(state.world_rank)] = log.dropped();
  }
  write_outputs(mine,
                fmt::format("mcr: communication log of world rank {} alone ({}); the other ranks "
                            "write their own\n",
                            state.world_rank, reason),
                state.world_rank);
}

// A file MCR_LOG writes at finalize() (and, after a failure, each rank's `.rank<N>` beside it):
// checked at init(), so that a path that cannot be written is said before the run instead of
// after it, with its records lost. The directory is not created: a mistyped path is refused.
void check_writable(const char* var, const std::string& path, bool is_default) {
  namespace fs = std::filesystem;
  const std::string named = is_default ? fmt::format("{} unset: the default '{}'", var, path)
                                       : fmt::format("{}='{}'", var, path);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw InvalidArgument(fmt::format("{}: is a directory; give the path of a file", named));
  }
  if (!written_by_rename(path)) {  // a symlink, a device, a pipe: written where it is
    if (::access(path.c_str(), W_OK) != 0) {
      throw InvalidArgument(
          fmt::format("{}: the file is not writable: {}", named, std::strerror(errno)));
    }
    return;
  }
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  if (!fs::is_directory(dir, ec)) {
    throw InvalidArgument(fmt::format(
        "{}: directory '{}' does not exist (the file is written there at finalize(); create it "
        "first)",
        named, dir));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw InvalidArgument(
        fmt::format("{}: directory '{}' is not writable: {}", named, dir, std::strerror(errno)));
  }
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    throw InvalidArgument(
        fmt::format("{}: the file is not writable: {}", named, std::strerror(errno)));
  }
}

}  // namespace

void check_env_comm_log_files(const EnvLogModes& modes) {
  if (modes.summary && !summary_file().empty()) {
    check_writable("MCR_LOG_FILE", summary_file(), false);
  }
  if (modes.trace) {
    check_writable("MCR_TRACE_FILE", trace_file(), env_or("MCR_TRACE_FILE", "").empty());
  }
}

EnvLogModes requested_env_comm_log() {
  EnvLogModes m;
  m.text = env_or("MCR_LOG", "");
  const std::string& modes = m.text;
  if (modes.empty() || modes == "off" || modes == "0" || modes == "none") return m;
  std::size_t pos = 0;
  while (pos <= modes.size()) {
    const auto comma = modes.find(',', pos);
    const auto token =
        modes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (token == "summary") {
      m.summary = true;
    } else if (token == "trace") {
      m.trace = true;
    } else {
      throw InvalidArgument(fmt::format(
          "MCR_LOG='{}': unknown mode '{}' (use summary, trace, or summary,trace)", modes, token));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return m;
}

}  // namespace mcr::detail

namespace mcr {

CommLogOutputs env_comm_log_outputs() {
  const auto modes = detail::requested_env_comm_log();
  return {modes.summary, modes.trace, detail::summary_file(), detail::trace_file()};
}

}  // namespace mcr

namespace mcr::detail {

std::shared_ptr<OpObserver> beside_env_comm_log(const std::shared_ptr<OpObserver>& current,
                                                std::shared_ptr<OpObserver> next) {
  const std::shared_ptr<OpObserver> log = env_log().log;
  if (!next || !log || next == log || !current) return next;
  const auto* pair = dynamic_cast<const BesideEnvLog*>(current.get());
  if (current != log && (pair == nullptr || pair->log() != log)) return next;
  return std::make_shared<BesideEnvLog>(log, std::move(next));
}

void attach_env_comm_log(Communicator& world, const EnvLogModes& modes) {
  auto& state = env_log();
  state.log.reset();
  state.phase.store(EnvLog::kIdle);
  state.world_rank = world.rank();
  state.world_size = world.size();
  state.summary = modes.summary;
  state.trace = modes.trace;
  if (!modes.any()) return;
  state.log = std::make_shared<CommLog>();
  world.set_observer(state.log);
}

void finish_env_comm_log(Communicator& world) {
  auto& state = env_log();
  if (!state.log) return;
  int idle = EnvLog::kIdle;
  if (!state.phase.compare_exchange_strong(idle, EnvLog::kGathering)) return;
  const std::shared_ptr<CommLog> log = state.log;
  try {
    world.set_observer(nullptr);  // the gather below is not part of the user's communication
    GatheredLog all;
    try {
      all = log->collect(world);
    } catch (const std::exception& e) {
      // The world was aborted by a timeout (it fails fast): no gather, each rank writes its own.
      if (state.take(EnvLog::kGathering)) {
        write_local(*log, fmt::format("finalize after a failure: {}", e.what()));
      }
      return;
    }
    if (!state.take(EnvLog::kGathering)) return;  // an abnormal exit wrote this rank's own
    state.log.reset();                            // written: nobody reads it again
    if (world.rank() != 0) return;
    write_outputs(all, "", -1);
  } catch (const std::exception& e) {
    // finalize() must still tear down; report instead of throwing out of it.
    fmt::print(stderr, "mcr: communication log not written: {}\n", e.what());
  }
}

void write_local_env_comm_log(std::string_view reason) noexcept {
  auto& state = env_log();
  // Taken before the log is read: finalize releases it only once it has taken it itself.
  if (!state.take(EnvLog::kIdle) && !state.take(EnvLog::kGathering)) return;
  const std::shared_ptr<CommLog> log = state.log;
  if (!log) return;
  try {
    write_local(*log, reason);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mcr: communication log not written: {}\n", e.what());
  }
}

}  // namespace mcr::detail
