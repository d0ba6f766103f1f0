#!/usr/bin/env bash
# Builds the DocC documentation of every public library target with swift-docc-plugin, offline,
# and fails on any documentation warning (an unresolved symbol link, a topic that names nothing,
# a parameter the doc comment gets wrong). `make docs` runs it; the archives land in
# .build/plugins/Swift-DocC/outputs/. Prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
TARGETS=(MessagePack ZeroMQ FleetProtocol FleetZeroMQTransport SyncContract SignatureCapture Envelopes DeviceNode
         Coordinator CoordinatorPostgres Fleet Chaos FleetTesting LoadGenerator Thresholds WebhookListener)
args=()
for target in "${TARGETS[@]}"; do args+=(--target "$target"); done

start=$(date +%s)
"$SWIFT" package --disable-sandbox generate-documentation "${args[@]}" --warnings-as-errors
echo "documentation for ${#TARGETS[@]} targets built without warnings in $(( $(date +%s) - start )) s"
