import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import LoadGenerator
import Logging
import SignatureCapture
import Synchronization
import ZeroMQ

/// One backend of a backend group (docs/scenarios.md, "`backend`"): an integration that, at
/// Poisson-distributed times, runs the embedded-signing flow through the coordinator's REST API —
/// create an envelope with one embedded signer, ask for the recipient view, open the signing page,
/// sign it (or decline it, by `decline_rate`; or void it instead, by `void_rate`), and fetch the combined document after a signature —
/// and logs each step's outcome to `backend/<process>.jsonl` (``BackendEvent``).
///
/// Its access token comes from the account's user through the wire's `auth.token` (a REST client
/// gets its token from OAuth; the fleet's user has a password instead), again when the REST API
/// answers 401. Its random choices derive from its seed. On drain it starts no new ceremony and
/// cancels the one in flight.
final class BackendWorker: Sendable {
    let id: String
    let plan: NodePlan
    let backend: BackendPlan
    let seed: UInt64
    let loop: ZMQIOLoop
    let log: HistoryWriter
    let logger: Logger
    /// Waits (the gaps between arrivals) are on `clock`; the schedule's times (the run's start and
    /// end, each arrival, each log line's `time`) are seconds since 1970 on `wall`, as the node's.
    let clock: any FleetClock
    let wall: WallClock
    private let state = Mutex(State())

    struct State {
        var draining = false
        /// The ceremony running now, if any.
        var inFlight: Task<Void, Never>?
        var token: String?
        var drained: [CheckedContinuation<Void, Never>] = []
        /// What the ceremony in flight is doing, and since when (wall seconds): ``describe()``.
        var doing: (ceremony: Int, step: String, since: Double)?
    }

    init(
        id: String, plan: NodePlan, backend: BackendPlan, seed: UInt64, loop: ZMQIOLoop, log: HistoryWriter, logger: Logger,
        clock: any FleetClock = ContinuousClock(), wall: WallClock = .system
    ) {
        self.clock = clock
        self.wall = wall
        self.id = id
        self.plan = plan
        self.backend = backend
        self.seed = seed
        self.loop = loop
        self.log = log
        self.logger = logger
    }

    /// Runs ceremonies until the run's duration ends, then waits (the node ends it at the drain).
    /// Arrival times are a Poisson process's (each the previous one plus an exponential gap); a
    /// backend runs one ceremony at a time, so one whose time came while the previous ran starts
    /// when that one ends.
    func run() async throws {
        var random = SeededRandom(seed: seed)
        let end = plan.runStart + plan.duration
        var number = 0
        let rate = backend.settings.envelopesPerMinute / 60
        var arrival = max(plan.runStart, wall.secondsSince1970)
        while !Task.isCancelled, rate > 0 {
            arrival += -log1p(-Double.random(in: 0..<1, using: &random)) / rate
            let outcome = backend.settings.outcome(draw: Double.random(in: 0..<1, using: &random))
            guard arrival < end else { break }
            // Finite and under the run's duration (arrival < end), so the conversion cannot trap.
            let wait = arrival - wall.secondsSince1970
            if wait > 0 { try await clock.sleep(for: .milliseconds(Int64((wait * 1000).rounded(.up)))) }
            number += 1
            // A task of its own, so that the drain can cancel the ceremony in flight.
            let ceremony = Task { [number] in await self.ceremony(number: number, outcome: outcome) }
            let go = state.withLock { state -> Bool in
                guard !state.draining else { return false }
                state.inFlight = ceremony
                return true
            }
            guard go else {
                ceremony.cancel()
                break
            }
            await withTaskCancellationHandler { await ceremony.value } onCancel: { ceremony.cancel() }
            finishCeremony()
        }
        // Nothing more to do: wait to be stopped (a worker ending early reads as a failure).
        while !Task.isCancelled { try await clock.sleep(for: .seconds(3600)) }
    }

    /// Starts no new ceremony, cancels the one in flight (its unfinished step is logged as
    /// `cancelled`: a failed step, which the checker does not judge) and returns once it has ended.
    func drain() async {
        await withCheckedContinuation { continuation in
            let running = state.withLock { state -> Task<Void, Never>? in
                state.draining = true
                if let ceremony = state.inFlight {
                    state.drained.append(continuation)
                    return ceremony
                }
                return nil
            }
            if let running { running.cancel() } else { continuation.resume() }
        }
    }

