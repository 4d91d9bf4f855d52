#include "backends/gloo/gloo_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bootstrap/host.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

std::string to_text(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return buf;
}

}  // namespace

bool is_loopback_ipv4(const std::string& address) {
  return address.starts_with("127.");
}

std::string interface_address(const std::string& iface, const char* variable) {
  const InterfaceList list;
  std::vector<std::string> with_ipv4;
  for (const ifaddrs* i = list.head(); i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (iface == i->ifa_name) return to_text(*reinterpret_cast<const sockaddr_in*>(i->ifa_addr));
    with_ipv4.emplace_back(i->ifa_name);
  }
  throw InvalidArgument(
      fmt::format("{}='{}': no such interface with an IPv4 address here "
                  "(interfaces with one: {})",
                  variable, iface, fmt::join(with_ipv4, ", ")));
}

std::optional<std::string> resolve_ipv4(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return {};
  std::string out = to_text(*reinterpret_cast<const sockaddr_in*>(res->ai_addr));
  ::freeaddrinfo(res);
  return out;
}

std::optional<std::string> address_towards(const std::string& host) {
  const auto target = resolve_ipv4(host);
  if (!target) return {};
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(9);  // any port: a UDP connect only looks up the route
  if (::inet_pton(AF_INET, target->c_str(), &peer.sin_addr) != 1) return {};
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  std::optional<std::string> out;
  sockaddr_in self{};
  socklen_t len = sizeof self;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
    out = to_text(self);
  }
  ::close(fd);
  return out;
}

std::optional<std::string> first_external_address() {
  const InterfaceList list;
  for (const ifaddrs* i = list.head(); i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    return to_text(*reinterpret_cast<const sockaddr_in*>(i->ifa_addr));
  }
  return {};
}

}  // namespace mcr::detail
