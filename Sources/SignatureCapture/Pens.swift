/// The kind of pen (or finger) a signer writes with, with its real sampling characteristics.
///
/// Pen kinds are values with static members rather than an exhaustive enum, so new pens can be
/// added without breaking callers.
///
/// ```swift
/// let pencil = PenKind.applePencil
/// pencil.characteristics(on: .iPadPro).sampleRate   // 240
/// ```
public struct PenKind: Hashable, Sendable, CustomStringConvertible {
    /// A stable identifier ("applePencil", "wacomBluetooth", "signaturePad", "finger").
    public let identifier: String

    init(_ identifier: String) { self.identifier = identifier }

    /// Apple Pencil: up to 240 Hz, force up to ``PenCharacteristics/maximumForce``, altitude and azimuth.
    public static let applePencil = PenKind("applePencil")
    /// Wacom Bluetooth styluses (Intuos Creative Stylus 1/2, Bamboo Fineline 1/2/3, Bamboo Sketch):
    /// pressure over Bluetooth LE, position from the touch screen at the screen's rate.
    public static let wacomBluetooth = PenKind("wacomBluetooth")
    /// A wired signature pad: 200 Hz, 1024 pressure levels, 2540 lpi, reports hover (proximity).
    public static let signaturePad = PenKind("signaturePad")
    /// A finger on the touch screen: 60 or 120 Hz, no pressure.
    public static let finger = PenKind("finger")

    /// All known pen kinds.
    public static let allKinds: [PenKind] = [.applePencil, .wacomBluetooth, .signaturePad, .finger]

    /// Looks a pen kind up by identifier or a short alias ("pencil", "wacom", "pad", "finger", "hand").
    public init?(name: String) {
        switch name.lowercased() {
        case "applepencil", "pencil", "apple-pencil": self = .applePencil
        case "wacombluetooth", "wacom", "stylus": self = .wacomBluetooth
        case "signaturepad", "pad": self = .signaturePad
        case "finger", "hand", "touch": self = .finger
        default: return nil
        }
    }

    /// Whether the pen talks Bluetooth LE (and so is found by discovery and can drop).
    public var isBluetooth: Bool { self == .wacomBluetooth }

    /// This pen's characteristics on the given screen.
    ///
    /// The touch screen's rate matters for the finger and for Wacom styluses, whose position comes
    /// from the touch screen.
    public func characteristics(on screen: DeviceScreen) -> PenCharacteristics {
        switch identifier {
        case "applePencil":
            return PenCharacteristics(
                sampleRate: 240, pressureLevels: 1024, maximumForce: 4.166_666_666_666_667,
                reportsTilt: true, reportsHover: false, positionQuantum: 0.25 / screen.pointsPerMillimetre,
                pressureRate: nil)
        case "wacomBluetooth":
            return PenCharacteristics(
                sampleRate: screen.touchRate, pressureLevels: 2048, maximumForce: nil,
                reportsTilt: false, reportsHover: false, positionQuantum: 1 / screen.pointsPerMillimetre,
                pressureRate: 30)
        case "signaturePad":
            return PenCharacteristics(
                sampleRate: 200, pressureLevels: 1024, maximumForce: nil,
                reportsTilt: false, reportsHover: true, positionQuantum: 25.4 / 2540, pressureRate: nil)
        default:
            return PenCharacteristics(
                sampleRate: screen.touchRate, pressureLevels: 0, maximumForce: nil,
                reportsTilt: false, reportsHover: false, positionQuantum: 1 / screen.pointsPerMillimetre,
                pressureRate: nil)
        }
    }

    public var description: String { identifier }
}

/// What a pen reports and how often.
public struct PenCharacteristics: Hashable, Sendable {
    /// Samples per second of position.
    public var sampleRate: Int
    /// Number of distinct pressure levels; 0 when the pen reports no pressure.
    public var pressureLevels: Int
    /// Apple Pencil's maximum possible force (UITouch.maximumPossibleForce), when the pen reports force.
    public var maximumForce: Double?
    /// Whether altitude and azimuth angles are reported.
    public var reportsTilt: Bool
    /// Whether the pen reports movement while lifted (hover / proximity), with a tip switch.
    public var reportsHover: Bool
    /// Position resolution in millimetres.
    public var positionQuantum: Double
    /// When pressure arrives on a separate, slower link (Bluetooth LE), its update rate in Hz.
    public var pressureRate: Int?

    /// Creates a characteristics description.
    public init(sampleRate: Int, pressureLevels: Int, maximumForce: Double? = nil, reportsTilt: Bool = false,
                reportsHover: Bool = false, positionQuantum: Double = 0.01, pressureRate: Int? = nil) {
        self.sampleRate = sampleRate
        self.pressureLevels = pressureLevels
        self.maximumForce = maximumForce
        self.reportsTilt = reportsTilt
        self.reportsHover = reportsHover
        self.positionQuantum = positionQuantum
        self.pressureRate = pressureRate
    }

    /// Whether the pen reports pressure at all.
    public var reportsPressure: Bool { pressureLevels > 0 }
}

