import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import Synchronization
import ZeroMQ

/// A device's connection while it is online: a ``FleetClient`` (its own DEALER socket,
/// routing id = device id) with the task keeping it up.
///
/// An offline device has no link at all — no socket, no heartbeats — as an app that checks
/// reachability before it tries the network. Going online opens a new link (a client cannot
/// be restarted once stopped).
final class DeviceLink: Sendable {
    let client: FleetClient
    private let task: Task<Void, Never>

    init(configuration: FleetClientConfiguration, loop: ZMQIOLoop, logger: Logger) {
        let client = FleetClient(configuration: configuration, loop: loop, logger: logger)
        self.client = client
        task = Task { await client.run() }
    }

    /// Closes the socket and waits until the connection task has ended.
    func close() async {
        task.cancel()
        await client.stop()
        await task.value
    }
}

/// The device node's account and template services, bound to whichever link is open now
/// (the node is opened once, the links come and go). Offline, they fail at once with a
/// retryable error, as the SDK does without reachability.
final class LinkedServices: AccountService, TemplateService {
    private let current = Mutex<FleetClient?>(nil)

    func attach(_ client: FleetClient?) {
        current.withLock { $0 = client }
    }

    private func client() throws -> FleetClient {
        guard let client = current.withLock({ $0 }) else {
            throw FleetError(.timeout, "the device is offline", retryable: true)
        }
        return client
    }

    func userInfo(accessToken: String) async throws -> UserInfo {
        try await RemoteAccountService(client: try client()).userInfo(accessToken: accessToken)
    }

    func listTemplates(accessToken: String) async throws -> [Envelopes.TemplateSummary] {
        try await RemoteTemplateService(client: try client()).listTemplates(accessToken: accessToken)
    }

    func fetchTemplate(id: String, accessToken: String) async throws -> EnvelopeTemplate {
        try await RemoteTemplateService(client: try client()).fetchTemplate(id: id, accessToken: accessToken)
    }
}
