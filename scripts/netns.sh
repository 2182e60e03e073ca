# Sourced by scripts/hosts.sh and scripts/fresh-machine.sh: a "host" on
# this machine, as a network namespace linked to it by a veth pair.

# netns_link NS HOST_IF NS_IF NET: namespace NS; HOST_IF here with NET.1/24,
# NS_IF there with NET.2/24, its loopback up, its default route via NET.1.
netns_link() {
  local ns=$1 host_if=$2 ns_if=$3 net=$4
  ip netns add "$ns"
  ip link add "$host_if" type veth peer name "$ns_if" netns "$ns"
  ip addr add "$net.1/24" dev "$host_if"
  ip link set "$host_if" up
  ip -n "$ns" addr add "$net.2/24" dev "$ns_if"
  ip -n "$ns" link set "$ns_if" up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$net.1"
}
