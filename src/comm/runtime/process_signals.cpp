#include "runtime/process_signals.hpp"

#include <cerrno>
#include <csignal>
#include <system_error>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail {

void ignore_default_sigpipe() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) != 0 ||
      (current.sa_handler == SIG_DFL && ::signal(SIGPIPE, SIG_IGN) == SIG_ERR)) {
    throw Error(fmt::format("mcr: init: ignoring SIGPIPE failed at process_signals.cpp:{}: {}",
                            __LINE__, std::error_code(errno, std::generic_category()).message()));
  }
}

}  // namespace mcr::detail