    /// What the worker is doing now, for the node's log when its drain takes long.
    func describe() -> String {
        let now = wall.secondsSince1970
        return state.withLock { state in
            guard let doing = state.doing, state.inFlight != nil else { return "no ceremony in flight (draining: \(state.draining))" }
            return "ceremony \(doing.ceremony) at \(doing.step) for \(String(format: "%.1f", now - doing.since)) s (draining: \(state.draining))"
        }
    }

    private func doing(_ number: Int, _ step: String) {
        let now = wall.secondsSince1970
        state.withLock { $0.doing = (number, step, now) }
    }

    private func finishCeremony() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.inFlight = nil
            state.doing = nil
            defer { state.drained = [] }
            return state.drained
        }
        for continuation in waiting { continuation.resume() }
    }

    private func record(_ step: BackendEvent.Step, envelope: String?, result: String, detail: String? = nil) {
        // The token expired (or the coordinator forgot it): the next ceremony logs in again.
        if result == "rest.401" { state.withLock { $0.token = nil } }
        do {
            try log.appendLine(BackendEvent(time: wall.secondsSince1970, backend: id, step: step, envelope: envelope, result: result, detail: detail))
        } catch {
            logger.error("cannot write the backend log", metadata: ["error": "\(error)"])
        }
    }

    // MARK: The ceremony

    /// `outcome`: `.sign`, `.decline` or `.void` (``BackendSettings/outcome(draw:)``).
    private func ceremony(number: Int, outcome: BackendEvent.Step) async {
        doing(number, "login")
        guard let token = await token() else { return }
        let client = RESTLoadClient(configuration: RESTCeremonyConfiguration(baseURL: backend.baseURL, token: token, requestTimeout: .seconds(30)))
        defer { client.close() }
        let account: String
        doing(number, "userinfo")
        do {
            let info = try await client.json("GET", "/oauth/userinfo", expect: 200)
            guard let found = (info["accounts"] as? [[String: Any]])?.first?["account_id"] as? String else {
                throw CeremonyFailure(kind: "rest.userinfo", "GET /oauth/userinfo named no account")
            }
            account = found
        } catch {
            // Logged as a failed login: the ceremony could not start.
            record(.login, envelope: nil, result: Self.result(error), detail: "GET /oauth/userinfo: \(error)")
            return
        }
        let prefix = "/restapi/v2.1/accounts/\(account)"
        let clientUserID = "\(id)-\(number)"
        let name = "Backend signer \(id) \(number)", email = "\(clientUserID)@backend.example"
        let returnURL = backend.baseURL + "/signfleet-backend-return"
        let definition: [String: Any] = [
            "emailSubject": "Backend envelope \(clientUserID)", "status": "sent",
            "documents": [["documentId": "1", "name": "Agreement", "fileExtension": "pdf", "documentBase64": Self.document]],
            "recipients": [
                "signers": [[
                    "recipientId": "1", "name": name, "email": email, "clientUserId": clientUserID,
                    "tabs": ["signHereTabs": [["documentId": "1", "pageNumber": "1", "xPosition": "100", "yPosition": "500"]]],
                ]]
            ],
        ]
        let envelopeID: String
        doing(number, "create")
        do {
            let created = try await client.json("POST", "\(prefix)/envelopes", body: definition, expect: 201)
            guard let id = created["envelopeId"] as? String else { throw CeremonyFailure(kind: "rest.create", "no envelopeId") }
            envelopeID = id
            record(.create, envelope: id, result: "ok")
        } catch {
            // The answer was lost or refused: whether the server made it is for the checker to see.
            record(.create, envelope: nil, result: Self.result(error), detail: "\(error)")
            return
        }
        if outcome == .void {
            doing(number, "void")
            do {
                _ = try await client.json(
                    "PUT", "\(prefix)/envelopes/\(envelopeID)", body: ["status": "voided", "voidedReason": "Voided by backend \(id)"], expect: 200)
                record(.void, envelope: envelopeID, result: "ok")
            } catch {
                record(.void, envelope: envelopeID, result: Self.result(error), detail: "\(error)")
            }
            return
        }
        let declines = outcome == .decline
        let step: BackendEvent.Step = declines ? .decline : .sign
        doing(number, step.rawValue)
        do {
            let view = try await client.json(
                "POST", "\(prefix)/envelopes/\(envelopeID)/views/recipient",
                body: ["returnUrl": returnURL, "userName": name, "email": email, "clientUserId": clientUserID, "authenticationMethod": "none"],
                expect: 201)
            guard let url = view["url"] as? String else { throw CeremonyFailure(kind: "rest.view", "no url") }
            let page = try await client.raw("GET", url)
            guard page.status == 200, let cookie = page.headers["set-cookie"]?.split(separator: ";").first.map(String.init),
                let csrf = RESTLoadClient.csrf(in: String(decoding: page.body, as: UTF8.self))
            else { throw CeremonyFailure(kind: "rest.open", "the signing page answered \(page.status)") }
            let form: String
            if declines {
                form = "action=decline&csrf=\(csrf)&reason=Declined%20by%20the%20backend%27s%20signer"
            } else {
                let typed = "{\"typed\":\"\(name)\"}".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                form = "action=finish&csrf=\(csrf)&sig-0=\(typed)"
            }
            let answered = try await client.raw("POST", url, form: form, cookie: cookie)
            let event = declines ? "event=decline" : "event=signing_complete"
            guard answered.status == 303, answered.headers["location"]?.contains(event) == true else {
                throw CeremonyFailure(kind: "rest.\(step.rawValue)", "the page answered \(answered.status) \(answered.headers["location"] ?? "")")
            }
            record(step, envelope: envelopeID, result: "ok")
        } catch {
            record(step, envelope: envelopeID, result: Self.result(error), detail: "\(error)")
            return
        }
        guard !declines else { return }
        doing(number, "combined")
        do {
            let combined = try await client.raw("GET", "\(prefix)/envelopes/\(envelopeID)/documents/combined", authorized: true)
            guard combined.status == 200, combined.body.starts(with: Array("%PDF-".utf8)) else {
                throw CeremonyFailure(kind: combined.status == 200 ? "rest.combined" : "rest.\(combined.status)", "the combined document answered \(combined.status)")
            }
            record(.combined, envelope: envelopeID, result: "ok")
        } catch {
            record(.combined, envelope: envelopeID, result: Self.result(error), detail: "\(error)")
        }
    }

    /// The access token, logging in over the wire when there is none yet.
    private func token() async -> String? {
        if let token = state.withLock({ $0.token }) { return token }
        var security = ClientSecurity.plaintext
        if let serverKey = plan.serverKey.flatMap(Z85.decode) {
            guard let keys = try? CurveKeyPair.generate() else { return nil }
            security = .curve(serverKey: serverKey, keys: keys)
        }
        let configuration = FleetClientConfiguration(
            endpoint: plan.endpoint, failoverEndpoints: plan.failoverEndpoints ?? [], deviceID: id, security: security,
            requestTimeout: .seconds(10), maxAttempts: 3)
        let connection = FleetClientConnection.open(configuration: configuration, loop: loop, logger: logger)
        let token: String?
        do {
            let reply = try await connection.client.request(AccessTokenRequest(email: plan.email, secret: plan.secret))
            state.withLock { $0.token = reply.accessToken }
            record(.login, envelope: nil, result: "ok")
            token = reply.accessToken
        } catch {
            record(.login, envelope: nil, result: Self.result(error), detail: "\(error)")
            token = nil
        }
        await connection.close()
        return token
    }

    /// `ok`'s opposite, short: the failure's kind (`rest.400`, `rest.open`, …) or the error's type.
    static func result(_ error: any Error) -> String {
        if error is CancellationError { return "cancelled" }
        if let failure = error as? CeremonyFailure { return failure.kind }
        if let fleet = error as? FleetError { return fleet.code.rawValue }
        return "error"
    }

    /// The one-page document every backend envelope carries, base64.
    static let document = SamplePDF.make(pages: 1, title: "SignFleet backend").base64EncodedString()
}
