#!/usr/bin/env bash
# Network namespaces for a fleet run across "hosts" on one machine (docs/fleet.md, "Fleets across hosts").
#
#   scripts/netns-fleet.sh up TAG     makes TAG-c (the launcher and its coordinator), TAG-a and TAG-b
#                                     (node hosts), veth pairs TAGca–TAGa0 (10.77.1.1/24–10.77.1.2/24) and
#                                     TAGcb–TAGb0 (10.77.2.1/24–10.77.2.2/24), and prints the scenario's hosts: entries
#   scripts/netns-fleet.sh down TAG   SIGKILL to whatever still runs in them, then deletes them (and the veths)
#
# TAG: 1 to 10 of a-z 0-9 (veth names have at most 15 characters). Needs root.
set -euo pipefail

usage() { echo "usage: $0 up|down TAG   (TAG: 1 to 10 of a-z 0-9)" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1 tag=$2
[[ $tag =~ ^[a-z0-9]{1,10}$ ]] || usage
namespaces=("$tag-c" "$tag-a" "$tag-b")

down() {
    for ns in "${namespaces[@]}"; do
        if ip netns list | grep -qx "$ns\( (id: [0-9]*)\)\?"; then
            for pid in $(ip netns pids "$ns"); do kill -KILL "$pid" 2>/dev/null || true; done
            ip netns del "$ns"
        fi
    done
}

case $action in
up)
    trap down ERR
    for ns in "${namespaces[@]}"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    for side in a b; do
        subnet=10.77.$([ $side = a ] && echo 1 || echo 2)
        ip link add "${tag}c$side" netns "$tag-c" type veth peer name "${tag}${side}0" netns "$tag-$side"
        ip -n "$tag-c" addr add "$subnet.1/24" dev "${tag}c$side"
        ip -n "$tag-$side" addr add "$subnet.2/24" dev "${tag}${side}0"
        ip -n "$tag-c" link set "${tag}c$side" up
        ip -n "$tag-$side" link set "${tag}${side}0" up
    done
    cat <<YAML
# Run the launcher in $tag-c:  ip netns exec $tag-c signfleet fleet run <scenario>
hosts:
  - {name: a, launch: [ip, netns, exec, $tag-a], coordinator_address: 10.77.1.1, directory: /var/tmp/signfleet-$tag-a, groups: [<group>], link_down: [ip, link, set, ${tag}ca, down], link_up: [ip, link, set, ${tag}ca, up]}
  - {name: b, launch: [ip, netns, exec, $tag-b], coordinator_address: 10.77.2.1, directory: /var/tmp/signfleet-$tag-b, groups: [<group>], link_down: [ip, link, set, ${tag}cb, down], link_up: [ip, link, set, ${tag}cb, up]}
YAML
    ;;
down) down ;;
*) usage ;;
esac
