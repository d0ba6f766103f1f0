/// One point of a signature drawn in a web page with pointer events (captive signing).
///
/// Coordinates are CSS pixels from the canvas's top-left corner; `time` is the event's
/// `timeStamp` in milliseconds; `pressure` is the event's pressure (0–1) when the pointer
/// reports one; `stroke` numbers the pen-down strokes (pointerdown … pointerup).
public struct PointerPoint: Hashable, Sendable {
    public var x: Double
    public var y: Double
    public var pressure: Double
    public var time: Double
    public var stroke: Int

    public init(x: Double, y: Double, pressure: Double, time: Double, stroke: Int) {
        self.x = x
        self.y = y
        self.pressure = pressure
        self.time = time
        self.stroke = stroke
    }
}

/// A signature drawn on a web canvas: what the captive-signing page posts.
public struct PointerSignature: Hashable, Sendable {
    /// CSS pixels per millimetre (CSS defines 96 px per inch).
    public static let pixelsPerMillimetre = 96 / 25.4
    /// The clock the points are resampled onto (the ISO T channel counts ticks of a fixed clock).
    public static let sampleRate = 240
    /// The largest canvas accepted, in CSS pixels (keeps positions inside the ISO record's 16 bits).
    public static let maxCanvas = (width: 1200.0, height: 600.0)
    /// The most points one signature may carry.
    public static let maxPoints = 20_000

    /// `pointerType` of the events: `mouse`, `pen` or `touch`.
    public var pointerType: String
    /// Canvas size in CSS pixels.
    public var canvasWidth: Double
    public var canvasHeight: Double
    public var points: [PointerPoint]

    public init(pointerType: String, canvasWidth: Double, canvasHeight: Double, points: [PointerPoint]) {
        self.pointerType = pointerType
        self.canvasWidth = canvasWidth
        self.canvasHeight = canvasHeight
        self.points = points
    }

    /// Whether the pressure values are real: pens report pressure; a mouse reports a constant
    /// 0.5 while a button is down, and touch screens without force report 0 or 0.5.
    public var reportsPressure: Bool {
        pointerType == "pen" || points.contains { $0.pressure > 0 && $0.pressure != 0.5 }
    }

    /// The pen kind the pointer type stands for.
    public var penKind: PenKind {
        switch pointerType {
        case "pen": return .browserPen
        case "touch": return .finger
        default: return .browserMouse
        }
    }
}

extension PenKind {
    /// A stylus in a web page (pointer events with `pointerType == "pen"`).
    public static let browserPen = PenKind("browserPen")
    /// A mouse in a web page.
    public static let browserMouse = PenKind("browserMouse")
}

