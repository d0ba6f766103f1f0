/// The rectangle of the screen where the signer is asked to sign, in millimetres (origin top-left).
public struct SigningArea: Hashable, Sendable {
    /// Left edge.
    public var x: Double
    /// Top edge.
    public var y: Double
    /// Width.
    public var width: Double
    /// Height.
    public var height: Double

    /// Creates an area.
    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// An area of the given size centred on `screen`.
    public static func centered(on screen: DeviceScreen, width: Double, height: Double) -> SigningArea {
        SigningArea(x: (screen.width - width) / 2, y: (screen.height - height) / 2, width: width, height: height)
    }

    /// The default area: 140 × 60 mm centred on an iPad Pro screen.
    public static let standard = SigningArea.centered(on: .iPadPro, width: 140, height: 60)

    /// Whether a point lies inside the area (borders included).
    @inline(__always)
    public func contains(x px: Double, y py: Double) -> Bool {
        px >= x && px <= x + width && py >= y && py <= y + height
    }
}

/// A wall-clock instant with nanosecond precision, as nanoseconds since the Unix epoch.
///
/// Capture never reads a clock: the caller passes the start instant, and the capture's other
/// instants follow exactly from the sample clock.
public struct CaptureTimestamp: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    public var nanosecondsSinceEpoch: Int64

    /// Creates a timestamp.
    public init(nanosecondsSinceEpoch: Int64) {
        self.nanosecondsSinceEpoch = nanosecondsSinceEpoch
    }

    /// The epoch.
    public static let epoch = CaptureTimestamp(nanosecondsSinceEpoch: 0)

    /// This instant moved by `seconds`.
    public func adding(seconds: Double) -> CaptureTimestamp {
        CaptureTimestamp(nanosecondsSinceEpoch: nanosecondsSinceEpoch &+ Int64((seconds * 1e9).rounded()))
    }

    public static func < (a: CaptureTimestamp, b: CaptureTimestamp) -> Bool {
        a.nanosecondsSinceEpoch < b.nanosecondsSinceEpoch
    }

    public var description: String { "\(nanosecondsSinceEpoch)ns" }
}

/// Everything a capture dialog is configured with.
public struct CaptureConfiguration: Hashable, Sendable {
    /// Pen size, colour and strategies in priority order.
    public var pen: PenProperties
    /// Where the signer signs.
    public var area: SigningArea
    /// What happens when the pen leaves the area.
    public var border: BorderStrategy
    /// The screen.
    public var screen: DeviceScreen
    /// Probability that a hand (palm) touches the area during one attempt (default 0).
    public var palmTouchProbability: Double
    /// Probability that the signer cancels the dialog during one attempt (default 0).
    public var abortProbability: Double
    /// Most attempts per capture (palm restarts, border alerts, pen drops) before giving up.
    public var maximumAttempts: Int
    /// Whether to emit a ``CaptureEvent/point(_:)`` event per sample (default true).
    public var reportsPointHistory: Bool

    /// Creates a configuration.
    public init(pen: PenProperties = PenProperties(), area: SigningArea = .standard, border: BorderStrategy = .bestData,
                screen: DeviceScreen = .iPadPro, palmTouchProbability: Double = 0, abortProbability: Double = 0,
                maximumAttempts: Int = 6, reportsPointHistory: Bool = true) {
        self.pen = pen
        self.area = area
        self.border = border
        self.screen = screen
        self.palmTouchProbability = palmTouchProbability
        self.abortProbability = abortProbability
        self.maximumAttempts = maximumAttempts
        self.reportsPointHistory = reportsPointHistory
    }
}

/// One point of the point history (the SDK's `pointHistoryX:y:p:t:`).
public struct PointHistory: Hashable, Sendable {
    /// Screen x in millimetres.
    public var x: Double
    /// Screen y in millimetres.
    public var y: Double
    /// Pressure 0–1 (0 for hover or pens without pressure).
    public var pressure: Double
    /// Seconds since the attempt's first sample (exact: tick / sample rate).
    public var time: Double
}

/// Why an attempt was erased.
public struct EraseReason: Hashable, Sendable, CustomStringConvertible {
    let name: String
    /// A second touch (palm) with the hand strategy: the capture restarts.
    public static let palmDetected = EraseReason(name: "palmDetected")
    /// The pen left the signing area with the alert border strategy.
    public static let leftSigningArea = EraseReason(name: "leftSigningArea")
    /// The pen dropped; the capture restarts with the next usable strategy.
    public static let penDisconnected = EraseReason(name: "penDisconnected")
    public var description: String { name }
}

