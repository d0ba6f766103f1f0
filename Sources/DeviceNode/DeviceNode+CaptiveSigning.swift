import Envelopes
import FleetProtocol
import Foundation
import SignatureCapture

extension DeviceNode {
    /// Where the coordinator sends the browser when a captive session ends; the headless
    /// presenter reads the `event` from the redirect and never follows it (as the SDK's web view
    /// intercepts its return URL). Return URLs are http or https (docs/captive-signing.md); the
    /// `.invalid` domain never resolves, so nothing is ever fetched from it.
    public static let captiveReturnURL = "https://captive-signing.signfleet.invalid/return"

    /// Captive signing with the envelope id and the recipient's client user id (the SDK's
    /// `presentCaptiveSigningWithPresentingController:envelopeId:recipientClientUserId:`): the
    /// coordinator looks the recipient up. When no unique recipient matches, or it is not their
    /// turn, a ``DeviceEvent/onlineSendFailed(_:)`` naming the request and the server's code, then a
    /// ``DeviceEvent/signingCancelled(_:)`` with ``SigningExitReason/exception`` and the server's
    /// details are published and the call throws.
    ///
    /// Events name the envelope with all the ids this device knows: the server id, and the local
    /// id and transaction id when the envelope was composed and synced here.
    ///
    /// - Parameters:
    ///   - envelopeId: the server's envelope id (`env-…`).
    ///   - recipientClientUserId: the embedded recipient's client user id.
    ///   - returnURL: where the coordinator sends the browser when the session ends (http or https).
    ///   - locale: a BCP 47 language tag for the page.
    ///   - service: asks for the recipient view (``RemoteRecipientViewService`` over ZeroMQ).
    ///   - signer: the simulated person at the page.
    /// - Returns: how the session ended; the matching event (signing completed, or cancelled with
    ///   its exit reason) is published on ``events()``.
    /// - Throws: ``DeviceNodeError`` ``DeviceNodeError/Code/accountNotLoggedIn``, or
    ///   ``DeviceNodeError/Code/captiveSigningFailed`` with the server's reason.
    @discardableResult
    public func presentCaptiveSigning(
        envelopeId: String, recipientClientUserId: String, returnURL: String = DeviceNode.captiveReturnURL, locale: String? = nil,
        service: some RecipientViewService, signer: CaptiveSigner
    ) async throws -> CaptiveSigningResult {
        try await presentRecipientView(
            RecipientViewRequest(
                accessToken: try requireAccount().accessToken, envelopeID: envelopeId, clientUserID: recipientClientUserId,
                returnURL: returnURL, locale: locale),
            service: service, signer: signer)
    }

    /// Captive signing with the recipient's name, email and client user id (the SDK's second
    /// variant): the coordinator does not look the recipient up by client user id alone.
    /// - Throws: as ``presentCaptiveSigning(envelopeId:recipientClientUserId:returnURL:locale:service:signer:)``.
    @discardableResult
    public func presentCaptiveSigning(
        envelopeId: String, recipientUserName: String, recipientEmail: String, recipientClientUserId: String,
        returnURL: String = DeviceNode.captiveReturnURL, locale: String? = nil, service: some RecipientViewService, signer: CaptiveSigner
    ) async throws -> CaptiveSigningResult {
        try await presentRecipientView(
            RecipientViewRequest(
                accessToken: try requireAccount().accessToken, envelopeID: envelopeId, clientUserID: recipientClientUserId,
                name: recipientUserName, email: recipientEmail, returnURL: returnURL, locale: locale),
            service: service, signer: signer)
    }

