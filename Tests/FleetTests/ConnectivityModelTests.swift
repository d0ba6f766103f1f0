import FleetTesting
import Foundation
import Testing

@testable import Fleet

/// The connectivity model on explicit times: Gilbert–Elliott statistics over a long
/// seeded timeline, scheduled outages, and the same seed giving the same timeline.
@Suite struct ConnectivityModelTests {
    static let seed: UInt64 = testSeed("ConnectivityModelTests")

    /// The stays of the timeline from 0 to `end`: (online, length) per stay, the last one cut off excluded.
    static func stays(_ model: ConnectivityModel, until end: Double) -> [(online: Bool, length: Double)] {
        var model = model
        var result: [(Bool, Double)] = []
        var t = 0.0
        while true {
            let state = model.state(at: t)
            guard state.until < end else { break }
            result.append((state.online, state.until - t))
            t = state.until
        }
        return result
    }

    @Test func gilbertElliottStaysHaveThePlannedMeans() {
        print("connectivity seed \(Self.seed) (replay with SIGNFLEET_SEED=\(Self.seed))")
        let model = ConnectivityModel(
            connectivity: Connectivity(model: .gilbertElliott(onlineMean: 30, offlineMean: 10), startOffline: 0.5),
            seed: Self.seed)
        let stays = Self.stays(model, until: 2_000_000)
        let online = stays.filter(\.online).map(\.length)
        let offline = stays.filter { !$0.online }.map(\.length)
        // About 50,000 stays of each kind: the means are within 3 % with overwhelming probability.
        #expect(online.count > 40_000 && offline.count > 40_000)
        let onlineMean = online.reduce(0, +) / Double(online.count)
        let offlineMean = offline.reduce(0, +) / Double(offline.count)
        #expect(abs(onlineMean - 30) / 30 < 0.03, "online mean \(onlineMean) (seed \(Self.seed))")
        #expect(abs(offlineMean - 10) / 10 < 0.03, "offline mean \(offlineMean) (seed \(Self.seed))")
        // Stays alternate: the chain has two states.
        #expect(zip(stays, stays.dropFirst()).allSatisfy { $0.online != $1.online })
        // Exponential stays: the median is mean × ln 2.
        let median = online.sorted()[online.count / 2]
        #expect(abs(median - 30 * log(2)) / (30 * log(2)) < 0.05, "online median \(median) (seed \(Self.seed))")
    }

    @Test func startOfflineIsTheProbabilityOfStartingOffline() {
        var offline = 0
        let devices = 20_000
        for device in 0..<devices {
            var model = ConnectivityModel(
                connectivity: Connectivity(model: .gilbertElliott(onlineMean: 5, offlineMean: 5), startOffline: 0.2),
                seed: Self.seed &+ UInt64(device))
            if !model.state(at: 0).online { offline += 1 }
        }
        #expect(abs(Double(offline) / Double(devices) - 0.2) < 0.02, "\(offline) of \(devices) started offline")
    }

    @Test func outagesMakeDevicesOfflineInsideTheirWindows() {
        var always = ConnectivityModel(
            connectivity: Connectivity(), outages: [Outage(start: 10, end: 20), Outage(start: 30, end: 35)], seed: 1)
        #expect(always.state(at: 0) == .init(online: true, until: 10))
        #expect(always.state(at: 9.999) == .init(online: true, until: 10))
        #expect(always.state(at: 10) == .init(online: false, until: 20))
        #expect(always.state(at: 20) == .init(online: true, until: 30))
        #expect(always.state(at: 34) == .init(online: false, until: 35))
        #expect(always.state(at: 35) == .init(online: true, until: .infinity))

        // Combined with the chain: never online inside an outage, and the chain's own timeline is kept.
        let connectivity = Connectivity(model: .gilbertElliott(onlineMean: 2, offlineMean: 1))
        var combined = ConnectivityModel(connectivity: connectivity, outages: [Outage(start: 50, end: 80)], seed: Self.seed)
        var chainOnly = ConnectivityModel(connectivity: connectivity, seed: Self.seed)
        var t = 0.0
        while t < 120 {
            let state = combined.state(at: t)
            let chain = chainOnly.chainState(at: t)
            if t >= 50 && t < 80 {
                #expect(!state.online, "online at \(t) inside the outage (seed \(Self.seed))")
                #expect(state.until >= 80, "the outage ends at 80, not \(state.until)")
            } else {
                #expect(state.online == chain.online, "at \(t) (seed \(Self.seed))")
            }
            t += 0.25
        }
    }

