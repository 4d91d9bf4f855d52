// Which machine (and network namespace) this process runs on, and which of its addresses the
// rendezvous store binds to. Used by the store setup and by backends that choose between loopback
// and a routable address.
#pragma once

#include <istream>
#include <string>
#include <vector>

struct ifaddrs;

namespace mcr::detail {

/// This host's interfaces and their addresses (getifaddrs), freed with the list. Throws
/// BackendError naming the call, file:line and errno's text when they cannot be listed (a process
/// out of descriptors or memory): an empty list read as "no such interface" or "not an address of
/// this host", a configuration error that was not one.
class InterfaceList {
 public:
  InterfaceList();
  ~InterfaceList();
  InterfaceList(const InterfaceList&) = delete;
  InterfaceList& operator=(const InterfaceList&) = delete;
  const ifaddrs* head() const noexcept { return head_; }

 private:
  ifaddrs* head_ = nullptr;
};

/// "hostname/boot_id/netns": equal for two processes exactly when they share a kernel boot and a
/// network namespace, so that loopback of one reaches the other. Host names alone are not enough:
/// containers and cloned machines repeat them, and two network namespaces of one machine do not
/// share 127.0.0.1. A part that cannot be read is "?" (then the other parts decide).
std::string host_identity();

/// The numeric addresses (IPv4 first) of the interface `name` of this host; empty when this host
/// has no interface of that name.
std::vector<std::string> interface_addresses(const std::string& name);

/// Whether `address` (numeric) is an address of one of this host's interfaces, or loopback.
bool is_local_address(const std::string& address);

/// The numeric addresses `host` resolves to (getaddrinfo, TCP), in resolver order. Throws
/// InvalidArgument naming `what` and `host` when it does not resolve.
std::vector<std::string> resolve_numeric(const std::string& host, const std::string& what);

/// The interface of the IPv4 default route in `route_table` (the text of /proc/net/route): a route
/// of destination and mask 0 that is up, the lowest metric first; empty when there is none.
std::string default_route_interface(std::istream& route_table);

/// The address peers on other hosts can reach this one at: the IPv4 address of the interface the
/// default route leaves through (/proc/net/route), else the first non-loopback address the host
/// name resolves to that belongs to this host. Throws BackendError, advising MCR_STORE_HOST, when
/// neither exists.
std::string reachable_address();

}  // namespace mcr::detail
