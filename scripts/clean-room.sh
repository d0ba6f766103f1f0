#!/usr/bin/env bash
# Runs the README's two commands — `.ci/run` (that is `make test`) and `make demo` — in a clean
# room: a Debian 12 root made with debootstrap that has only what a new machine of this project's
# kind has (the Swift toolchain and the SwiftPM package copies, bind-mounted read-only; git, gcc,
# make, Python), entered with chroot in a mount namespace of its own. Whatever else the project
# needs, its own files must install there; a step missing from them fails here, where a machine
# that was set up by hand would hide it.
#
# Usage (as root): scripts/clean-room.sh [commit]   (default: HEAD of this checkout)
#   CLEAN_ROOM_DIR   where the roots live (default /var/tmp/signfleet-clean-room): base/ is made
#                    once, room/ is a fresh copy of it for each run
#   CLEAN_ROOM_DEMO  0 to skip `make demo`
# Prints how long each step took; the whole log is in $CLEAN_ROOM_DIR/clean-room.log.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "error: the clean room needs root (debootstrap, mount, chroot)" >&2; exit 1; }
DIR=${CLEAN_ROOM_DIR:-/var/tmp/signfleet-clean-room}
# The baseline is made once (debootstrap and the machine's own packages) and copied afresh for each
# run, so nothing a run installs is there for the next one.
BASE=$DIR/base
ROOT=$DIR/room
COMMIT=$(git rev-parse "${1:-HEAD}")
SWIFT_DIR=${SWIFT_DIR:-/opt/swift}
PACKAGES_DIR=${SWIFT_PACKAGES_DIR:-/opt/swift-packages}
LOG=$DIR/clean-room.log

# What a new machine of this kind has besides the toolchain (its packages page): git, a C
# compiler and make, Python with pip; and what the Swift toolchain itself needs to run.
BASELINE=(ca-certificates git gcc g++ make python3 python3-pip curl xz-utils
    binutils libc6-dev libcurl4-openssl-dev libedit2 libgcc-12-dev libpython3-dev libsqlite3-0
    libstdc++-12-dev libxml2-dev libncurses-dev tzdata unzip procps)

if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
fi

step() { printf '==> %s\n' "$*" | tee -a "$LOG"; }

mkdir -p "$DIR"
: >"$LOG"
if [ ! -f "$BASE/.baseline-done" ]; then
    step "debootstrap bookworm into $BASE"
    start=$SECONDS
    rm -rf "$BASE"
    debootstrap --variant=minbase bookworm "$BASE" http://deb.debian.org/debian >>"$LOG" 2>&1
    cp /etc/resolv.conf "$BASE/etc/resolv.conf"
    chroot "$BASE" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${BASELINE[*]}" >>"$LOG" 2>&1
    # As on the machine: git reads github.com addresses from the package copies.
    cat >"$BASE/etc/gitconfig" <<'EOF'
[url "/opt/swift-packages/"]
	insteadOf = https://github.com/
	insteadOf = git@github.com:
	insteadOf = ssh://git@github.com/
EOF
    touch "$BASE/.baseline-done"
    step "baseline root ready in $((SECONDS - start)) s"
fi
step "a fresh copy of the baseline in $ROOT"
rm -rf "$ROOT"
cp -a "$BASE" "$ROOT"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The machine's network trust and pip settings are the machine's, not the project's: a new machine
# has them (its registries are reached through them), so the room gets them too.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$ROOT/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
    chroot "$ROOT" update-ca-certificates >>"$LOG" 2>&1
fi
if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$ROOT/etc/pip.conf"; fi

# A fresh clone of the commit, made from a bare copy so the clean room sees nothing but git's objects.
rm -rf "$ROOT/work"
mkdir -p "$ROOT/work" "$ROOT$SWIFT_DIR" "$ROOT$PACKAGES_DIR"
git clone -q --no-local "$PWD" "$ROOT/work/signfleet"
git -C "$ROOT/work/signfleet" checkout -q "$COMMIT"
# CI lays shared/ beside the clone, read-only.
if [ -d ../shared ]; then cp -r ../shared "$ROOT/work/shared" && chmod -R a-w "$ROOT/work/shared"; fi

# The room: its own mount namespace (the mounts end with it), the toolchain and packages read-only.
inside=$(cat <<EOF
set -euo pipefail
# The room's root is a mount point of its own, as / is on a machine (\`ip netns exec\` remounts it).
mount --bind "$ROOT" "$ROOT"
mount --bind "$SWIFT_DIR" "$ROOT$SWIFT_DIR" && mount -o remount,bind,ro "$ROOT$SWIFT_DIR"
mount --bind "$PACKAGES_DIR" "$ROOT$PACKAGES_DIR" && mount -o remount,bind,ro "$ROOT$PACKAGES_DIR"
if [ -d /opt/wheels ]; then mkdir -p "$ROOT/opt/wheels" && mount --bind /opt/wheels "$ROOT/opt/wheels" && mount -o remount,bind,ro "$ROOT/opt/wheels"; fi
mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
mount -t tmpfs tmpfs "$ROOT/tmp"
exec chroot "$ROOT" /usr/bin/env -i HOME=/root CI=true LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$SWIFT_DIR/usr/bin \
    /bin/bash -c '
        set -uo pipefail
        cd /work/signfleet
        start=\$SECONDS
        bash .ci/run </dev/null; ci=\$?
        echo "==> .ci/run exited \$ci after \$((SECONDS - start)) s"
        demo=0
        if [ "${CLEAN_ROOM_DEMO:-1}" != 0 ]; then
            start=\$SECONDS
            make demo </dev/null; demo=\$?
            echo "==> make demo exited \$demo after \$((SECONDS - start)) s"
        fi
        [ \$ci -eq 0 ] && [ \$demo -eq 0 ]'
EOF
)
step "clean room: .ci/run, then make demo (commit $COMMIT)"
set +e
unshare --mount --propagation private /bin/bash -c "$inside" 2>&1 | tee -a "$LOG" | grep -E '^==>|Test run with|passed, |verdict:|error:' 
status=${PIPESTATUS[0]}
set -e
step "clean room exited $status (whole log: $LOG)"
exit "$status"
