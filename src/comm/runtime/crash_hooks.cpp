// Crash hooks: on a fatal signal, std::terminate or exit without finalize(), each rank writes its
// flight record (MCR_FLIGHT_DIR) and its own MCR_LOG output before the process goes.
//
// Async-signal-safety, and the compromise taken: the dump is formatted with nlohmann-json into a
// std::string, which allocates, so it is not async-signal-safe. A signal that interrupted malloc
// could deadlock the handler; alarm() bounds that to kAlarmSeconds, after which SIGALRM's default
// action (put in place for the report, whatever the program set) ends the process as the original
// signal would have. A SIGTERM the program handles or ignores is left to it: no report then. The
// file itself is written with open/write/rename. Then the previous disposition runs: a previous
// handler is called, a default one is restored and the signal raised again, so the process still
// dies of its own signal (core dumps and exit statuses are unchanged). SIGUSR1 only sets a flag;
// the watchdog thread writes that dump outside signal context.
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "core/watchdog.hpp"
#include "observe/comm_log_hooks.hpp"
#include "observe/flight_recorder.hpp"
#include "observe/flight_registry.hpp"
#include "runtime/runtime.hpp"

namespace mcr::detail {
namespace {

constexpr unsigned kAlarmSeconds = 5;
constexpr std::array<int, 6> kFatalSignals{SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM};

std::atomic<bool> g_dump_requested{false};
std::atomic<bool> g_reported{false};
std::array<struct sigaction, 65> g_previous{};  // indexed by signal number
std::terminate_handler g_previous_terminate = nullptr;

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal";
  }
}

void chain(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = g_previous[static_cast<std::size_t>(sig)];
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, context);
    return;
  }
  // An ignored fault cannot be returned from: the faulting instruction runs again, for ever. It
  // takes its default action, as the kernel gives it where the fault is ignored. The same signal
  // sent by kill() (si_code <= 0) stays ignored.
  const bool fault = (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) &&
                     info != nullptr && info->si_code > 0;
  if (prev.sa_handler == SIG_IGN && !fault) return;
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  // Default action: restore it and raise again; delivered when this handler returns.
  struct sigaction dfl = prev;
  if (dfl.sa_handler == SIG_IGN) dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// Whether the process survives `sig` once this handler chains on: a SIGTERM the program handles
// itself (a graceful shutdown, a checkpoint on preemption) or ignores. The crash signals end it
// whatever handler comes before (Python's faulthandler re-raises them).
bool program_handles(int sig) {
  if (sig != SIGTERM) return false;
  const struct sigaction& prev = g_previous[static_cast<std::size_t>(sig)];
  if ((prev.sa_flags & SA_SIGINFO) != 0) return prev.sa_sigaction != nullptr;
  return prev.sa_handler != SIG_DFL && prev.sa_handler != nullptr;
}

// Bounds the report's time: a report stuck on a lock the interrupted thread holds (malloc's) ends
// by SIGALRM's default action. A program's own SIGALRM handler, or SIGALRM blocked, would leave it
// stuck, so the default is put in place and SIGALRM unblocked for the time of the report, and the
// program's alarm, disposition and mask are given back after it.
class ReportDeadline {
 public:
  ReportDeadline() {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGALRM, &dfl, &previous_);
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    ::pthread_sigmask(SIG_UNBLOCK, &alarm_only, &mask_);
    left_ = ::alarm(kAlarmSeconds);
  }
  ~ReportDeadline() {
    ::alarm(0);
    ::pthread_sigmask(SIG_SETMASK, &mask_, nullptr);
    ::sigaction(SIGALRM, &previous_, nullptr);
    if (left_ != 0) ::alarm(left_);  // the program's alarm, late by the report's time at most
  }
  ReportDeadline(const ReportDeadline&) = delete;
  ReportDeadline& operator=(const ReportDeadline&) = delete;

 private:
  struct sigaction previous_ {};
  sigset_t mask_{};
  unsigned left_ = 0;
};

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // A SIGTERM the program survives is not the end of the process: reported here, it marked the
  // MCR_LOG output written, and finalize() then skipped the log's gather, collective, while its
  // peers waited in it. If the program leaves without finalize() after all, the exit hook reports.
  if (!g_reported.load() && !program_handles(sig)) {
    const ReportDeadline deadline;
    write_crash_reports(signal_name(sig));
  }
  errno = saved_errno;
  chain(sig, info, context);
}

void on_dump_signal(int sig, siginfo_t* info, void* context) {
  g_dump_requested.store(true);
  const struct sigaction& prev = g_previous[static_cast<std::size_t>(sig)];
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN &&
             prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
  }
}

void on_terminate() {
  std::string why = "std::terminate";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      why = fmt::format("std::terminate: uncaught exception: {}", x.what());
    } catch (...) {
      why = "std::terminate: uncaught exception";
    }
  }
  write_crash_reports(why);
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

void on_exit() {
  // After finalize() there is no runtime: a clean exit. Otherwise the program left without
  // finalize() (an uncaught error, exit() after a timeout): stop the watchdog before the statics
  // it reads go, then report.
  if (!runtime_exists()) return;
  Watchdog::instance().stop();
  write_crash_reports("exit without mcr::finalize()");
}

void install(int sig, void (*handler)(int, siginfo_t*, void*)) {
  // As the handler it stands before: a program's handler keeps whether the system calls it
  // interrupts restart (glibc's signal() restarts them, Python's handlers rely on EINTR). Before a
  // default or ignored disposition, interrupted calls restart: the program expected none.
  // (Installed with SA_SIGINFO alone, a SIGTERM or `kill -USR1` made a C++ program's blocking
  // read fail with EINTR.) Not on an alternate stack, even where the handler before was (Python's
  // faulthandler): the report allocates and formats, more than such a stack holds.
  struct sigaction old {};
  if (::sigaction(sig, nullptr, &old) != 0) old = {};
  const bool own_handler = (old.sa_flags & SA_SIGINFO) != 0
                               ? old.sa_sigaction != nullptr
                               : old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN;
  struct sigaction sa {};
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | (own_handler ? (old.sa_flags & SA_RESTART) : SA_RESTART);
  sigemptyset(&sa.sa_mask);
  if (::sigaction(sig, &sa, &g_previous[static_cast<std::size_t>(sig)]) != 0) {
    std::fprintf(stderr, "mcr: cannot install the %s handler: %s\n", signal_name(sig),
                 std::strerror(errno));
  }
}

}  // namespace

bool take_dump_request() noexcept {
  return g_dump_requested.exchange(false);
}

void write_crash_reports(std::string_view reason) noexcept {
  if (g_reported.exchange(true)) return;
  const std::string path = dump_flight_record_to_dir(reason);
  if (!path.empty()) {
    std::fprintf(stderr, "mcr[%d]: flight record written to %s (%.*s)\n",
                 flight_config().world_rank, path.c_str(), static_cast<int>(reason.size()),
                 reason.data());
  }
  write_local_env_comm_log(reason);
}

void install_flight_hooks() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  (void)flight_registry();  // constructed before the exit handler is registered
  (void)flight_config();
  std::atexit(on_exit);  // also stops the watchdog thread on exit without finalize()
  bool logging = false;
  try {
    logging = requested_env_comm_log().any();  // init() has refused a bad MCR_LOG on every rank
  } catch (const std::exception&) {
  }
  if (flight_config().dir.empty() && !logging) return;
  for (int sig : kFatalSignals)
    install(sig, on_fatal_signal);
  install(SIGUSR1, on_dump_signal);
  g_previous_terminate = std::set_terminate(on_terminate);
}

}  // namespace mcr::detail
