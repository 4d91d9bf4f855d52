#!/usr/bin/env bash
# scripts/cluster itself: bad arguments are refused with the flag, value and rule before anything is
# made; `up` twice is a no-op; hosts have their own names and reach each other only on the private
# subnet (no default route); links are shaped both ways; `link` takes a host's switch port down and
# up again; `down` leaves nothing behind, and neither does an `up` that fails part-way.
set -euo pipefail
cluster="$(cd "$(dirname "$0")/../.." && pwd)/scripts/cluster"
# Distinct for every process (the pid in hex), within the 8 characters a name may have.
MCR_CLUSTER=$(printf 'cs%06x' "$$")
export MCR_CLUSTER
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_error() {  # expect_error "words" CMD...
  local want=$1 out
  shift
  if out=$("$@" 2>&1); then fail "accepted: $*"; fi
  [[ $out == *"$want"* ]] || fail "'$*' said '$out', expected it to mention '$want'"
}

expect_error "--hosts '0': must be an integer from 1 to 64" "$cluster" up --hosts 0
expect_error "--rate '5furlongs': unit must be" "$cluster" up --rate 5furlongs
expect_error "--name 'Bad_Name'" "$cluster" --name Bad_Name status
set +e
"$cluster" up --hosts 3 --rate 100mbit
rc=$?
set -e
((rc == 77)) && { echo "SKIPPED: cannot build a namespace cluster here"; exit 77; }
((rc == 0)) || fail "up exited $rc"
trap '"$cluster" down' EXIT
out=$("$cluster" up --hosts 3 --rate 100mbit 2>&1)
[[ $out == *"already up"* ]] || fail "second up was not a no-op: $out"
expect_error "host 'h3': not a host of cluster" "$cluster" exec h3 true
[[ $("$cluster" exec h2 hostname) == h2 ]] || fail "h2 does not carry its own host name"
[[ $("$cluster" exec h1 getent hosts h2) == "198.18.0.3"*h2 ]] || fail "h1 does not resolve h2"
routes=$("$cluster" exec h1 ip -4 route show)
[[ $routes != *default* ]] || fail "a host has a default route: $routes"
"$cluster" exec h1 tc qdisc show dev eth0 | grep -q "tbf.*rate 100Mbit" || fail "h1 is not shaped"
ip netns exec "$MCR_CLUSTER-sw" tc qdisc show dev p1 | grep -q "tbf.*rate 100Mbit" ||
  fail "the switch side of h1's link is not shaped"
[[ $(timeout --kill-after=5 30 "$cluster" mpirun -np 3 hostname | sort | tr '\n' ' ') == "h0 h1 h2 " ]] ||
  fail "mpirun did not start one rank per host"
expect_error "link: 'sideways': must be 'down' or 'up'" "$cluster" link h1 sideways
"$cluster" link h1 down
ip -n "$MCR_CLUSTER-sw" link show p1 | grep -q "state DOWN" || fail "h1's switch port is not down"
"$cluster" exec h1 ip link show eth0 | grep -q "NO-CARRIER" || fail "h1's eth0 still has carrier"
"$cluster" link h1 up
ip -n "$MCR_CLUSTER-sw" link show p1 | grep -q "state DOWN" && fail "h1's switch port stayed down"
# `up` on a cluster that is up plugs back a cable left pulled.
"$cluster" link h2 down
out=$("$cluster" up --hosts 3 --rate 100mbit 2>&1)
[[ $out == *"already up"* ]] || fail "up again rebuilt the cluster: $out"
ip -n "$MCR_CLUSTER-sw" link show p2 | grep -q "state DOWN" && fail "up left h2's switch port down"
"$cluster" down
trap - EXIT
left=$(ip netns list | awk '{print $1}' | grep -c "^$MCR_CLUSTER-" || true)
((left == 0)) || fail "down left $left namespaces"
[[ ! -e /etc/netns/$MCR_CLUSTER-h0 ]] || fail "down left /etc/netns/$MCR_CLUSTER-h0"

# Namespaces gone without `down` (deleted by hand, a reboot: /run/netns is memory, /etc is not):
# `down` still removes the hosts' /etc/netns folders.
trap '"$cluster" down' EXIT
"$cluster" up --hosts 2 --rate none
for ns in $(ip netns list | awk '{print $1}' | grep "^$MCR_CLUSTER-"); do ip netns delete "$ns"; done
"$cluster" down
trap - EXIT
for h in h0 h1; do
  [[ ! -e /etc/netns/$MCR_CLUSTER-$h ]] || fail "down left /etc/netns/$MCR_CLUSTER-$h of a namespace deleted by hand"
done

# A failure part-way (here: h1's /etc/netns entry cannot be made) removes what was already made.
mkdir -p /etc/netns
touch "/etc/netns/$MCR_CLUSTER-h1"
trap 'rm -f "/etc/netns/$MCR_CLUSTER-h1"; "$cluster" down' EXIT
expect_error "up failed; removing what was made" "$cluster" up --hosts 3
left=$(ip netns list | awk '{print $1}' | grep -c "^$MCR_CLUSTER-" || true)
((left == 0)) || fail "a failed up left $left namespaces"
echo "scripts/cluster: all checks passed"
