#include "bootstrap/host.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line.empty()) return "?";
  return line;
}

std::string this_hostname() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "?";
  return buf.data();
}

std::string numeric(const sockaddr* sa) {
  std::array<char, NI_MAXHOST> host{};
  const socklen_t len = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(sa, len, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) != 0) return {};
  return host.data();
}

bool is_loopback(const std::string& address) {
  return address.starts_with("127.") || address == "::1";
}

}  // namespace

std::string default_route_interface(std::istream& route_table) {
  std::string line;
  std::getline(route_table, line);  // header
  std::string best;
  long best_metric = 0;
  while (std::getline(route_table, line)) {
    // Iface Destination Gateway Flags RefCnt Use Metric Mask ...: a default route is destination
    // and mask 0 (a VPN's 0.0.0.0/1 halves have destination 0 too), up (flag 0x1); the lowest
    // metric wins, as in the kernel's choice.
    std::istringstream fields(line);
    std::string iface, destination, gateway, mask;
    unsigned flags = 0;
    long refs = 0, use = 0, metric = 0;
    if (!(fields >> iface >> destination >> gateway >> std::hex >> flags >> std::dec >> refs >>
          use >> metric >> mask)) {
      continue;
    }
    if (destination != "00000000" || mask != "00000000" || (flags & 0x1U) == 0) continue;
    if (best.empty() || metric < best_metric) {
      best = iface;
      best_metric = metric;
    }
  }
  return best;
}

std::string host_identity() {
  std::string netns = "?";
  std::array<char, 128> link{};
  const ssize_t n = ::readlink("/proc/self/ns/net", link.data(), link.size() - 1);
  if (n > 0) netns.assign(link.data(), static_cast<std::size_t>(n));
  return fmt::format("{}/{}/{}", this_hostname(), first_line("/proc/sys/kernel/random/boot_id"),
                     netns);
}

InterfaceList::InterfaceList() {
  if (::getifaddrs(&head_) != 0) {
    const int err = errno;
    head_ = nullptr;
    throw BackendError(
        fmt::format("getifaddrs failed at {}:{}: {}", "host.cpp", __LINE__, std::strerror(err)));
  }
}

InterfaceList::~InterfaceList() {
  if (head_ != nullptr) ::freeifaddrs(head_);
}

std::vector<std::string> interface_addresses(const std::string& name) {
  const InterfaceList list;
  std::vector<std::string> v4;
  std::vector<std::string> v6;
  for (const ifaddrs* a = list.head(); a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || name != a->ifa_name) continue;
    if (a->ifa_addr->sa_family == AF_INET) v4.push_back(numeric(a->ifa_addr));
    // Link-local IPv6 addresses need a scope id to be reached; they are no use to peers.
    if (a->ifa_addr->sa_family == AF_INET6 &&
        !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr)) {
      v6.push_back(numeric(a->ifa_addr));
    }
  }
  v4.insert(v4.end(), v6.begin(), v6.end());
  std::erase(v4, std::string());
  return v4;
}

bool is_local_address(const std::string& address) {
  // All of 127.0.0.0/8 reaches this host (Debian names it 127.0.1.1), though lo lists only one.
  if (is_loopback(address)) return true;
  const InterfaceList list;
  for (const ifaddrs* a = list.head(); a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6) continue;
    if (numeric(a->ifa_addr) == address) return true;
  }
  return false;
}

std::vector<std::string> resolve_numeric(const std::string& host, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* head = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &head);
  if (rc != 0) {
    throw InvalidArgument(
        fmt::format("{}='{}' does not resolve to an address: {}", what, host, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(head, &::freeaddrinfo);
  std::vector<std::string> out;
  for (addrinfo* ai = head; ai != nullptr; ai = ai->ai_next) {
    std::string a = numeric(ai->ai_addr);
    if (!a.empty() && std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

std::string reachable_address() {
  std::ifstream routes("/proc/net/route");
  if (const std::string iface = default_route_interface(routes); !iface.empty()) {
    for (const auto& a : interface_addresses(iface))
      if (a.find(':') == std::string::npos) return a;
  }
  const std::string name = this_hostname();
  try {
    for (const auto& a : resolve_numeric(name, "the host name"))
      if (!is_loopback(a) && is_local_address(a)) return a;
  } catch (const InvalidArgument&) {
    // No resolvable host name: fall through to the error below.
  }
  throw BackendError(fmt::format(
      "the rendezvous store needs an address that ranks on other hosts can reach, but this host "
      "({}) has no default route and its name resolves to no non-loopback address of its own; set "
      "MCR_STORE_HOST to the interface to use (e.g. MCR_STORE_HOST=eth0)",
      name));
}

}  // namespace mcr::detail