/// Something that happened during a capture, in order.
#if hasAttribute(nonexhaustive)
@nonexhaustive
#endif
public enum CaptureEvent: Hashable, Sendable {
    /// The attempt uses this strategy (the first usable one in priority order).
    case strategySelected(CaptureStrategy, attempt: Int)
    /// A sample arrived.
    case point(PointHistory)
    /// A palm touched the area while a Wacom strategy with hand warning was active; capture continues.
    case handWarning(time: Double)
    /// The pen left the signing area with the alert strategy (the SDK's popup).
    case borderAlert(attempt: Int)
    /// A palm was detected with the hand strategy; the capture restarts.
    case palmDetected(attempt: Int)
    /// The pen dropped mid-session.
    case penDisconnected(PenKind)
    /// The current signature was erased (the SDK's `eraseSignature:`); the signer tries again.
    case erased(EraseReason, attempt: Int)
    /// The signer cancelled (the SDK's `abortSignature:`).
    case aborted(attempt: Int)
    /// The capture completed with a signature for this field (the SDK's `handleSignature:withFieldId:`).
    case completed(fieldID: String)
}

/// Simulates the capture dialog: picks a strategy, lets a simulated signer write, applies the border
/// strategy and produces a ``CapturedSignature``.
///
/// ```swift
/// let capturer = SignatureCapturer(pen: .applePencil, area: .standard, border: .bestData)
/// let signature = try capturer.capture(signer: SignerProfile(seed: 42), signing: 3, fieldID: "sig1",
///                                      startedAt: CaptureTimestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000))
/// let iso = signature.isoRecord
/// let svg = signature.svg()
/// let png = try signature.png()
/// ```
public struct SignatureCapturer: Sendable {
    /// The dialog configuration.
    public var configuration: CaptureConfiguration
    /// Which pens are connected (use ``PenDeviceManager/availability()``).
    public var availability: PenAvailability

    /// Creates a capturer from a full configuration and an availability snapshot.
    public init(configuration: CaptureConfiguration, availability: PenAvailability) {
        self.configuration = configuration
        self.availability = availability
    }

    /// Creates a capturer for one connected pen: strategies are that pen's strategy then hand.
    public init(pen: PenKind, area: SigningArea = .standard, border: BorderStrategy = .bestData,
                screen: DeviceScreen = .iPadPro, properties: PenProperties = PenProperties()) {
        var properties = properties
        let strategy = CaptureStrategy.preferred(for: pen)
        properties.strategies = strategy == .hand ? [.hand] : [strategy, .hand]
        configuration = CaptureConfiguration(pen: properties, area: area, border: border, screen: screen)
        availability = PenAvailability(connected: pen == .finger ? [] : [pen])
    }

    /// The strategy a capture would use with the given connected pens: the first usable one in priority order.
    /// - Throws: ``CaptureError`` with code ``CaptureError/Code/noUsableStrategy`` when none is usable.
    public func selectStrategy(connected: Set<PenKind>) throws -> CaptureStrategy {
        for strategy in configuration.pen.strategies where strategy.isUsable(connected: connected) {
            return strategy
        }
        let names = configuration.pen.strategies.map(\.identifier).joined(separator: ", ")
        throw CaptureError(code: .noUsableStrategy, message:
            "no capture strategy is usable: configured [\(names)], connected pens [\(connected.map(\.identifier).sorted().joined(separator: ", "))]; connect a pen or add the hand strategy")
    }

    /// Captures one signature.
    ///
    /// Deterministic: the same signer, signing, configuration and availability give the same bytes.
    /// - Parameters:
    ///   - signer: who signs.
    ///   - signing: which signing act of this signer (each one varies slightly).
    ///   - fieldID: the signature field this capture is for.
    ///   - startedAt: the instant the dialog opens.
    ///   - onEvent: receives events in order as they happen (point history, erase, abort, completion).
    /// - Returns: the captured signature.
    /// - Throws: ``CaptureError`` (no usable strategy, too many attempts, aborted, empty signature).
    public func capture(
        signer: SignerProfile, signing: Int, fieldID: String,
        startedAt: CaptureTimestamp = .epoch,
        onEvent: ((CaptureEvent) -> Void)? = nil
    ) throws -> CapturedSignature {
        let timed: ((Double, CaptureEvent) -> Void)? = onEvent.map { handler in { _, event in handler(event) } }
        return try capture(signer: signer, signing: signing, fieldID: fieldID, startedAt: startedAt, timedEvent: timed)
    }

