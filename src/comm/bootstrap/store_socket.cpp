#include "bootstrap/store_socket.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <system_error>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail::store_wire {

std::string_view file_name(const std::source_location& loc) {
  std::string_view f = loc.file_name();
  auto slash = f.rfind('/');
  return slash == std::string_view::npos ? f : f.substr(slash + 1);
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

[[noreturn]] void throw_socket_error(std::string_view call, int err, std::source_location loc) {
  throw BackendError(fmt::format("TCP store: {} failed at {}:{}: {}", call, file_name(loc),
                                 loc.line(), errno_text(err)));
}

void set_nodelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    throw_socket_error("setsockopt(TCP_NODELAY)", errno);
  }
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) throw_socket_error("fcntl(F_GETFL)", errno);
  if (::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw_socket_error("fcntl(F_SETFL)", errno);
}

}  // namespace mcr::detail::store_wire
