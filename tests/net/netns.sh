# Network namespaces as hosts, for the tests/net scripts and bench/net_compare.sh.
# netns_up K creates K "hosts" (namespaces $NS_PREFIX0..K-1, each with eth0 = 10.213.<n>.<h+1>/24)
# joined by veth pairs to a bridge inside a private switch namespace, so the address range
# exists only there and no traffic reaches the machine's own interfaces. netns_down removes
# everything (install it with trap). netns_usable says why not (then the caller SKIPs).
NETNS_ID=${NETNS_ID:-$$}
NS_PREFIX="wft${NETNS_ID}h"
NS_SWITCH="wft${NETNS_ID}sw"
NETNS_SUBNET=${NETNS_SUBNET:-10.213.$((NETNS_ID % 200 + 20))}
NETNS_HOSTS=0

netns_usable() {
  [ "$(id -u)" = 0 ] || { echo "needs root"; return 1; }
  command -v ip >/dev/null || { echo "needs ip (iproute2)"; return 1; }
  ip netns add "${NS_SWITCH}probe" 2>/dev/null || { echo "cannot create network namespaces"; return 1; }
  ip netns del "${NS_SWITCH}probe"
  return 0
}

netns_addr() { echo "$NETNS_SUBNET.$(($1 + 1))"; }

netns_up() {
  local k=$1 h
  NETNS_HOSTS=$k
  ip netns add "$NS_SWITCH" || return 1
  ip -n "$NS_SWITCH" link add br0 type bridge || return 1
  ip -n "$NS_SWITCH" link set br0 up
  ip -n "$NS_SWITCH" link set lo up
  for ((h = 0; h < k; h++)); do
    ip netns add "$NS_PREFIX$h" || return 1
    ip -n "$NS_PREFIX$h" link set lo up
    ip link add "wv${NETNS_ID}h$h" netns "$NS_PREFIX$h" type veth peer name "p$h" netns "$NS_SWITCH" || return 1
    ip -n "$NS_PREFIX$h" link set "wv${NETNS_ID}h$h" name eth0
    ip -n "$NS_PREFIX$h" addr add "$(netns_addr "$h")/24" dev eth0
    ip -n "$NS_PREFIX$h" link set eth0 up
    ip -n "$NS_SWITCH" link set "p$h" master br0
    ip -n "$NS_SWITCH" link set "p$h" up
  done
  return 0
}

netns_down() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^wft${NETNS_ID}(h[0-9]+|sw)$"); do
    # Processes still inside would keep the namespace's network alive: end ours first.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  return 0
}

# The switch-side port of host h, for link-down tests, and the host's own interface.
netns_port() { echo "p$1"; }