extension CapturedSignature {
    /// Builds a captured signature from pointer events, so the web page's signatures get the same
    /// ISO/IEC 19794-7 record, SVG and binding as the device's.
    ///
    /// Browsers deliver events irregularly (60–240 Hz, coalesced), while the ISO T channel counts
    /// ticks of one fixed clock: each stroke is resampled onto a ``PointerSignature/sampleRate`` clock
    /// by linear interpolation between the reported points, keeping every stroke's start and end
    /// time (to the tick); strokes never share or touch a tick, so lifts stay lifts. Positions
    /// become millimetres at 96 CSS px per inch and are clamped to the canvas (trim).
    ///
    /// - Throws: ``CaptureError`` `emptySignature` without points, `invalidConfiguration` for a
    ///   bad canvas, a non-finite value or too many points, `signatureTooLong` when the signature
    ///   lasts longer than the T channel holds.
    public init(pointer input: PointerSignature, fieldID: String, signerID: String, startedAt: CaptureTimestamp) throws {
        let (maxWidth, maxHeight) = PointerSignature.maxCanvas
        guard input.canvasWidth.isFinite, input.canvasHeight.isFinite, input.canvasWidth >= 10, input.canvasHeight >= 10,
            input.canvasWidth <= maxWidth, input.canvasHeight <= maxHeight
        else {
            throw CaptureError(code: .invalidConfiguration, message:
                "the canvas must be 10×10 to \(Int(maxWidth))×\(Int(maxHeight)) CSS px; got \(input.canvasWidth)×\(input.canvasHeight)")
        }
        guard input.points.count <= PointerSignature.maxPoints else {
            throw CaptureError(code: .invalidConfiguration, message: "a signature has at most \(PointerSignature.maxPoints) points; got \(input.points.count)")
        }
        guard input.points.allSatisfy({ $0.x.isFinite && $0.y.isFinite && $0.pressure.isFinite && $0.time.isFinite }) else {
            throw CaptureError(code: .invalidConfiguration, message: "a point has a non-finite coordinate, pressure or time")
        }
        guard let firstTime = input.points.map(\.time).min() else {
            throw CaptureError(code: .emptySignature, message: "no points were drawn for field \(fieldID)")
        }
        let scale = 1 / PointerSignature.pixelsPerMillimetre
        let width = input.canvasWidth * scale, height = input.canvasHeight * scale
        let pressure = input.reportsPressure
        let rate = Double(PointerSignature.sampleRate)
        let strokes = Dictionary(grouping: input.points, by: \.stroke).values
            .map { $0.sorted { $0.time < $1.time } }
            .sorted { $0[0].time < $1[0].time }
        var samples: [PenSample] = []
        var nextFreeTick: Int64 = 0
        for stroke in strokes {
            // Times come from a browser form: any finite Double. Range-check before converting (a
            // stroke 1e20 ms after the first used to trap here and take the coordinator down).
            let offsetTicks = ((stroke[0].time - firstTime) * rate / 1000).rounded()
            guard offsetTicks.isFinite, offsetTicks <= 65535 else {
                throw CaptureError(code: .signatureTooLong, message:
                    "a stroke starts \(stroke[0].time - firstTime) ms after the first; the T channel holds 65535 ticks of \(PointerSignature.sampleRate) Hz")
            }
            let startTick = max(Int64(offsetTicks), nextFreeTick)
            let endTime = stroke[stroke.count - 1].time
            // A stroke that cannot end within the T channel is refused before it is walked tick
            // by tick (a post's last point at 1e300 ms used to cost 65,535 steps first).
            let span = (endTime - stroke[0].time) * rate / 1000
            guard span.isFinite, Double(startTick) + span <= 65536 else {
                throw CaptureError(code: .signatureTooLong, message:
                    "the signature lasts more than 65535 ticks of \(PointerSignature.sampleRate) Hz; the T channel cannot hold it")
            }
            var tick = startTick
            var index = 0
            while true {
                // Time of this tick, from the stroke's own start, so the stroke keeps its shape.
                let t = stroke[0].time + Double(tick - startTick) * 1000 / rate
                while index + 1 < stroke.count && stroke[index + 1].time <= t { index += 1 }
                let a = stroke[index], b = stroke[min(index + 1, stroke.count - 1)]
                let f = b.time > a.time ? min(max((t - a.time) / (b.time - a.time), 0), 1) : 0
                // Finite inputs far apart (±1e308) interpolate to ∞ − ∞ = NaN: clamped to the
                // lower bound, as NaN must never reach the record's integer conversions.
                let x = Self.clamp((a.x + (b.x - a.x) * f) * scale, 0, width)
                let y = Self.clamp((a.y + (b.y - a.y) * f) * scale, 0, height)
                let p = pressure ? Self.clamp(a.pressure + (b.pressure - a.pressure) * f, 0, 1) : 0
                guard tick <= 65535 else {
                    throw CaptureError(code: .signatureTooLong, message:
                        "the signature lasts more than 65535 ticks of \(PointerSignature.sampleRate) Hz; the T channel cannot hold it")
                }
                samples.append(PenSample(x: x, y: y, pressure: p, tick: UInt32(tick)))
                if t >= endTime { break }
                tick += 1
            }
            nextFreeTick = tick + 2  // a gap of one tick at least: the renderer joins only consecutive ticks
        }
        let characteristics = PenCharacteristics(
            sampleRate: PointerSignature.sampleRate, pressureLevels: pressure ? 1024 : 0,
            positionQuantum: 1 / PointerSignature.pixelsPerMillimetre)
        let configuration = CaptureConfiguration(
            pen: PenProperties(size: 4, color: .blue, strategies: [.hand]),
            area: SigningArea(x: 0, y: 0, width: width, height: height), border: .trim,
            screen: DeviceScreen(width: width, height: height, touchRate: PointerSignature.sampleRate,
                                 pointsPerMillimetre: PointerSignature.pixelsPerMillimetre))
        let duration = Double(samples.last?.tick ?? 0) / rate
        try self.init(
            fieldID: fieldID, signerID: signerID, strategy: CaptureStrategy(identifier: "pointerEvents", pen: input.penKind),
            characteristics: characteristics, samples: samples, configuration: configuration, attempts: 1,
            startedAt: startedAt, completedAt: startedAt.adding(seconds: duration))
    }

    /// `value` within `low…high`; NaN becomes `low`.
    static func clamp(_ value: Double, _ low: Double, _ high: Double) -> Double {
        value.isNaN ? low : min(max(value, low), high)
    }
}
