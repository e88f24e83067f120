#!/usr/bin/env bash
# Hosts on one machine: Linux network namespaces joined by veth pairs on a bridge, own addresses.
#
#   tools/netns_topology.sh up NAME HOST...     create (removes a leftover NAME topology first)
#   tools/netns_topology.sh down NAME           remove everything of NAME (idempotent; kills
#                                               the processes still running in its namespaces)
#   tools/netns_topology.sh cut NAME HOST       pull HOST's cable (its link down)
#   tools/netns_topology.sh restore NAME HOST   plug it back
#   tools/netns_topology.sh check               exit 0 when namespaces can be made here
#
# Layout: namespace NAME-sw holds the switch (bridge br0, multicast snooping off so DDS discovery
# multicast floods every port); each HOST gets namespace NAME-HOST with lo and eth0 =
# $SUBNET.<2+k>/24 (k = its position), its peer port pK on the bridge; a multicast route on eth0
# (DDS discovery uses 239.255.0.1). Nothing is added to the caller's own namespace.
# Needs root (CAP_NET_ADMIN). SUBNET defaults to 10.231.77.
set -euo pipefail

SUBNET="${SUBNET:-10.231.77}"
cmd="${1:-}"
name="${2:-}"

die() { echo "netns_topology: $*" >&2; exit 2; }
exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

down() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${name}-" || true); do
    # kill what still runs there, then delete the namespace (its veths go with it)
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}

case "$cmd" in
  check)
    probe="mjmrprobe$$"
    if ip netns add "$probe" 2>/dev/null; then ip netns del "$probe"; exit 0; fi
    echo "netns_topology: cannot create network namespaces here (needs root / CAP_NET_ADMIN)" >&2
    exit 1 ;;
  up)
    [ -n "$name" ] && [ "$#" -ge 3 ] || die "usage: $0 up NAME HOST..."
    [ "${#name}" -le 8 ] || die "NAME must be at most 8 characters, got '$name'"
    shift 2
    down
    trap 'down' ERR   # a failed build leaves nothing behind
    sw="${name}-sw"
    ip netns add "$sw"
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge mcast_snooping 0
    ip -n "$sw" link set br0 up
    k=0
    for host in "$@"; do
      ns="${name}-${host}"
      ip netns add "$ns"
      ip -n "$ns" link set lo up
      ip link add "mjmr$$p$k" netns "$ns" type veth peer name "p$k" netns "$sw"
      ip -n "$ns" link set "mjmr$$p$k" name eth0
      ip -n "$sw" link set "p$k" master br0
      ip -n "$sw" link set "p$k" up
      ip -n "$ns" addr add "$SUBNET.$((k + 2))/24" dev eth0
      ip -n "$ns" link set eth0 up
      ip -n "$ns" route add 224.0.0.0/4 dev eth0
      echo "$host $SUBNET.$((k + 2))"
      k=$((k + 1))
    done
    trap - ERR ;;
  down)
    [ -n "$name" ] || die "usage: $0 down NAME"
    down ;;
  cut|restore)
    host="${3:-}"
    [ -n "$name" ] && [ -n "$host" ] || die "usage: $0 $cmd NAME HOST"
    ns="${name}-${host}"
    exists "$ns" || die "no namespace $ns"
    if [ "$cmd" = cut ]; then
      ip -n "$ns" link set eth0 down
    else
      ip -n "$ns" link set eth0 up
      ip -n "$ns" route replace 224.0.0.0/4 dev eth0
    fi ;;
  *) die "usage: $0 up NAME HOST... | down NAME | cut NAME HOST | restore NAME HOST | check" ;;
esac
