import DeviceNode
import FleetProtocol

/// What the generator drives: a set of virtual devices that each perform ceremonies one at a
/// time. The real workload is ``SigningCeremonyWorkload``; tests plug in a single request.
public protocol LoadWorkload: Sendable {
    /// The ceremony's steps, in order (each gets a latency histogram and can be named in a threshold).
    var steps: [String] { get }
    /// Sets up virtual device `index` (log in, enroll, …) before the clock starts.
    func makeDevice(index: Int, seed: UInt64) async throws -> any LoadDevice
}

/// One virtual device. The generator never calls ``perform(ceremony:)`` concurrently on one device.
public protocol LoadDevice: Sendable {
    /// Runs one ceremony and returns how long each step took (names from ``LoadWorkload/steps``).
    func perform(ceremony: Int) async throws -> [StepTiming]
    /// Releases the device (sockets, store).
    func close() async
    /// Both sides of the device for the end-of-run audit: its outbox and what the coordinator
    /// holds for it. `nil` when the workload has nothing to audit (the default).
    func auditInput() async throws -> DeviceAuditInput?
}

extension LoadDevice {
    public func auditInput() async throws -> DeviceAuditInput? { nil }
}

/// How long one step of a ceremony took.
public struct StepTiming: Sendable, Hashable {
    public var step: String
    public var duration: Duration
    public init(_ step: String, _ duration: Duration) {
        self.step = step
        self.duration = duration
    }
}

/// A ceremony that finished without the expected result (e.g. the server rejected the item).
public struct CeremonyFailure: Error, Hashable, CustomStringConvertible {
    /// Short, stable name used to count errors by type.
    public var kind: String
    public var message: String
    public init(kind: String, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { "\(kind): \(message)" }
}

enum ErrorKind {
    /// A short, stable name for counting errors by type.
    static func of(_ error: any Error) -> String {
        switch error {
        case let failure as CeremonyFailure: failure.kind
        case let fleet as FleetError: fleet.code.rawValue
        case let node as DeviceNodeError: "device.\(node.code)"
        case is CancellationError: "cancelled"
        default: String(describing: type(of: error))
        }
    }
}
