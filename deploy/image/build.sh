#!/usr/bin/env bash
# Builds the signfleet container image without pulling anything: the release binary, the shared
# libraries `ldd` lists for it (Swift runtime, Foundation, libzmq, libsodium, libmsgpack,
# libsqlite3, zlib, glibc …) and the dynamic loader are copied into a root file system, which a
# `FROM scratch` Containerfile copies into the image (deploy/README.md). For the captive signing
# page's images (docs/captive-signing.md, "Page images") the host's poppler `pdftoppm` goes in at
# /usr/bin/pdftoppm (and `pdftotext`, which finds anchor tabs' strings, and `qpdf`, which lays a
# completed envelope's ink over its documents, docs/rest-api.md) with the libraries `ldd` lists for them, the fontconfig configuration, the 14
# URW fonts poppler draws the PDF standard fonts with when a PDF does not embed them, and a
# fontconfig cache of them.
#
#   deploy/image/build.sh                 # swift build -c release --product signfleet, then the image
#   SIGNFLEET_RELEASE_BIN=path build.sh   # use an already-built release binary, no swift build
#   IMAGE=localhost/signfleet:dev build.sh
#
# Prints `image <name> <id>` last. Needs podman (Debian: apt-get install podman buildah), and from
# the host: poppler-utils, qpdf, fonts-urw-base35, fontconfig.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
image=${IMAGE:-localhost/signfleet:latest}

command -v podman >/dev/null || { echo "error: podman is missing (apt-get install podman buildah)" >&2; exit 1; }

# What the page renderer needs from the host, checked before anything is built.
pdftoppm=/usr/bin/pdftoppm
pdftotext=/usr/bin/pdftotext
qpdf=/usr/bin/qpdf
urw=/usr/share/fonts/opentype/urw-base35
# The fonts poppler substitutes (through fontconfig's aliases, conf.d/61-urw-*.conf) for the 14
# standard PDF fonts a PDF need not embed: Helvetica, Times and Courier in their four styles,
# Symbol and ZapfDingbats.
fonts="NimbusSans-Regular NimbusSans-Bold NimbusSans-Italic NimbusSans-BoldItalic
NimbusRoman-Regular NimbusRoman-Bold NimbusRoman-Italic NimbusRoman-BoldItalic
NimbusMonoPS-Regular NimbusMonoPS-Bold NimbusMonoPS-Italic NimbusMonoPS-BoldItalic
StandardSymbolsPS D050000L"
[ -x "$pdftoppm" ] || { echo "error: $pdftoppm is missing (apt-get install poppler-utils): the image's page renderer" >&2; exit 1; }
[ -x "$pdftotext" ] || { echo "error: $pdftotext is missing (apt-get install poppler-utils): the image's anchor tab locator" >&2; exit 1; }
[ -x "$qpdf" ] || { echo "error: $qpdf is missing (apt-get install qpdf): the image's completed documents" >&2; exit 1; }
for font in $fonts; do
    [ -f "$urw/$font.otf" ] || { echo "error: $urw/$font.otf is missing (apt-get install fonts-urw-base35): the fonts of non-embedded standard PDF fonts" >&2; exit 1; }
done
[ -f /etc/fonts/fonts.conf ] || { echo "error: /etc/fonts/fonts.conf is missing (apt-get install fontconfig-config)" >&2; exit 1; }
command -v fc-cache >/dev/null || { echo "error: fc-cache is missing (apt-get install fontconfig): the image's font cache" >&2; exit 1; }

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
mkdir -p "$root/usr/local/bin" "$root/usr/bin" "$root/etc" "$root/proc" "$root/sys" "$root/dev" "$root/run"
install -d -m 1777 "$root/tmp" "$root/data"
install -m 0755 "$bin" "$root/usr/local/bin/signfleet"
strip --strip-unneeded "$root/usr/local/bin/signfleet" 2>/dev/null || true
install -m 0755 "$pdftoppm" "$root/usr/bin/pdftoppm"
install -m 0755 "$pdftotext" "$root/usr/bin/pdftotext"
install -m 0755 "$qpdf" "$root/usr/bin/qpdf"

# Every library ldd resolves, at the path the loader looks for it (symbolic links followed, so
# the image holds the file itself under the name the binary asks for), and the loader itself.
copy() {
    local source=$1 target=$root$1
    [ -e "$target" ] && return 0
    mkdir -p "$(dirname "$target")"
    cp -L "$source" "$target"
}
libraries() {
    local program=$1 missing interp lib
    missing=$(ldd "$program" | awk '/not found/ {print $1}')
    [ -z "$missing" ] || { echo "error: ldd cannot resolve for $program: $missing" >&2; exit 1; }
    for lib in $(ldd "$program" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
        copy "$lib"
    done
    # The loader is also named by the path in the binary's PT_INTERP (e.g. /lib64/ld-linux-x86-64.so.2).
    interp=$(readelf -l "$program" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
    if [ -n "$interp" ]; then copy "$interp"; fi
}
libraries "$bin"
libraries "$pdftoppm"
libraries "$pdftotext"
libraries "$qpdf"

# Fonts for pdftoppm: poppler finds a font a PDF does not embed through fontconfig, so the image
# has the host's configuration (/etc/fonts, conf.d's links followed), the 14 URW fonts above at
# their Debian path, and a cache of them made here (fc-cache --sysroot), so that no render scans
# the font directories (each render is a new process) or tries to write a cache. Fontconfig takes
# a cache as valid when it records its directory's mtime to the nanosecond, which the image's
# layer does not keep, or when the directory's mtime is 0: the font directories get mtime 0.
mkdir -p "$root/etc/fonts/conf.d" "$root$urw" "$root/var/cache/fontconfig"
cp -L /etc/fonts/fonts.conf "$root/etc/fonts/"
for conf in /etc/fonts/conf.d/*.conf; do
    if [ -e "$conf" ]; then cp -L "$conf" "$root/etc/fonts/conf.d/"; fi  # a dangling link: its package is gone
done
for font in $fonts; do cp "$urw/$font.otf" "$root$urw/"; done
touch -d @0 "$root/usr/share/fonts" "$root/usr/share/fonts/opentype" "$root$urw"
fc-cache --sysroot "$root" --system-only --really-force
[ -n "$(ls "$root/var/cache/fontconfig")" ] || { echo "error: fc-cache wrote no cache in $root/var/cache/fontconfig" >&2; exit 1; }

# Name resolution: glibc 2.34+ has the files and dns NSS modules built in; the runtime mounts
# /etc/hosts and /etc/resolv.conf.
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
printf 'root:x:0:0:root:/:/nonexistent\nsignfleet:x:65532:65532:signfleet:/data:/nonexistent\n' >"$root/etc/passwd"
printf 'root:x:0:\nsignfleet:x:65532:\n' >"$root/etc/group"

cp "$here/Containerfile" "$context/Containerfile"
echo "root file system: $(du -sh "$root" | cut -f1), $(find "$root" -type f | wc -l) files"
podman build --quiet -t "$image" -f "$context/Containerfile" "$context" >/dev/null
echo "image $image $(podman image inspect --format '{{.Id}}' "$image")"
