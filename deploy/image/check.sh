#!/usr/bin/env bash
# Checks the signfleet image on a machine where `podman run` is not available: mounts the image
# (`podman image mount`, read-only) and runs its programs inside that root with chroot, in a
# private mount namespace that adds what a container runtime would (/proc, /dev, a writable
# /tmp and /data, the environment HOME=/data TMPDIR=/tmp). Checks:
#   1. `signfleet --version` runs (every shared library and the loader are in the image);
#   2. a coordinator starts on a SQLite store in /data, prints `http <addr>` and answers GET /health;
#   3. the image's /usr/bin/pdftoppm draws the page of a compressed PDF (FlateDecode) whose
#      standard fonts are not embedded, made here with Ghostscript, with the arguments the
#      coordinator gives it (Sources/Coordinator/PDFPageRenderer.swift), at 96 and 192 dpi, and
#      each PNG is byte for byte the host's pdftoppm's; nothing on standard error (a missing
#      library, a font fontconfig cannot find, a font cache it will not take);
#   3b. the image's /usr/bin/pdftotext reads the same PDF's words and boxes as the coordinator asks
#      for anchor tabs (Sources/Coordinator/PDFTextLocator.swift): the same TSV as the host's;
#   3c. the image's /usr/bin/qpdf lays that PDF over itself with the options the coordinator gives
#      it for completed documents (Sources/Coordinator/CompletedDocuments.swift): the same bytes
#      as the host's qpdf (`--deterministic-id`);
#   4. the page image route through that coordinator: the host's `signfleet node` syncs one
#      envelope with an embedded signer, POST /admin/signing-urls gives a signing URL, its page
#      opens (the session cookie), and GET …/documents/doc1/pages/1 and /2 answer 200 image/png, byte
#      for byte the host's pdftoppm's drawing of the document that coordinator serves.
# Run as root, after deploy/image/build.sh, on the machine that built it (the host's pdftoppm,
# Ghostscript and signfleet are the reference):
#   deploy/image/check.sh        IMAGE=localhost/signfleet:dev   SIGNFLEET_RELEASE_BIN=<host signfleet>
# Needs: podman, curl, poppler-utils, qpdf and ghostscript on the host; the host's signfleet for the node
# (SIGNFLEET_RELEASE_BIN, default .build/release/signfleet).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
image=${IMAGE:-localhost/signfleet:latest}
deadline=${DEADLINE:-60}
node_bin=${SIGNFLEET_RELEASE_BIN:-$repo/.build/release/signfleet}

