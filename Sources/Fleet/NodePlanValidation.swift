import Foundation
import SignatureCapture

/// What is wrong with a node plan, naming the field.
public struct NodePlanError: Error, Equatable, CustomStringConvertible {
    public var path: String
    public var message: String

    public init(path: String, _ message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "node plan \(path): \(message)" }
}

extension NodePlan {
    /// The largest plan file read (a plan for 10,000 devices is about 1 MB).
    public static let maxFileBytes = 16 * 1024 * 1024

    /// Reads and validates a plan written by the launcher.
    public static func load(path: String) throws -> NodePlan {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw NodePlanError(path: path, "cannot open the file")
        }
        defer { try? handle.close() }
        let data = try handle.read(upToCount: maxFileBytes + 1) ?? Data()
        guard data.count <= maxFileBytes else {
            throw NodePlanError(path: path, "larger than \(maxFileBytes) bytes")
        }
        let plan: NodePlan
        do {
            plan = try JSONDecoder().decode(NodePlan.self, from: data)
        } catch let error as DecodingError {
            throw NodePlanError(path: path, "not a node plan: \(Self.explain(error))")
        }
        try plan.validate(path: path)
        return plan
    }

    private static func explain(_ error: DecodingError) -> String {
        func field(_ path: [any CodingKey]) -> String {
            path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing field '\(field(context.codingPath + [key]))'"
        case .typeMismatch(let type, let context): return "'\(field(context.codingPath))' is not a \(type)"
        case .valueNotFound(_, let context): return "'\(field(context.codingPath))' is null"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "'\(field(context.codingPath))': \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }

    /// Checks every field a node relies on; the first problem is thrown.
    public func validate(path: String = "plan") throws {
        func fail(_ field: String, _ message: String) -> NodePlanError { NodePlanError(path: path, "\(field): \(message)") }
        func probability(_ value: Double, _ field: String) throws {
            guard value.isFinite, (0...1).contains(value) else { throw fail(field, "must be between 0 and 1, not \(value)") }
        }
        func nonNegative(_ value: Double, _ field: String) throws {
            guard value.isFinite, value >= 0 else { throw fail(field, "must be a finite number ≥ 0, not \(value)") }
        }
        guard !process.isEmpty else { throw fail("process", "must not be empty") }
        guard !endpoint.isEmpty else { throw fail("endpoint", "must not be empty") }
        if let failover = failoverEndpoints {
            guard failover.count <= 16 else { throw fail("failoverEndpoints", "must list at most 16 endpoints, not \(failover.count)") }
            for (index, other) in failover.enumerated() where other.isEmpty || other.utf8.count > 1024 {
                throw fail("failoverEndpoints[\(index)]", "must be 1 to 1024 bytes")
            }
        }
        guard !dataDirectory.isEmpty else { throw fail("dataDirectory", "must not be empty") }
        guard !historyFile.isEmpty else { throw fail("historyFile", "must not be empty") }
        guard runStart.isFinite, runStart > 0 else { throw fail("runStart", "must be seconds since the Unix epoch") }
        try nonNegative(duration, "duration")
        guard (1...100_000).contains(devices.count) else { throw fail("devices", "must list 1 to 100000 devices, not \(devices.count)") }
        var seen: Set<String> = []
        for (index, device) in devices.enumerated() {
            let field = "devices[\(index)].id"
            guard !device.id.isEmpty, device.id.utf8.count <= 200 else { throw fail(field, "must be 1 to 200 bytes") }
            guard !device.id.contains("/"), device.id != ".", device.id != ".." else {
                throw fail(field, "'\(device.id)' cannot name a store file")
            }
            guard seen.insert(device.id).inserted else { throw fail(field, "'\(device.id)' is listed twice") }
        }
        let b = behaviour
        try nonNegative(b.envelopesPerMinute, "behaviour.envelopesPerMinute")
        try probability(b.templateFraction, "behaviour.templateFraction")
        try probability(b.embeddedFraction, "behaviour.embeddedFraction")
        try probability(b.cancelRate, "behaviour.cancelRate")
        try probability(b.declineRate, "behaviour.declineRate")
        for (name, range) in [("inPersonSigners", b.inPersonSigners), ("remoteSigners", b.remoteSigners)] {
            guard range.lower >= 0, range.lower <= range.upper, range.upper <= BehaviourModel.maxDrawnSigners else {
                throw fail("behaviour.\(name)", "must be 0 ≤ lower ≤ upper ≤ \(BehaviourModel.maxDrawnSigners), not \(range.lower)..\(range.upper)")
            }
        }
        try nonNegative(b.signingDuration.lower, "behaviour.signingDuration.lower")
        try nonNegative(b.signingDuration.upper, "behaviour.signingDuration.upper")
        guard b.signingDuration.lower <= b.signingDuration.upper else {
            throw fail("behaviour.signingDuration", "lower must not exceed upper")
        }
        if case .every(let seconds) = b.sync, !(seconds.isFinite && seconds > 0) {
            throw fail("behaviour.sync", "every must be a positive number of seconds, not \(seconds)")
        }
        if let max = b.maxEnvelopes, max < 0 { throw fail("behaviour.maxEnvelopes", "must not be negative") }
        if case .gilbertElliott(let onlineMean, let offlineMean) = connectivity.model {
            guard onlineMean.isFinite, onlineMean > 0, offlineMean.isFinite, offlineMean > 0 else {
                throw fail("connectivity.model", "gilbertElliott means must be positive seconds, not \(onlineMean) and \(offlineMean)")
            }
        }
        try probability(connectivity.startOffline, "connectivity.startOffline")
        guard !pens.isEmpty else { throw fail("pens", "must name at least one pen") }
        for (name, weight) in pens {
            guard PenKind(name: name) != nil else {
                throw fail("pens", "unknown pen '\(name)'; use applePencil, wacomBluetooth, signaturePad or finger")
            }
            try nonNegative(weight, "pens.\(name)")
        }
        guard pens.values.reduce(0, +) > 0 else { throw fail("pens", "weights must not all be 0") }
        for (index, outage) in outages.enumerated() {
            guard outage.start.isFinite, outage.end.isFinite, outage.start >= 0, outage.start < outage.end else {
                throw fail("outages[\(index)]", "must have 0 ≤ start < end, not \(outage.start)..\(outage.end)")
            }
            if let ramp = outage.returnRamp, !(ramp.isFinite && ramp >= 0 && ramp <= 3_600) {
                throw fail("outages[\(index)].returnRamp", "must be 0 to 3600 s, not \(ramp)")
            }
        }
        // Upper bounds too: both become Int64 milliseconds, and 1e300 s used to trap the node there.
        guard statsInterval.isFinite, statsInterval >= 0.05, statsInterval <= 86_400 else {
            throw fail("statsInterval", "must be 0.05 to 86400 s, not \(statsInterval)")
        }
        if let drainRamp, !(drainRamp.isFinite && drainRamp >= 0 && drainRamp <= 3_600) {
            throw fail("drainRamp", "must be 0 to 3600 s, not \(drainRamp)")
        }
        if let startRamp, !(startRamp.isFinite && startRamp >= 0 && startRamp <= 3_600) {
            throw fail("startRamp", "must be 0 to 3600 s, not \(startRamp)")
        }
        guard requestTimeout.isFinite, requestTimeout >= 0.01, requestTimeout <= 3_600 else {
            throw fail("requestTimeout", "must be 0.01 to 3600 s, not \(requestTimeout)")
        }
        if let niceness, !ProcessPriority.range.contains(niceness) {
            throw fail("niceness", "must be 0 to 19, not \(niceness)")
        }
    }
}