/// The tablet screen the capture happens on.
public struct DeviceScreen: Hashable, Sendable {
    /// Screen width in millimetres.
    public var width: Double
    /// Screen height in millimetres.
    public var height: Double
    /// Touch screen sampling rate in Hz (60 or 120).
    public var touchRate: Int
    /// UIKit points per millimetre (132 pt/inch on iPad).
    public var pointsPerMillimetre: Double

    /// Creates a screen description.
    public init(width: Double, height: Double, touchRate: Int, pointsPerMillimetre: Double = 132 / 25.4) {
        self.width = width
        self.height = height
        self.touchRate = touchRate
        self.pointsPerMillimetre = pointsPerMillimetre
    }

    /// A 12.9" iPad Pro class screen with a 120 Hz touch screen.
    public static let iPadPro = DeviceScreen(width: 262, height: 197, touchRate: 120)
    /// A 9.7" iPad class screen with a 60 Hz touch screen.
    public static let iPad = DeviceScreen(width: 197, height: 148, touchRate: 60)
}

/// A capture strategy: how the capture dialog takes input, correlated with one or more pens.
///
/// Strategies are tried in priority order; the first usable one at capture time wins.
/// ``hand`` is always usable.
public struct CaptureStrategy: Hashable, Sendable, CustomStringConvertible {
    /// A stable identifier.
    public let identifier: String
    /// The pen this strategy captures with.
    public let pen: PenKind

    /// Any device that behaves like a hand (finger). A second touch (palm) restarts the capture.
    public static let hand = CaptureStrategy(identifier: "hand", pen: .finger)
    /// Signing with the Apple Pencil.
    public static let applePencil = CaptureStrategy(identifier: "applePencil", pen: .applePencil)
    /// Wacom Bluetooth stylus; a warning is raised when the hand touches the area, capture continues.
    public static let wacomBluetoothWithHandWarning = CaptureStrategy(
        identifier: "wacomBluetoothWithHandWarning", pen: .wacomBluetooth)
    /// Wacom Bluetooth stylus with the Wacom touch manager: palm touches are rejected silently.
    public static let wacomBluetoothWithTouchManager = CaptureStrategy(
        identifier: "wacomBluetoothWithTouchManager", pen: .wacomBluetooth)
    /// A wired signature pad.
    public static let signaturePad = CaptureStrategy(identifier: "signaturePad", pen: .signaturePad)

    /// The SDK's default order: Apple Pencil, Wacom with touch manager, hand.
    public static let defaultOrder: [CaptureStrategy] = [.applePencil, .wacomBluetoothWithTouchManager, .hand]

    /// Whether this strategy can be used when `connected` pens are connected. Hand is always usable.
    public func isUsable(connected: Set<PenKind>) -> Bool {
        self == .hand || connected.contains(pen)
    }

    /// The strategy that captures with `pen` (hand for the finger; touch manager for Wacom).
    public static func preferred(for pen: PenKind) -> CaptureStrategy {
        switch pen {
        case .applePencil: return .applePencil
        case .wacomBluetooth: return .wacomBluetoothWithTouchManager
        case .signaturePad: return .signaturePad
        default: return .hand
        }
    }

    public var description: String { identifier }
}

/// An RGB colour for rendering strokes.
public struct PenColor: Hashable, Sendable {
    /// Red, 0–255.
    public var red: UInt8
    /// Green, 0–255.
    public var green: UInt8
    /// Blue, 0–255.
    public var blue: UInt8

    /// Creates a colour.
    public init(red: UInt8, green: UInt8, blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }

    /// The SDK's default stroke colour (UIColor.blueColor).
    public static let blue = PenColor(red: 0, green: 0, blue: 255)
    /// Black.
    public static let black = PenColor(red: 0, green: 0, blue: 0)
}

/// Pen properties of a capture dialog: stroke size, colour and capture strategies in priority order.
public struct PenProperties: Hashable, Sendable {
    /// Stroke thickness in screen points at mid pressure (default 6, as in the SDK).
    public var size: Double
    /// Stroke colour (default blue).
    public var color: PenColor
    /// Capture strategies in priority order (default Apple Pencil, Wacom touch manager, hand).
    public var strategies: [CaptureStrategy]

    /// Creates pen properties.
    public init(size: Double = 6, color: PenColor = .blue, strategies: [CaptureStrategy] = CaptureStrategy.defaultOrder) {
        self.size = size
        self.color = color
        self.strategies = strategies
    }
}

/// What to do when the pen leaves the signing area.
public struct BorderStrategy: Hashable, Sendable, CustomStringConvertible {
    /// A stable identifier.
    public let identifier: String

    /// Default: samples outside the area stay in the biometric data (while on screen) but are not rendered.
    public static let bestData = BorderStrategy(identifier: "bestData")
    /// Leaving the area erases the capture, raises an event, and the signer tries again.
    public static let alert = BorderStrategy(identifier: "alert")
    /// Samples beyond the border are clamped to the border.
    public static let trim = BorderStrategy(identifier: "trim")

    public var description: String { identifier }
}
