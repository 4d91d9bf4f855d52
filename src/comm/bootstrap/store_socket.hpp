// Socket helpers of the TCP store: an owning descriptor, getaddrinfo results, socket options, and
// errors that name the call, file:line and errno's text.
#pragma once

#include <netdb.h>
#include <unistd.h>

#include <source_location>
#include <string>
#include <string_view>
#include <utility>

namespace mcr::detail::store_wire {

std::string_view file_name(const std::source_location& loc);
std::string errno_text(int err);
[[noreturn]] void throw_socket_error(std::string_view call, int err,
                                     std::source_location loc = std::source_location::current());

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) ::freeaddrinfo(head);
  }
};

void set_nodelay(int fd);
void set_nonblocking(int fd);

}  // namespace mcr::detail::store_wire
