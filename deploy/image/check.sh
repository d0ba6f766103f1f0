#!/usr/bin/env bash
# Checks the signfleet image on a machine where `podman run` is not available: mounts the image
# (`podman image mount`, read-only) and runs its entrypoint inside that root with chroot, in a
# private mount namespace that adds what a container runtime would (/proc, /dev, a writable
# /tmp and /data). Checks:
#   1. `signfleet --version` runs (every shared library and the loader are in the image);
#   2. a coordinator starts on a SQLite store in /data, prints `http <addr>` and answers GET /health.
# Run as root, after deploy/image/build.sh.   IMAGE=localhost/signfleet:dev deploy/image/check.sh
set -euo pipefail
image=${IMAGE:-localhost/signfleet:latest}
deadline=${DEADLINE:-60}

[ "$(id -u)" -eq 0 ] || { echo "error: run as root (podman image mount and chroot need it)" >&2; exit 1; }
work=$(mktemp -d /tmp/signfleet-image-check.XXXXXX)
mnt=$(podman image mount "$image")
coordinator=
cleanup() {
    if [ -n "$coordinator" ] && kill -0 "$coordinator" 2>/dev/null; then kill -KILL "$coordinator" 2>/dev/null || true; fi
    exec 3<&- 2>/dev/null || true
    podman image unmount "$image" >/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "image $image: $(podman image inspect --format '{{.Size}}' "$image") bytes ($(podman images --format '{{.Size}}' "$image")), mounted at $mnt"
echo "entrypoint: $(podman image inspect --format '{{json .Config.Entrypoint}} user {{.Config.User}}' "$image")"

# Runs the image's entrypoint with arguments, as the image's user, inside the mounted root: a
# command (an array), so that `"${inside[@]}" … &` gives the coordinator's own pid (unshare,
# bash and chroot each exec the next).
inside=(unshare --mount -- bash -c '
    set -e
    root=$1; shift
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    mount -t tmpfs -o mode=1777 tmpfs "$root/data"
    exec chroot --userspec=65532:65532 "$root" /usr/local/bin/signfleet "$@"
' inside "$mnt")

version=$("${inside[@]}" --version)
echo "signfleet --version: $version"
[ -n "$version" ] || { echo "FAIL: --version printed nothing"; exit 1; }

# The coordinator prints `listening <endpoint>` and `http <addr>` once bound; read its standard
# output through a FIFO, line by line, until the http line or the deadline.
mkfifo "$work/out"
"${inside[@]}" coordinator --bind 'tcp://127.0.0.1:*' --http 127.0.0.1:0 --store /data/coordinator.sqlite \
    --log-level warning >"$work/out" 2>"$work/err" &
coordinator=$!
exec 3<"$work/out"
addr=
end=$((SECONDS + deadline))
while [ $SECONDS -lt $end ] && IFS= read -r -t $((end - SECONDS)) -u 3 line; do
    echo "coordinator: $line"
    case "$line" in http\ *) addr=${line#http }; break ;; esac
done
if [ -z "$addr" ]; then
    echo "FAIL: no \`http\` line within ${deadline}s"; cat "$work/err"; exit 1
fi
health=$(curl -fsS --max-time 10 "http://$addr/health")
echo "GET http://$addr/health: $health"
kill -TERM "$coordinator"
status=0; wait "$coordinator" || status=$?
coordinator=
echo "coordinator stopped on SIGTERM, exit $status"
[ "$status" -eq 0 ] || { echo "FAIL: coordinator exit $status"; cat "$work/err"; exit 1; }
echo "PASS"