    /// The capture, with each event's moment: seconds since the dialog opened (``LiveCapture`` paces by it).
    func capture(
        signer: SignerProfile, signing: Int, fieldID: String, startedAt: CaptureTimestamp,
        timedEvent emit: ((_ at: Double, CaptureEvent) -> Void)?
    ) throws -> CapturedSignature {
        let config = configuration
        guard config.area.width > 0, config.area.height > 0, config.area.x >= 0, config.area.y >= 0,
              config.area.x + config.area.width <= config.screen.width,
              config.area.y + config.area.height <= config.screen.height else {
            throw CaptureError(code: .invalidConfiguration, message:
                "signing area \(config.area) must be non-empty and inside the \(config.screen.width)×\(config.screen.height) mm screen")
        }
        guard config.pen.size > 0, config.maximumAttempts > 0 else {
            throw CaptureError(code: .invalidConfiguration, message: "pen size and maximumAttempts must be positive")
        }
        var elapsed = 0.0
        var lost: Set<PenKind> = []
        var scale = 1.0
        var attempt = 0
        while true {
            attempt += 1
            guard attempt <= config.maximumAttempts else {
                throw CaptureError(code: .tooManyAttempts, message:
                    "the signer needed more than \(config.maximumAttempts) attempts for field \(fieldID); raise maximumAttempts or enlarge the signing area")
            }
            let strategy = try selectStrategy(connected: availability.connected.subtracting(lost))
            emit?(elapsed, .strategySelected(strategy, attempt: attempt))
            let characteristics = strategy.pen.characteristics(on: config.screen)
            var random = SeededRandom(mixing: signer.seed, UInt64(truncatingIfNeeded: signing), UInt64(attempt), 0xCA97)
            let placement = Placement(
                centerX: config.area.x + config.area.width / 2 + random.gaussian(deviation: 1.5),
                centerY: config.area.y + config.area.height / 2 + random.gaussian(deviation: 1.0),
                scale: scale * _exp(random.gaussian(deviation: 0.03)),
                rotation: random.gaussian(deviation: 0.02))
            var samples = Synthesizer.sample(
                strokes: signer.strokes(forSigning: signing, attempt: attempt), signer: signer,
                pen: characteristics, placement: placement, screen: config.screen)
            let rate = Double(characteristics.sampleRate)
            let duration = samples.last.map { Double($0.tick) / rate } ?? 0

            // Interruptions, earliest first: pen drop, palm, abort, border alert.
            var cutTime = Double.infinity
            var cause = 0
            if let drop = availability.dropsAfter[strategy.pen], drop - elapsed < duration {
                cutTime = max(0, drop - elapsed)
                cause = 1
            }
            let palmRoll = random.nextDouble(), palmAt = random.nextDouble() * duration
            if palmRoll < config.palmTouchProbability && strategy == .hand && palmAt < cutTime {
                cutTime = palmAt
                cause = 2
            }
            let abortRoll = random.nextDouble(), abortAt = random.nextDouble() * duration
            if abortRoll < config.abortProbability && abortAt < cutTime {
                cutTime = abortAt
                cause = 3
            }
            if config.border == .alert,
               let outside = samples.first(where: { $0.isDown && !config.area.contains(x: $0.x, y: $0.y) }) {
                let at = Double(outside.tick) / rate
                if at < cutTime {
                    cutTime = at
                    cause = 4
                }
            }
            let handWarningAt = (palmRoll < config.palmTouchProbability && strategy == .wacomBluetoothWithHandWarning) ? palmAt : nil

            if let emit, config.reportsPointHistory || handWarningAt != nil {
                var warned = false
                for sample in samples {
                    let time = Double(sample.tick) / rate
                    if time > cutTime { break }
                    if let at = handWarningAt, !warned, time >= at {
                        warned = true
                        emit(elapsed + at, .handWarning(time: at))
                    }
                    if config.reportsPointHistory {
                        emit(elapsed + time, .point(PointHistory(x: sample.x, y: sample.y, pressure: sample.pressure, time: time)))
                    }
                }
            }
            switch cause {
            case 1:
                lost.insert(strategy.pen)
                emit?(elapsed + cutTime, .penDisconnected(strategy.pen))
                emit?(elapsed + cutTime, .erased(.penDisconnected, attempt: attempt))
                elapsed += cutTime + 1.0
                continue
            case 2:
                emit?(elapsed + cutTime, .palmDetected(attempt: attempt))
                emit?(elapsed + cutTime, .erased(.palmDetected, attempt: attempt))
                elapsed += cutTime + 1.5
                continue
            case 3:
                emit?(elapsed + cutTime, .aborted(attempt: attempt))
                throw CaptureError(code: .aborted, message: "the signer cancelled the capture of field \(fieldID)")
            case 4:
                emit?(elapsed + cutTime, .borderAlert(attempt: attempt))
                emit?(elapsed + cutTime, .erased(.leftSigningArea, attempt: attempt))
                elapsed += cutTime + 2.0
                scale *= 0.82
                continue
            default:
                break
            }
            if config.border == .trim {
                let area = config.area
                for i in samples.indices {
                    samples[i].x = min(max(samples[i].x, area.x), area.x + area.width)
                    samples[i].y = min(max(samples[i].y, area.y), area.y + area.height)
                }
            }
            guard samples.contains(where: { $0.isDown }) else {
                throw CaptureError(code: .emptySignature, message: "the capture of field \(fieldID) has no pen-down sample on screen")
            }
            let started = startedAt.adding(seconds: elapsed)
            let signature = try CapturedSignature(
                fieldID: fieldID, signerID: signer.identifier, strategy: strategy, characteristics: characteristics,
                samples: samples, configuration: config, attempts: attempt,
                startedAt: started, completedAt: started.adding(seconds: duration))
            emit?(elapsed + duration, .completed(fieldID: fieldID))
            return signature
        }
    }

