import FleetTesting
import Foundation
import Synchronization
import Testing
import CZeroMQ
@testable import ZeroMQ

/// Runs a blocking call (zmq_ctx_term) on its own thread so it never blocks the cooperative pool.
func onOwnThread(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let thread = Thread {
            body()
            continuation.resume()
        }
        thread.start()
    }
}

/// A context and loop torn down (loop, then context) under a deadline after `body`.
func withLoop<T: Sendable>(
    _ body: @escaping @Sendable (ZMQContext, ZMQIOLoop) async throws -> T
) async throws -> T {
    let context = try ZMQContext()
    let loop = try ZMQIOLoop(context: context, label: "zmq-test")
    let result: Result<T, Error>
    // A generous deadline: it is there to end a hang, and a test sharing two cores with the
    // whole suite (or a pinned, starved run) may legitimately take tens of seconds.
    do { result = .success(try await withDeadline(.seconds(120), "test body") { try await body(context, loop) }) }
    catch { result = .failure(error) }
    try await withDeadline(.seconds(120), "I/O loop shutdown") { await loop.shutdown() }
    try await withDeadline(.seconds(120), "context termination") { await onOwnThread { context.shutdown() } }
    let statistics = loop.statistics
    #expect(statistics.socketsOpened == statistics.socketsClosed, "every socket closed exactly once")
    return try result.get()
}

/// Waits for the first monitor event of `kind`, skipping the others.
func waitForEvent(_ kind: MonitorEvent.Kind, on iterator: inout AsyncStream<MonitorEvent>.Iterator) async throws -> MonitorEvent {
    while let event = await iterator.next() {
        if event.kind == kind { return event }
    }
    throw ZMQError(errno: 0, operation: "monitor", message: "monitor stream ended before \(kind)")
}

/// A ROUTER on a loopback port that echoes every message (until it is closed), and a DEALER
/// connected to it, both on `loop`.
func echoPair(on loop: ZMQIOLoop) async throws -> (router: AsyncSocket, dealer: AsyncSocket, echo: Task<Void, any Error>) {
    let router = try await loop.makeSocket(.router)
    let endpoint = try await router.bind("tcp://127.0.0.1:*")
    let dealer = try await loop.makeSocket(.dealer)
    try await dealer.connect(endpoint)
    let echo = Task {
        for try await message in router.messages { try await router.send(message) }
    }
    return (router, dealer, echo)
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

// MARK: Child processes

struct ChildFailure: Error, CustomStringConvertible {
    var description: String
}

/// The C peer (raw libzmq), compiled once per test run into a temporary directory.
let cPeer = Task<String, Error> {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-zmq-\(getpid())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let source = directory.appendingPathComponent("zmq_peer.c")
    let binary = directory.appendingPathComponent("zmq_peer")
    try cPeerSource.write(to: source, atomically: true, encoding: .utf8)
    let compiler = try ChildProcess.launch("/usr/bin/env", ["cc", "-O1", "-o", binary.path, source.path, "-lzmq"], name: "cc")
    let status = try await compiler.waitForExit(timeout: .seconds(120))
    guard status == 0 else { throw ChildFailure(description: "cc failed with \(status) compiling \(source.path): \(compiler.output)") }
    return binary.path
}

/// `zmq_peer dealer <endpoint> <routing-id> <count>`: sends `count` messages [seq, "from-c"],
/// expects each echoed back, exits 0 on success.
/// `zmq_peer router <endpoint>`: binds, prints the bound endpoint, echoes every message.
let cPeerSource = #"""
#include <zmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int echo_router(void *ctx, const char *endpoint) {
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(s, endpoint) != 0) { fprintf(stderr, "bind: %s\n", zmq_strerror(zmq_errno())); return 3; }
    char bound[256]; size_t size = sizeof bound;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, bound, &size);
    printf("%s\n", bound);
    fflush(stdout);
    for (;;) {
        zmq_msg_t parts[16]; int count = 0, more = 1;
        while (more && count < 16) {
            zmq_msg_init(&parts[count]);
            if (zmq_msg_recv(&parts[count], s, 0) < 0) return 4;
            more = zmq_msg_more(&parts[count]);
            count++;
        }
        for (int i = 0; i < count; i++) {
            if (zmq_msg_send(&parts[i], s, i + 1 < count ? ZMQ_SNDMORE : 0) < 0) zmq_msg_close(&parts[i]);
        }
    }
}

static int dealer(void *ctx, const char *endpoint, const char *id, int n) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0, timeout = 10000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id));
    if (zmq_connect(s, endpoint) != 0) return 3;
    for (int i = 0; i < n; i++) {
        char seq[32], buf[64];
        int len = snprintf(seq, sizeof seq, "%d", i);
        if (zmq_send(s, seq, len, ZMQ_SNDMORE) < 0 || zmq_send(s, "from-c", 6, 0) < 0) return 4;
        int r = zmq_recv(s, buf, sizeof buf, 0);
        if (r != len || memcmp(buf, seq, len) != 0) return 5;
        r = zmq_recv(s, buf, sizeof buf, 0);
        if (r != 6 || memcmp(buf, "from-c", 6) != 0) return 6;
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    return 0;
}

int main(int argc, char **argv) {
    void *ctx = zmq_ctx_new();
    if (argc == 3 && strcmp(argv[1], "router") == 0) return echo_router(ctx, argv[2]);
    if (argc == 5 && strcmp(argv[1], "dealer") == 0) return dealer(ctx, argv[2], argv[3], atoi(argv[4]));
    fprintf(stderr, "usage: zmq_peer router <endpoint> | dealer <endpoint> <id> <count>\n");
    return 2;
}
"""#

