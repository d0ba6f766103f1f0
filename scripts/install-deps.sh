#!/usr/bin/env bash
# Installs what SignFleet needs on Debian/Ubuntu when it is missing:
# the system libraries and tools (apt) and the Python packages of the interop
# and browser tests. Safe to run again; does nothing when all is there.
set -euo pipefail

APT_PACKAGES=(libzmq3-dev libmsgpack-dev libsqlite3-dev zlib1g-dev pkg-config gcc make python3)
# Headless Chromium: the captive-signing page tests (Tests/CoordinatorTests/browser)
# and the fleet report's rendering test.
APT_PACKAGES+=(chromium chromium-driver)
# PostgreSQL 15: the PostgreSQL coordinator store's tests run a throwaway cluster
# (scripts/postgres-cluster.sh, docs/storage.md).
APT_PACKAGES+=(postgresql)
# iproute2's `ip` builds the network namespaces of the fleets-across-hosts test (MultiHostTests,
# scripts/netns-fleet.sh); tar carries a node host's histories and stores back.
APT_PACKAGES+=(iproute2 tar)
# poppler's pdftoppm draws the captive page's PDF pages (and pdfinfo reads their boxes in the
# tests); Ghostscript produces test PDFs (docs/captive-signing.md).
APT_PACKAGES+=(poppler-utils ghostscript)
# qpdf lays a completed envelope's ink and values over its documents (docs/rest-api.md,
# "Completed documents").
APT_PACKAGES+=(qpdf)
PYTHON=${SIGNFLEET_PYTHON:-python3}

apt_install() {
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    else
        echo "error: missing system packages: $*" >&2
        echo "       install them as root: apt-get install $*" >&2
        exit 1
    fi
}

if ! command -v dpkg >/dev/null 2>&1; then
    echo "warning: not a Debian-family system; make sure these are installed: ${APT_PACKAGES[*]}" >&2
else
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "==> installing system packages: ${missing[*]}"
        apt_install "${missing[@]}"
    fi
fi

if ! "$PYTHON" -c 'import msgpack' >/dev/null 2>&1; then
    echo "==> installing Python msgpack (interop tests, codec benchmark reference)"
    if ! "$PYTHON" -m pip install -q --disable-pip-version-check msgpack 2>/dev/null; then
        "$PYTHON" -m pip install -q --disable-pip-version-check --break-system-packages msgpack 2>/dev/null \
            || apt_install python3-msgpack
    fi
fi

if ! "$PYTHON" -c 'import cryptography.hazmat.primitives.asymmetric.ed25519' >/dev/null 2>&1; then
    echo "==> installing Python cryptography (the sync-payload interop test signs with Ed25519)"
    if ! "$PYTHON" -m pip install -q --disable-pip-version-check cryptography 2>/dev/null; then
        "$PYTHON" -m pip install -q --disable-pip-version-check --break-system-packages cryptography 2>/dev/null \
            || apt_install python3-cryptography
    fi
fi

if ! "$PYTHON" -c 'import selenium' >/dev/null 2>&1; then
    echo "==> installing Python selenium (captive-signing browser tests)"
    if ! "$PYTHON" -m pip install -q --disable-pip-version-check selenium 2>/dev/null; then
        "$PYTHON" -m pip install -q --disable-pip-version-check --break-system-packages selenium 2>/dev/null \
            || apt_install python3-selenium
    fi
fi

# pip first, then pip past Debian's "externally managed" guard, then Debian's package.
pip_install() {
    local module=$1 package=$2 debian=$3 why=$4
    if ! "$PYTHON" -c "import $module" >/dev/null 2>&1; then
        echo "==> installing Python $package ($why)"
        if ! "$PYTHON" -m pip install -q --disable-pip-version-check "$package" 2>/dev/null; then
            "$PYTHON" -m pip install -q --disable-pip-version-check --break-system-packages "$package" 2>/dev/null \
                || apt_install "$debian"
        fi
    fi
}

pip_install reportlab reportlab python3-reportlab "test PDFs for the captive page's rendering tests"
pip_install PIL pillow python3-pil "comparing browser screenshots with pdftoppm's drawings"
# The official DocuSign eSignature SDK: the REST API's interop tests drive the coordinator with it
# unchanged (docs/rest-api.md). Debian has no package, so pip is the only way.
if ! "$PYTHON" -c 'import docusign_esign' >/dev/null 2>&1; then
    echo "==> installing Python docusign-esign 6.x (the REST API's interop tests)"
    "$PYTHON" -m pip install -q --disable-pip-version-check 'docusign-esign>=6,<7' 2>/dev/null \
        || "$PYTHON" -m pip install -q --disable-pip-version-check --break-system-packages 'docusign-esign>=6,<7'
fi
# axe-core's axe.min.js ships inside it; Debian has no package, so pip is the only way.
if ! "$PYTHON" -c 'import axe_selenium_python' >/dev/null 2>&1; then
    echo "==> installing Python axe-selenium-python (accessibility checks in the browser tests)"
    "$PYTHON" -m pip install -q --disable-pip-version-check axe-selenium-python 2>/dev/null \
        || "$PYTHON" -m pip install -q --disable-pip-version-check --break-system-packages axe-selenium-python
fi
