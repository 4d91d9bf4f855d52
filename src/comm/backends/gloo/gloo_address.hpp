// Which local IPv4 address Gloo's device binds and advertises to its peers. Peers on other hosts
// connect to exactly that address, so it must be one they can reach: never a loopback address when
// ranks run on several hosts.
#pragma once

#include <optional>
#include <string>

namespace mcr::detail {

/// The IPv4 address of interface `iface` (as GLOO_SOCKET_IFNAME picks one). Throws InvalidArgument
/// naming `variable`, the interface and the interfaces that do have an IPv4 address when it has
/// none or does not exist.
std::string interface_address(const std::string& iface, const char* variable);

/// The local address the kernel would send from to reach `host` (a UDP "connect" sends nothing).
/// Empty when `host` does not resolve or has no route.
std::optional<std::string> address_towards(const std::string& host);

/// The address `name` resolves to (IPv4), if any.
std::optional<std::string> resolve_ipv4(const std::string& name);

/// True for 127.0.0.0/8.
bool is_loopback_ipv4(const std::string& address);

/// The first interface that is up, not loopback and has an IPv4 address, if any.
std::optional<std::string> first_external_address();

}  // namespace mcr::detail
