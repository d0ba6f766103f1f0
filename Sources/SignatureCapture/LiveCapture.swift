/// One capture whose ``CaptureEvent``s are delivered as it happens, paced by a clock
/// (``SignatureCapturer/captureWithEvents(signer:signing:fieldID:startedAt:clock:)``).
///
/// ``run()`` performs the capture: the simulated signer's samples are computed first (capture is
/// deterministic), then each event is delivered on ``events`` at its moment, measured from when
/// `run()` started: the first `.point` when the pen touches, the last when it lifts, `.completed`
/// once the signature is written. `run()` returns the signature after that. The stream finishes
/// after ``CaptureEvent/completed(fieldID:)``, or throws the ``CaptureError`` (after the events
/// that led to it, such as ``CaptureEvent/aborted(attempt:)``), or `CancellationError` when the
/// task running `run()` is cancelled.
///
/// Run it once: a second `run()` returns the same signature without delivering events again.
/// Events wait in the stream's buffer when nobody reads them (a capture has at most a few
/// thousand).
public struct LiveCapture<C: Clock>: Sendable where C.Duration == Duration {
    /// The capture's events, each delivered at its moment.
    public let events: AsyncThrowingStream<CaptureEvent, any Error>
    private let continuation: AsyncThrowingStream<CaptureEvent, any Error>.Continuation
    private let capturer: SignatureCapturer
    private let signer: SignerProfile
    private let signing: Int
    private let fieldID: String
    private let startedAt: CaptureTimestamp
    private let clock: C

    init(capturer: SignatureCapturer, signer: SignerProfile, signing: Int, fieldID: String, startedAt: CaptureTimestamp, clock: C) {
        (events, continuation) = AsyncThrowingStream.makeStream(of: CaptureEvent.self)
        self.capturer = capturer
        self.signer = signer
        self.signing = signing
        self.fieldID = fieldID
        self.startedAt = startedAt
        self.clock = clock
    }

    /// Performs the capture, delivering its events on ``events`` as they happen.
    /// - Returns: the captured signature, once its last sample's moment has passed.
    /// - Throws: ``CaptureError`` as ``SignatureCapturer/capture(signer:signing:fieldID:startedAt:onEvent:)``
    ///   does (at the moment it happens), or `CancellationError`.
    public func run() async throws -> CapturedSignature {
        var timeline: [(at: Double, event: CaptureEvent)] = []
        let outcome = Result {
            try capturer.capture(
                signer: signer, signing: signing, fieldID: fieldID, startedAt: startedAt,
                timedEvent: { at, event in timeline.append((at, event)) })
        }
        let start = clock.now
        do {
            for (at, event) in timeline {
                try await clock.sleep(until: start.advanced(by: .seconds(at)), tolerance: nil)
                continuation.yield(event)
            }
            let signature = try outcome.get()
            continuation.finish()
            return signature
        } catch {
            continuation.finish(throwing: error)
            throw error
        }
    }
}
