import FleetTesting
import Testing

@testable import LoadGenerator

@Suite struct ArrivalScheduleTests {
    let seed = testSeed("ArrivalScheduleTests")

    @Test func sameSeedGivesTheSameScheduleAndAnotherSeedAnother() throws {
        print("seed \(seed)")
        let profile = try LoadProfile.parse(stages: ["2s:0-300", "3s:300"])
        let first = Array(ArrivalSchedule(profile: profile, devices: 7, seed: seed))
        let again = Array(ArrivalSchedule(profile: profile, devices: 7, seed: seed))
        let other = Array(ArrivalSchedule(profile: profile, devices: 7, seed: seed &+ 1))
        #expect(first == again)
        #expect(first.map(\.offset) != other.map(\.offset))
        #expect(!first.isEmpty)
        // In time order, within the profile, numbered, devices round robin.
        #expect(zip(first, first.dropFirst()).allSatisfy { $0.offset <= $1.offset })
        #expect(first.allSatisfy { $0.offset >= .zero && $0.offset <= profile.duration })
        #expect(first.enumerated().allSatisfy { $0.element.index == $0.offset && $0.element.device == $0.offset % 7 })
    }

    @Test func uniformPlateauIsEvenlySpacedAtTheRate() throws {
        let schedule = Array(ArrivalSchedule(profile: try .constant(rate: 200, duration: .seconds(3)), process: .uniform, devices: 4, seed: seed))
        #expect(schedule.count == 600)
        let gaps = zip(schedule, schedule.dropFirst()).map { ($1.offset - $0.offset).seconds }
        #expect(gaps.allSatisfy { abs($0 - 0.005) < 1e-6 }, "\(gaps.prefix(5))")
        #expect(abs(schedule[0].offset.seconds - 0.0025) < 1e-6)
    }

    @Test func rampFollowsTheRate() throws {
        // A ramp 0 → 1000/s over 4 s offers 2000 arrivals, a quarter of them in the first half.
        let profile = try LoadProfile.parse(stages: ["4s:0-1000", "2s:1000"])
        #expect(profile.expectedArrivals == 4000)
        let uniform = Array(ArrivalSchedule(profile: profile, process: .uniform, devices: 1, seed: seed))
        #expect(uniform.count == 4000)
        #expect(uniform.filter { $0.offset < .seconds(2) }.count == 500)
        #expect(uniform.filter { $0.stage == 0 }.count == 2000)
        // Poisson: counts within 5 standard deviations of the expectation.
        let poisson = Array(ArrivalSchedule(profile: profile, process: .poisson, devices: 1, seed: seed))
        let firstHalf = Double(poisson.filter { $0.offset < .seconds(2) }.count)
        #expect(abs(Double(poisson.count) - 4000) < 5 * 4000.0.squareRoot(), "\(poisson.count) arrivals, seed \(seed)")
        #expect(abs(firstHalf - 500) < 5 * 500.0.squareRoot(), "\(firstHalf) in the first half, seed \(seed)")
    }

    @Test func zeroRateStageOffersNothing() throws {
        let profile = try LoadProfile.parse(stages: ["1s:0", "1s:100"])
        let schedule = Array(ArrivalSchedule(profile: profile, process: .uniform, devices: 2, seed: seed))
        #expect(schedule.count == 100)
        #expect(schedule.allSatisfy { $0.stage == 1 && $0.offset >= .seconds(1) })
    }

    @Test func stageSpecsParse() throws {
        #expect(try LoadProfile.parseStage("10s:0-500") == LoadStage(duration: .seconds(10), fromRate: 0, toRate: 500))
        #expect(try LoadProfile.parseStage("20s:500") == LoadStage(duration: .seconds(20), rate: 500))
        #expect(try LoadProfile.parseStage("1m:2.5/s") == LoadStage(duration: .seconds(60), rate: 2.5))
        #expect(try LoadProfile.parseStage("250ms:10-0") == LoadStage(duration: .milliseconds(250), fromRate: 10, toRate: 0))
        #expect(try LoadProfile.parseDuration("30") == .seconds(30))
        // Too long for Int64 nanoseconds: refused (it used to trap the CLI).
        #expect(throws: LoadProfileError.self) { try LoadProfile.parseDuration("1e300s") }
        #expect(throws: LoadProfileError.self) { try LoadProfile.parseDuration("9300000000000000000ms") }
        #expect(LoadProfile.format(rate: 1e300) == "1e+300")
    }

    @Test(arguments: [
        ("10s", "DURATION:RATE"),
        ("ten:5", "not a duration"),
        ("0s:5", "not a duration"),
        ("10s:-5", "is not a rate"),
        ("10s:abc", "\"abc\" is not a rate"),
        ("10s:1-2-3", "is not RATE or FROM-TO"),
    ])
    func badStageSpecsAreExplained(spec: String, message: String) {
        #expect {
            try LoadProfile.parseStage(spec)
        } throws: { error in
            (error as? LoadProfileError)?.message.contains(message) == true
        }
    }

    @Test func emptyProfileAndBadRateAreRefused() {
        #expect(throws: LoadProfileError.self) { try LoadProfile(stages: []) }
        #expect(throws: LoadProfileError.self) { try LoadProfile.constant(rate: 0, duration: .seconds(1)) }
    }
}

import Foundation
