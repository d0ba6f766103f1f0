import SignatureCapture

/// One planned ceremony: when it is meant to start (its *intended* start, from which the
/// corrected latency is measured) and which virtual device performs it.
public struct Arrival: Sendable, Hashable {
    /// 0, 1, 2, … in time order.
    public var index: Int
    /// Intended start, from the start of the run.
    public var offset: Duration
    /// The profile stage it falls in.
    public var stage: Int
    /// The device it is assigned to (round robin, so each device sees 1/N of the rate).
    public var device: Int
}

/// The open-loop arrival times of a load profile: a pure function of the profile, the arrival
/// process, the device count and the seed, so the same seed always gives the same schedule.
///
/// Arrivals are spaced in "expected-arrival" units (evenly, or with exponential gaps for a
/// Poisson process) and mapped to time through the inverse of the profile's cumulative rate,
/// which turns a homogeneous process into one that follows the ramps and plateaus exactly.
public struct ArrivalSchedule: Sequence, Sendable {
    public let profile: LoadProfile
    public let process: ArrivalProcess
    public let devices: Int
    public let seed: UInt64

    public init(profile: LoadProfile, process: ArrivalProcess = .poisson, devices: Int, seed: UInt64) {
        self.profile = profile
        self.process = process
        self.devices = Swift.max(1, devices)
        self.seed = seed
    }

    public func makeIterator() -> Iterator { Iterator(schedule: self) }

    public struct Iterator: IteratorProtocol, Sendable {
        let schedule: ArrivalSchedule
        var random: SeededRandom
        var index = 0
        /// Position in expected-arrival units.
        var position = 0.0
        var stage = 0
        /// Expected arrivals and time before the current stage.
        var arrivalsBefore = 0.0
        var secondsBefore = 0.0

        init(schedule: ArrivalSchedule) {
            self.schedule = schedule
            self.random = SeededRandom(mixing: schedule.seed, 0x4C4F_4144)  // "LOAD"
        }

        public mutating func next() -> Arrival? {
            switch schedule.process {
            case .poisson: position += random.exponential(mean: 1)
            case .uniform: position = Double(index) + 0.5
            }
            let stages = schedule.profile.stages
            while stage < stages.count {
                let current = stages[stage]
                let total = current.expectedArrivals(within: current.seconds)
                if position <= arrivalsBefore + total {
                    let seconds = secondsBefore + current.time(forExpectedArrivals: position - arrivalsBefore)
                    let arrival = Arrival(
                        index: index, offset: .nanoseconds(Int64((seconds * 1e9).rounded())), stage: stage,
                        device: index % schedule.devices)
                    index += 1
                    return arrival
                }
                arrivalsBefore += total
                secondsBefore += current.seconds
                stage += 1
            }
            return nil
        }
    }
}