    /// With a return ramp each device comes back at its own moment within it, the same moment for
    /// the same seed, and the moments of a fleet spread over the whole ramp.
    @Test func anOutagesReturnRampBringsEachDeviceBackAtItsOwnMomentWithinIt() {
        print("connectivity seed \(Self.seed) (replay with SIGNFLEET_SEED=\(Self.seed))")
        let outage = Outage(start: 10, end: 20, returnRamp: 8)
        var returns: [Double] = []
        for device in 0..<2_000 {
            let seed = Self.seed &+ UInt64(device)
            var model = ConnectivityModel(connectivity: Connectivity(), outages: [outage], seed: seed)
            let back = model.state(at: 10).until
            #expect(back >= 20 && back < 28, "device \(device) back at \(back) (seed \(Self.seed))")
            #expect(!model.state(at: back - 0.000_1).online && model.state(at: back).online)
            var again = ConnectivityModel(connectivity: Connectivity(), outages: [outage], seed: seed)
            #expect(again.state(at: 15).until == back, "the same seed, the same moment")
            returns.append(back)
        }
        // Spread over the ramp: each 2 s quarter holds about a quarter of the 2,000 (500 ± 100).
        for quarter in 0..<4 {
            let low = 20 + Double(quarter) * 2
            let inQuarter = returns.filter { $0 >= low && $0 < low + 2 }.count
            #expect(abs(inQuarter - 500) < 100, "\(inQuarter) devices back in [\(low), \(low + 2)) (seed \(Self.seed))")
        }
        // Without a ramp (nil or 0), every device is back at the end; the chain's timeline is not moved.
        for ramp in [nil, 0.0] {
            var model = ConnectivityModel(connectivity: Connectivity(), outages: [Outage(start: 10, end: 20, returnRamp: ramp)], seed: Self.seed)
            #expect(model.state(at: 10) == .init(online: false, until: 20))
        }
        let chain = Connectivity(model: .gilbertElliott(onlineMean: 2, offlineMean: 1))
        var ramped = ConnectivityModel(connectivity: chain, outages: [outage], seed: Self.seed)
        var plain = ConnectivityModel(connectivity: chain, seed: Self.seed)
        #expect(ramped.chainState(at: 50) == plain.chainState(at: 50))
    }

    @Test func theSameSeedGivesTheSameTimelineAndAnotherSeedAnother() {
        let connectivity = Connectivity(model: .gilbertElliott(onlineMean: 3, offlineMean: 2), startOffline: 0.3)
        let first = Self.stays(ConnectivityModel(connectivity: connectivity, seed: Self.seed), until: 1000)
        let again = Self.stays(ConnectivityModel(connectivity: connectivity, seed: Self.seed), until: 1000)
        let other = Self.stays(ConnectivityModel(connectivity: connectivity, seed: Self.seed &+ 1), until: 1000)
        #expect(first.map(\.length) == again.map(\.length))
        #expect(first.map(\.length) != other.map(\.length))
        // A restarted device asks for a later time first and gets the same answer.
        var late = ConnectivityModel(connectivity: connectivity, seed: Self.seed)
        var early = ConnectivityModel(connectivity: connectivity, seed: Self.seed)
        _ = early.state(at: 100)
        #expect(late.state(at: 500) == early.state(at: 500))
    }
}