[ "$(id -u)" -eq 0 ] || { echo "error: run as root (podman image mount and chroot need it)" >&2; exit 1; }
command -v gs >/dev/null || { echo "error: gs is missing (apt-get install ghostscript): check 3 makes its PDF with it" >&2; exit 1; }
[ -x /usr/bin/pdftoppm ] || { echo "error: /usr/bin/pdftoppm is missing (apt-get install poppler-utils): checks 3 and 4 compare with it" >&2; exit 1; }
command -v curl >/dev/null || { echo "error: curl is missing (apt-get install curl)" >&2; exit 1; }
[ -x "$node_bin" ] || { echo "error: no signfleet at $node_bin for check 4's node (set SIGNFLEET_RELEASE_BIN)" >&2; exit 1; }
work=$(mktemp -d /tmp/signfleet-image-check.XXXXXX)
mnt=$(podman image mount "$image")
coordinator=
node=
cleanup() {
    if [ -n "$node" ] && kill -0 "$node" 2>/dev/null; then kill -KILL "$node" 2>/dev/null || true; fi
    if [ -n "$coordinator" ] && kill -0 "$coordinator" 2>/dev/null; then kill -KILL "$coordinator" 2>/dev/null || true; fi
    exec 3<&- 2>/dev/null || true
    podman image unmount "$image" >/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

echo "image $image: $(podman image inspect --format '{{.Size}}' "$image") bytes ($(podman images --format '{{.Size}}' "$image")), mounted at $mnt"
echo "entrypoint: $(podman image inspect --format '{{json .Config.Entrypoint}} user {{.Config.User}}' "$image")"

# Runs a program of the image (its path inside the image, then its arguments) as the image's user,
# inside the mounted root: a command (an array), so that `"${inside[@]}" … &` gives the program's
# own pid (unshare, bash, env and chroot each exec the next). With INPUT=<host file> the file is
# copied to /tmp/input.pdf in the root's /tmp first (where the coordinator puts its PDFs).
# HOME is /data, as a runtime sets it from the image's /etc/passwd; HOME=… before the command
# changes it.
inside=(unshare --mount -- bash -c '
    set -e
    root=$1; shift
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    mount -t tmpfs -o mode=1777 tmpfs "$root/data"
    if [ -n "${INPUT:-}" ]; then install -m 0644 "$INPUT" "$root/tmp/input.pdf"; fi
    exec env -i HOME="${HOME_INSIDE:-/data}" TMPDIR=/tmp PATH=/usr/local/bin:/usr/bin \
        "$(command -v chroot)" --userspec=65532:65532 "$root" "$@"
' inside "$mnt")
signfleet=/usr/local/bin/signfleet

# 1. The binary and its libraries.
version=$("${inside[@]}" $signfleet --version)
echo "signfleet --version: $version"
[ -n "$version" ] || fail "--version printed nothing"

# 2. A coordinator (with an admin token, for check 4). It prints `curve-public-key <key>`,
# `listening <endpoint>` and `http <addr>` once bound; its standard output is read through a FIFO,
# line by line, until the http line or the deadline.
admin_token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
mkfifo "$work/out"
"${inside[@]}" $signfleet coordinator --bind 'tcp://127.0.0.1:*' --http 127.0.0.1:0 --store /data/coordinator.sqlite \
    --admin-token "$admin_token" --log-level warning >"$work/out" 2>"$work/err" &
coordinator=$!
exec 3<"$work/out"
addr= endpoint= server_key=
end=$((SECONDS + deadline))
while [ $SECONDS -lt $end ] && IFS= read -r -t $((end - SECONDS)) -u 3 line; do
    echo "coordinator: $line"
    case "$line" in
        curve-public-key\ *) server_key=${line#curve-public-key } ;;
        listening\ *) endpoint=${line#listening } ;;
        http\ *) addr=${line#http }; break ;;
    esac
done
if [ -z "$addr" ]; then
    echo "FAIL: no \`http\` line within ${deadline}s"; cat "$work/err"; exit 1
fi
health=$(curl -fsS --max-time 10 "http://$addr/health")
echo "GET http://$addr/health: $health"

# 3. The image's pdftoppm on a compressed PDF. Ghostscript writes the page with FlateDecode
# content streams and leaves the standard fonts out (-dEmbedAllFonts=false), so pdftoppm has to
# find their substitutes (URW Nimbus …) through fontconfig: a missing font, configuration or
# library in the image draws a different page, or none.
cat >"$work/page.ps" <<'EOF'
%!PS
<< /PageSize [612 792] >> setpagedevice
/y 740 def
/line { /text exch def findfont 18 scalefont setfont 72 y moveto text show /y y 30 sub def } def
/Helvetica (Helvetica: Mutual non-disclosure agreement) line
/Helvetica-Bold (Helvetica-Bold: Parties) line
/Helvetica-BoldOblique (Helvetica-BoldOblique) line
/Times-Roman (Times-Roman: signed on 25 November 2026) line
/Times-Italic (Times-Italic: the Recipient) line
/Times-BoldItalic (Times-BoldItalic) line
/Courier (Courier: ref 0123456789) line
/Courier-BoldOblique (Courier-BoldOblique) line
/Symbol (abgdp \(Symbol\)) line
/ZapfDingbats (3456 4) line
0.2 0.4 0.8 setrgbcolor 72 300 216 72 rectfill
0 setgray 2 setlinewidth 72 260 moveto 540 260 lineto stroke
72 180 moveto 160 240 240 120 330 200 curveto stroke
showpage
EOF
gs -q -dNOPAUSE -dBATCH -dSAFER -sDEVICE=pdfwrite -dCompressPages=true -dEmbedAllFonts=false -dSubsetFonts=false \
    -sOutputFile="$work/page.pdf" "$work/page.ps"
flate=$(grep -ac FlateDecode "$work/page.pdf" || true)
[ "$flate" -gt 0 ] || fail "Ghostscript wrote no FlateDecode stream in $work/page.pdf"
embedded=$(pdffonts "$work/page.pdf" 2>/dev/null | awk 'NR > 2 && $(NF-4) == "yes"' | wc -l)
echo "test PDF: $(wc -c <"$work/page.pdf") bytes, $flate FlateDecode line(s), $(pdffonts "$work/page.pdf" | awk 'NR > 2' | wc -l) fonts, $embedded embedded"
for dpi in 96 192; do
    args=(-q -png -cropbox -singlefile -f 1 -l 1 -r "$dpi")
    /usr/bin/pdftoppm "${args[@]}" "$work/page.pdf" >"$work/host-$dpi.png"
    # HOME=/nonexistent: nowhere to write a font cache, so a cache fontconfig would not take (it
    # would scan the fonts and try to write one on every render) shows on standard error.
    status=0
    HOME_INSIDE=/nonexistent INPUT="$work/page.pdf" "${inside[@]}" /usr/bin/pdftoppm "${args[@]}" /tmp/input.pdf \
        >"$work/image-$dpi.png" 2>"$work/pdftoppm-$dpi.err" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "FAIL: the image's /usr/bin/pdftoppm ${args[*]} exited $status"; cat "$work/pdftoppm-$dpi.err"; exit 1
    fi
    if [ -s "$work/pdftoppm-$dpi.err" ]; then
        echo "FAIL: the image's pdftoppm wrote on standard error:"; cat "$work/pdftoppm-$dpi.err"; exit 1
    fi
    cmp -s "$work/host-$dpi.png" "$work/image-$dpi.png" ||
        fail "at $dpi dpi the image's pdftoppm drew $(wc -c <"$work/image-$dpi.png") bytes, the host's $(wc -c <"$work/host-$dpi.png"): not the same PNG"
    echo "pdftoppm ${args[*]}: $(wc -c <"$work/image-$dpi.png") bytes of PNG, byte-identical to the host's"
done

# 3b. The image's pdftotext, for anchor tabs: the words of the same PDF, with the coordinator's arguments.
/usr/bin/pdftotext -q -tsv -cropbox "$work/page.pdf" - >"$work/host.tsv"
status=0
HOME_INSIDE=/nonexistent INPUT="$work/page.pdf" "${inside[@]}" /usr/bin/pdftotext -q -tsv -cropbox /tmp/input.pdf - \
    >"$work/image.tsv" 2>"$work/pdftotext.err" || status=$?
[ "$status" -eq 0 ] || { echo "FAIL: the image's /usr/bin/pdftotext exited $status"; cat "$work/pdftotext.err"; exit 1; }
[ ! -s "$work/pdftotext.err" ] || { echo "FAIL: the image's pdftotext wrote on standard error:"; cat "$work/pdftotext.err"; exit 1; }
grep -q "Mutual" "$work/image.tsv" || fail "the image's pdftotext found no word \"Mutual\" in the test PDF"
cmp -s "$work/host.tsv" "$work/image.tsv" || fail "the image's pdftotext read other words or boxes than the host's"
echo "pdftotext -tsv -cropbox: $(grep -c '^5' "$work/image.tsv") words, the same as the host's"

# 3c. The image's qpdf, for completed documents: the PDF laid over itself, with the coordinator's options.
qpdf_args=(--warning-exit-0 --no-warn --deterministic-id --decrypt)
/usr/bin/qpdf "${qpdf_args[@]}" "$work/page.pdf" --overlay "$work/page.pdf" -- - >"$work/host-overlay.pdf"
status=0
HOME_INSIDE=/nonexistent INPUT="$work/page.pdf" "${inside[@]}" /usr/bin/qpdf "${qpdf_args[@]}" /tmp/input.pdf --overlay /tmp/input.pdf -- - \
    >"$work/image-overlay.pdf" 2>"$work/qpdf.err" || status=$?
[ "$status" -eq 0 ] || { echo "FAIL: the image's /usr/bin/qpdf exited $status"; cat "$work/qpdf.err"; exit 1; }
cmp -s "$work/host-overlay.pdf" "$work/image-overlay.pdf" || fail "the image's qpdf wrote another PDF than the host's"
echo "qpdf --overlay: $(wc -c <"$work/image-overlay.pdf") bytes of PDF, byte-identical to the host's"

# 4. A page image through the coordinator. The demo account's return URLs are limited to
# http://127.0.0.1, so the node's device cannot open the signing page itself (its return URL is
# https://captive-signing.signfleet.invalid/return) and the embedded signer stays current.
admin() { curl -fsS --max-time 10 -H "Authorization: Bearer $admin_token" "$@"; }
demo=$(admin -X POST "http://$addr/admin/seed-demo")
account=$(printf '%s' "$demo" | grep -o '"accountID":"[^"]*"' | head -n1 | cut -d'"' -f4)
[ -n "$account" ] || fail "POST /admin/seed-demo answered $demo"
admin -d '{"add":["http://127.0.0.1"]}' "http://$addr/admin/accounts/$account/return-origins" >/dev/null
echo "POST /admin/seed-demo: account $account; its return origins: http://127.0.0.1"
# One device, one envelope with no in-person signer and one embedded remote signer (r1).
mkdir -p "$work/node"
cat >"$work/node.json" <<EOF
{"process": "node-check-1", "group": "check", "endpoint": "$endpoint",
 "dataDirectory": "$work/node", "historyFile": "$work/history.jsonl",
 "runStart": $(date +%s), "duration": $deadline,
 "email": "user1@demo.example", "secret": "demo-secret",
 "devices": [{"id": "check-1", "seed": 31}],
 "behaviour": {"envelopesPerMinute": 600, "templateFraction": 0,
   "inPersonSigners": {"lower": 0, "upper": 0}, "remoteSigners": {"lower": 1, "upper": 1},
   "embeddedFraction": 1, "signingDuration": {"lower": 0, "upper": 0}, "cancelRate": 0, "declineRate": 0,
   "sync": {"whenOnline": {}}, "maxEnvelopes": 1},
 "connectivity": {"model": {"alwaysOnline": {}}, "startOffline": 0},
 "pens": {"applePencil": 1}, "outages": [], "statsInterval": 1, "requestTimeout": 2,
 "serverKey": "$server_key"}
EOF
"$node_bin" node --plan "$work/node.json" --log-level warning >"$work/node.out" 2>"$work/node.err" &
node=$!
envelope=
end=$((SECONDS + deadline))
while [ $SECONDS -lt $end ] && kill -0 "$node" 2>/dev/null; do
    envelope=$(grep -ho '"serverEnvelope":"[^"]*"' "$work/history.jsonl" 2>/dev/null | head -n1 | cut -d'"' -f4 || true)
    [ -n "$envelope" ] && break
    sleep 0.2
done
kill -TERM "$node" 2>/dev/null || true
wait "$node" 2>/dev/null || true
node=
if [ -z "$envelope" ]; then
    echo "FAIL: the node synced no envelope within ${deadline}s"; cat "$work/node.err" "$work/history.jsonl" 2>/dev/null; exit 1
fi
echo "signfleet node ($node_bin): envelope $envelope synced"
created=$(admin -d "{\"envelopeID\":\"$envelope\",\"recipientID\":\"r1\"}" "http://$addr/admin/signing-urls")
url=$(printf '%s' "$created" | grep -o '"url":"[^"]*"' | cut -d'"' -f4 | sed 's#\\/#/#g')
[ -n "$url" ] || fail "POST /admin/signing-urls answered $created"
echo "POST /admin/signing-urls: ${url%/*}/…"
jar=$work/cookies
page=$(curl -sS --max-time 30 -c "$jar" -b "$jar" -o "$work/page.html" -w '%{http_code} %{content_type}' "$url")
[ "${page%% *}" = 200 ] || fail "GET the signing URL answered $page"
echo "GET the signing URL: $page"
path=${url#http://*/}
got=$(curl -sS --max-time 30 -b "$jar" -o "$work/document.pdf" -w '%{http_code} %{content_type}' "http://$addr/$path/documents/doc1")
[ "$got" = "200 application/pdf" ] || fail "GET …/documents/doc1 answered $got"
for ((n = 1; n <= 2; n++)); do
    got=$(curl -sS --max-time 60 -b "$jar" -o "$work/page-$n.png" -D "$work/page-$n.headers" -w '%{http_code} %{content_type}' \
        "http://$addr/$path/documents/doc1/pages/$n")
    cache=$(sed -n 's/^[Xx]-[Pp]age-[Cc]ache: *\([a-z]*\).*/\1/p' "$work/page-$n.headers")
    [ "$got" = "200 image/png" ] || { echo "FAIL: GET …/documents/doc1/pages/$n answered $got"; head -c 400 "$work/page-$n.png"; echo; exit 1; }
    # The coordinator draws a US Letter page at scale 1 with -r 96.
    /usr/bin/pdftoppm -q -png -cropbox -singlefile -f "$n" -l "$n" -r 96 "$work/document.pdf" >"$work/host-page-$n.png"
    cmp -s "$work/page-$n.png" "$work/host-page-$n.png" ||
        fail "page $n: the coordinator's PNG ($(wc -c <"$work/page-$n.png") bytes) is not the host pdftoppm's ($(wc -c <"$work/host-page-$n.png") bytes)"
    echo "GET …/documents/doc1/pages/$n: $got, X-Page-Cache $cache, $(wc -c <"$work/page-$n.png") bytes, byte-identical to the host's pdftoppm"
done

kill -TERM "$coordinator"
status=0; wait "$coordinator" || status=$?
coordinator=
echo "coordinator stopped on SIGTERM, exit $status"
[ "$status" -eq 0 ] || { echo "FAIL: coordinator exit $status"; cat "$work/err"; exit 1; }
echo "PASS"