    /// Captive signing with a signing URL an integrator's backend created (the SDK's
    /// `presentCaptiveSigningWithPresentingController:signingUrl:envelopeId:recipientId:`). No
    /// login is needed; use the URL within its five minutes.
    /// - Throws: ``DeviceNodeError`` ``DeviceNodeError/Code/captiveSigningFailed`` for a malformed
    ///   URL or one the server refuses (unknown, already used elsewhere), or input the page refused.
    @discardableResult
    public func presentCaptiveSigning(signingURL: String, envelopeId: String, recipientId: String, signer: CaptiveSigner) async throws
        -> CaptiveSigningResult
    {
        try ensureOpen()
        let ids = await knownIDs(serverId: envelopeId)
        guard let url = URL(string: signingURL), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            let error = DeviceNodeError(.captiveSigningFailed, "the signing URL \"\(signingURL)\" is not an http(s) URL", envelope: ids)
            publishCaptiveFailure(ids, recipientId: recipientId, request: .signingPage, reason: .invalidRequest, message: error.message)
            throw error
        }
        let session = HeadlessSigningSession(browser: HeadlessBrowser(jar: WebCookieJar.jar(for: deviceId)), signer: signer)
        let ending: HeadlessSigningSession.Ending
        let page: SigningPageData?
        do {
            (ending, page) = try await session.run(url: url)
        } catch let failure as HeadlessSigningSession.Failure {
            publishCaptiveFailure(
                ids, recipientId: recipientId, request: .signingPage, reason: failure.reason, serverCode: failure.serverCode,
                message: failure.message)
            throw DeviceNodeError(.captiveSigningFailed, failure.message, envelope: ids)
        } catch {
            let failure = DeviceNodeError(
                .captiveSigningFailed, "the signing page could not be used: \(error)", envelope: ids, underlying: error)
            // The synthetic signature could not be drawn (nothing was sent), or the page did not answer.
            let reason: OnlineSendFailed.Reason = error is CaptureError ? .invalidRequest : .unreachable
            publishCaptiveFailure(ids, recipientId: recipientId, request: .signingPage, reason: reason, message: failure.message)
            throw failure
        }
        var envelope = ids
        if let page {
            // The page names the server's ids; the device adds its own when the envelope was synced from here.
            if page.envelopeID != ids.serverId {
                envelope = await knownIDs(serverId: page.envelopeID, transactionId: page.transactionID)
            } else if envelope.transactionId.isEmpty {
                envelope.transactionId = page.transactionID
            }
        }
        let recipient = page?.recipientID ?? recipientId
        switch ending {
        case .leftOpen:
            return CaptiveSigningResult(event: nil, redirectURL: nil, envelope: envelope, recipientId: recipient)
        case .refused(let status, let message):
            let details = "the signing server refused the URL (HTTP \(status)): \(message)"
            publishCaptiveFailure(
                envelope, recipientId: recipient, request: .signingPage, reason: .refused, serverCode: "http \(status)", message: details)
            throw DeviceNodeError(.captiveSigningFailed, details, envelope: envelope)
        case .event(let event, let redirect):
            if event == .exception {
                publish(.onlineSendFailed(OnlineSendFailed(
                    envelope: envelope, recipientId: recipient, request: .signingPage, reason: .serverFailed,
                    serverCode: SigningViewEvent.exception.rawValue, message: Self.serverExceptionDetails)))
            }
            let declineReason: String? = if case .decline(let reason) = signer.behaviour { reason } else { nil }
            publishCaptiveEnding(event, envelope: envelope, recipientId: recipient, declineReason: declineReason)
            return CaptiveSigningResult(event: event, redirectURL: redirect, envelope: envelope, recipientId: recipient)
        }
    }

    /// Removes the web cookies of this device's captive signing sessions (the SDK's
    /// `clearAllWebCookies`): a page left open can no longer be continued from this device.
    public nonisolated func clearAllWebCookies() {
        WebCookieJar.jar(for: deviceId).clear()
    }

    /// Whether this device holds web cookies from a captive signing session.
    public nonisolated var hasWebCookies: Bool {
        !WebCookieJar.jar(for: deviceId).isEmpty
    }

    // MARK: Helpers

    private func presentRecipientView(_ request: RecipientViewRequest, service: some RecipientViewService, signer: CaptiveSigner)
        async throws -> CaptiveSigningResult
    {
        let ids = await knownIDs(serverId: request.envelopeID)
        let reply: RecipientViewReply
        do {
            reply = try await withAPITimeout("the recipient view service") { try await service.recipientView(request) }
        } catch {
            let message = (error as? FleetError)?.message ?? "\(error)"
            let (reason, code) = Self.classify(error)
            publishCaptiveFailure(
                ids, recipientId: request.clientUserID, request: .recipientView, reason: reason, serverCode: code, message: message)
            throw DeviceNodeError(
                .captiveSigningFailed, "the server gave no signing URL for client user \(request.clientUserID): \(message)", envelope: ids,
                underlying: error)
        }
        return try await presentCaptiveSigning(
            signingURL: reply.url, envelopeId: request.envelopeID, recipientId: reply.recipientID ?? request.clientUserID, signer: signer)
    }

    /// The ids of a server envelope as this device knows them: the local id and transaction id of
    /// the envelope this device synced under that server id (its outbox receipt); otherwise the
    /// server id, the transaction id the server named (if any) and an empty local id, because the
    /// envelope was never on this device. A store that cannot be read counts as not knowing.
    func knownIDs(serverId: String, transactionId: String = "") async -> EnvelopeIDs {
        if let synced = try? await store.envelopeIDs(serverId: serverId) { return synced }
        return EnvelopeIDs(localId: "", transactionId: transactionId, serverId: serverId)
    }

    /// Why a `recipient.view` request failed, and the server's code when it answered.
    static func classify(_ error: any Error) -> (OnlineSendFailed.Reason, String?) {
        guard let error = error as? FleetError else { return (.unreachable, nil) }
        switch error.code {
        case .timeout: return (.unreachable, nil)
        case .unavailable, .busy, .rateLimited: return (.unreachable, error.code.rawValue)
        case .`internal`: return (.serverFailed, error.code.rawValue)
        default: return (.refused, error.code.rawValue)
        }
    }

    static let serverExceptionDetails = "the signing server ended the session with event=exception"

    /// Publishes the failed request, then the end of the session (the SDK's exception).
    private func publishCaptiveFailure(
        _ envelope: EnvelopeIDs, recipientId: String, request: OnlineSendFailed.Request, reason: OnlineSendFailed.Reason,
        serverCode: String? = nil, message: String
    ) {
        publish(.onlineSendFailed(OnlineSendFailed(
            envelope: envelope, recipientId: recipientId, request: request, reason: reason, serverCode: serverCode, message: message)))
        publish(.signingCancelled(SigningCancelled(
            envelope: envelope, recipientId: recipientId, exitReason: .exception, signingMode: .online, details: message)))
    }

    private func publishCaptiveEnding(_ event: SigningViewEvent, envelope: EnvelopeIDs, recipientId: String, declineReason: String?) {
        let reason: SigningExitReason
        switch event {
        case .signingComplete:
            publish(.signingCompleted(SigningCompleted(envelope: envelope, recipientIds: [recipientId], signingMode: .online, sequence: nil)))
            return
        case .decline: reason = .decline
        case .cancel: reason = .cancel
        case .ttlExpired: reason = .ttlExpired
        case .sessionTimeout: reason = .sessionTimeout
        case .viewingComplete: reason = .viewingComplete
        case .exception: reason = .exception
        default:
            // An event this version does not name: the session ended, and the event says how.
            publish(.signingCancelled(SigningCancelled(
                envelope: envelope, recipientId: recipientId, exitReason: .exception, signingMode: .online,
                details: "the signing server ended the session with event=\(event.rawValue)")))
            return
        }
        publish(.signingCancelled(SigningCancelled(
            envelope: envelope, recipientId: recipientId, exitReason: reason, signingMode: .online,
            declineReason: reason == .decline ? declineReason : nil,
            details: reason == .exception ? Self.serverExceptionDetails : nil)))
    }
}