    /// A capture whose events arrive as it happens: each at its moment on `clock` (a point when its
    /// sample is taken, an erase when the pen leaves the area, …), as the SDK's delegate receives them.
    ///
    /// Nothing runs until you call ``LiveCapture/run()``; consume ``LiveCapture/events`` meanwhile:
    ///
    /// ```swift
    /// let capture = capturer.captureWithEvents(signer: SignerProfile(seed: 42), signing: 1, fieldID: "sig1",
    ///                                          clock: ContinuousClock())
    /// async let signature = capture.run()          // takes as long as the signer writes
    /// for try await event in capture.events { … }  // .strategySelected, .point, …, .completed
    /// let captured = try await signature
    /// ```
    /// - Parameters:
    ///   - signer: who signs.
    ///   - signing: which signing act of this signer.
    ///   - fieldID: the signature field this capture is for.
    ///   - startedAt: the instant the dialog opens.
    ///   - clock: paces the events; a test passes a clock it moves itself.
    /// - Returns: the capture, not yet started.
    public func captureWithEvents<C: Clock>(
        signer: SignerProfile, signing: Int, fieldID: String, startedAt: CaptureTimestamp = .epoch, clock: C
    ) -> LiveCapture<C> where C.Duration == Duration {
        LiveCapture(capturer: self, signer: signer, signing: signing, fieldID: fieldID, startedAt: startedAt, clock: clock)
    }
}

/// A captured signature: the samples and everything derived from them.
public struct CapturedSignature: Hashable, Sendable {
    /// The field the signature is for.
    public let fieldID: String
    /// The signer's identifier.
    public let signerID: String
    /// The strategy used.
    public let strategy: CaptureStrategy
    /// The pen's characteristics.
    public let characteristics: PenCharacteristics
    /// The biometric samples (screen millimetres; ticks of the pen's sample clock).
    public let samples: [PenSample]
    /// The dialog configuration (area, border strategy, pen size and colour).
    public let configuration: CaptureConfiguration
    /// How many attempts the capture took (1 when nothing was erased).
    public let attempts: Int
    /// When the successful attempt's first sample was taken.
    public let startedAt: CaptureTimestamp
    /// When its last sample was taken.
    public let completedAt: CaptureTimestamp
    /// The ISO/IEC 19794-7:2007 full-format record of the samples.
    public let isoRecord: [UInt8]

    /// The pen used.
    public var pen: PenKind { strategy.pen }
    /// Duration of the signature in seconds.
    public var duration: Double {
        Double(samples.last?.tick ?? 0) / Double(characteristics.sampleRate)
    }

    init(fieldID: String, signerID: String, strategy: CaptureStrategy, characteristics: PenCharacteristics,
         samples: [PenSample], configuration: CaptureConfiguration, attempts: Int,
         startedAt: CaptureTimestamp, completedAt: CaptureTimestamp) throws {
        self.fieldID = fieldID
        self.signerID = signerID
        self.strategy = strategy
        self.characteristics = characteristics
        self.samples = samples
        self.configuration = configuration
        self.attempts = attempts
        self.startedAt = startedAt
        self.completedAt = completedAt
        self.isoRecord = try ISOSignatureRecord(samples: samples, characteristics: characteristics).encoded()
    }
}
