#!/usr/bin/env bash
# Builds the signfleet container image without pulling anything: the release binary, the shared
# libraries `ldd` lists for it (Swift runtime, Foundation, libzmq, libsodium, libmsgpack,
# libsqlite3, zlib, glibc …) and the dynamic loader are copied into a root file system, which a
# `FROM scratch` Containerfile copies into the image (deploy/README.md).
#
#   deploy/image/build.sh                 # swift build -c release --product signfleet, then the image
#   SIGNFLEET_RELEASE_BIN=path build.sh   # use an already-built release binary, no swift build
#   IMAGE=localhost/signfleet:dev build.sh
#
# Prints `image <name> <id>` last. Needs podman (Debian: apt-get install podman buildah).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
image=${IMAGE:-localhost/signfleet:latest}

command -v podman >/dev/null || { echo "error: podman is missing (apt-get install podman buildah)" >&2; exit 1; }

if [ -n "${SIGNFLEET_RELEASE_BIN:-}" ]; then
    bin=$SIGNFLEET_RELEASE_BIN
else
    (cd "$repo" && swift build -c release --product signfleet)
    bin="$(cd "$repo" && swift build -c release --show-bin-path)/signfleet"
fi
[ -x "$bin" ] || { echo "error: no executable at $bin" >&2; exit 1; }

context=$(mktemp -d /tmp/signfleet-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
root=$context/rootfs
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/proc" "$root/sys" "$root/dev" "$root/run"
install -d -m 1777 "$root/tmp" "$root/data"
install -m 0755 "$bin" "$root/usr/local/bin/signfleet"
strip --strip-unneeded "$root/usr/local/bin/signfleet" 2>/dev/null || true

# Every library ldd resolves, at the path the loader looks for it (symbolic links followed, so
# the image holds the file itself under the name the binary asks for), and the loader itself.
copy() {
    local source=$1 target=$root$1
    [ -e "$target" ] && return 0
    mkdir -p "$(dirname "$target")"
    cp -L "$source" "$target"
}
missing=$(ldd "$bin" | awk '/not found/ {print $1}')
[ -z "$missing" ] || { echo "error: ldd cannot resolve: $missing" >&2; exit 1; }
for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    copy "$lib"
done
# The loader is also named by the path in the binary's PT_INTERP (e.g. /lib64/ld-linux-x86-64.so.2).
interp=$(readelf -l "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[ -n "$interp" ] && copy "$interp"

# Name resolution: glibc 2.34+ has the files and dns NSS modules built in; the runtime mounts
# /etc/hosts and /etc/resolv.conf.
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
printf 'root:x:0:0:root:/:/nonexistent\nsignfleet:x:65532:65532:signfleet:/data:/nonexistent\n' >"$root/etc/passwd"
printf 'root:x:0:\nsignfleet:x:65532:\n' >"$root/etc/group"

cp "$here/Containerfile" "$context/Containerfile"
echo "root file system: $(du -sh "$root" | cut -f1), $(find "$root" -type f | wc -l) files"
podman build --quiet -t "$image" -f "$context/Containerfile" "$context" >/dev/null
echo "image $image $(podman image inspect --format '{{.Id}}' "$image")"
