import FleetTesting
import Logging
import Testing
import ZeroMQ

/// docs/zeromq.md's example (the doc shows this function's body): an echo server on a free port
/// that hands its endpoint to `serving` and answers every message until one says "bye".
func echoServerExample(logger: Logger, serving: (String) -> Void) async throws {
    // BEGIN EXAMPLE zeromq-echo
    let context = try ZMQContext()
    let loop = try ZMQIOLoop(context: context, logger: logger)

    var options = SocketOptions()
    options.routerMandatory = true
    let router = try await loop.makeSocket(.router, options: options)
    let endpoint = try await router.bind("tcp://127.0.0.1:*")   // the real port, from ZMQ_LAST_ENDPOINT
    serving(endpoint)                                            // tell the clients where

    for try await message in router.messages {                   // [routingID, frames...]
        try await router.send(message)                            // echo
        if message.last == Array("bye".utf8) { break }            // until a client says bye
    }

    await loop.shutdown()   // closes every socket (LINGER 0) once, stops the thread
    context.shutdown()      // zmq_ctx_shutdown + zmq_ctx_term: returns at once now
    // END EXAMPLE
}

@Suite("docs/zeromq.md")
struct EchoExampleTests {
    @Test("the example in docs/zeromq.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("zeromq-echo", in: "docs/zeromq.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the example echoes a DEALER's messages and shuts down when it says bye")
    func runs() async throws {
        var logger = Logger(label: "zeromq-echo-example")
        logger.logLevel = .critical
        let (endpoints, announce) = AsyncStream<String>.makeStream()
        let server = Task { [logger] in try await echoServerExample(logger: logger) { announce.yield($0) } }
        let endpoint = try await firstElement(of: endpoints, "the echo server's endpoint")
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:") && !endpoint.hasSuffix(":*"))

        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "zeromq-echo-client")
        let dealer = try await loop.makeSocket(.dealer)
        try await dealer.connect(endpoint)
        try await dealer.send([Array("hello".utf8), Array("world".utf8)])
        let reply = try await withDeadline(.seconds(60), "the echo") { try await dealer.receive() }
        #expect(reply == [Array("hello".utf8), Array("world".utf8)])
        try await dealer.send([Array("bye".utf8)])
        // The server leaves its loop, shuts its I/O loop and context down, and returns.
        try await withDeadline(.seconds(60), "the echo server's shutdown") { try await server.value }
        await loop.shutdown()
        context.shutdown()
    }
}
