import FleetTesting
import DeviceNode
import Envelopes
import Foundation
import Synchronization
import Testing

@testable import Fleet

/// The simulated device's decisions without I/O: a ``DeviceStateMachine`` driven by hand, with
/// time as a number the test moves (connectivity windows, signing, cancel, decline, sync, drain,
/// captive signing, crash recovery), and the device's wait on a clock the test moves.
@Suite struct DeviceStateMachineTests {
    typealias Action = DeviceStateMachine.Action

    static let seed: UInt64 = testSeed("DeviceStateMachineTests")
    /// The run's start (seconds since the epoch); the tests' times count from it.
    static let start = 1_000_000.0

    static func configuration(
        behaviour: Behaviour = Behaviour(envelopesPerMinute: 0), connectivity: Connectivity = Connectivity(), outages: [Outage] = [],
        seed: UInt64 = seed
    ) -> SimulatedDeviceConfiguration {
        SimulatedDeviceConfiguration(
            deviceID: "d-1", endpoint: "tcp://127.0.0.1:1", storeDirectory: "/nonexistent", email: "host@example.com", secret: "s",
            seed: seed, behaviour: behaviour, connectivity: connectivity, outages: outages, runStart: start, requestTimeout: .seconds(1))
    }

    static func machine(_ configuration: SimulatedDeviceConfiguration, restored: DeviceStateMachine.Restored = .init()) -> DeviceStateMachine {
        var machine = DeviceStateMachine(configuration: configuration)
        machine.restore(restored)
        machine.start(now: configuration.runStart)
        return machine
    }

    /// Brings an always-online machine to "online, logged in, first pass done" at `start`.
    static func online(_ machine: inout DeviceStateMachine) {
        let step1 = machine.next(now: start)
        #expect(step1 == .goOnline(reason: .chain))
        let step2 = machine.next(now: start)
        #expect(step2 == .logIn(online: true))
        machine.loginFinished(.online, now: start)
        let step3 = machine.next(now: start)
        #expect(step3 == .sync, "coming online syncs (whenOnline)")
        machine.syncFinished(remaining: 0, tokenRejected: false, now: start)
    }

    /// Captive work for envelope `number` of a decision with embedded signers.
    static func captiveWork(_ decision: EnvelopeDecision, local: String) throws -> CaptiveWork {
        let transaction = "d-1-\(decision.number)"
        let envelope = try SimulatedDevice.builderEnvelope(decision, transaction: transaction, hostEmail: "host@example.com")
        return try #require(CaptiveWork(envelope: envelope, localId: local, number: decision.number))
    }

    // MARK: Arrival, signing, sync

    @Test func anOnlineDeviceLogsInThenComposesSignsAndSyncsEachArrival() {
        print("state machine seed \(Self.seed) (replay with SIGNFLEET_SEED=\(Self.seed))")
        let configuration = Self.configuration(behaviour: Behaviour(envelopesPerMinute: 6))
        let model = BehaviourModel(behaviour: configuration.behaviour, pens: configuration.pens, seed: Self.seed)
        var machine = Self.machine(configuration)
        Self.online(&machine)
        let first = Self.start + model.decision(for: 1).gap
        let step4 = machine.next(now: Self.start)
        #expect(step4 == .wait(until: first))
        let step5 = machine.next(now: first)
        #expect(step5 == .compose(model.decision(for: 1)))
        machine.composed(envelope: "e1", decision: model.decision(for: 1))
        let step6 = machine.next(now: first)
        #expect(step6 == .sign(envelope: "e1", decision: model.decision(for: 1)))
        machine.signed(.init(queued: true, declined: false, captive: nil))
        let step7 = machine.next(now: first)
        #expect(step7 == .sync, "whenOnline syncs after each signing, before the next envelope")
        // Done before the second arrival is due (a seed can draw that gap shorter than 0.1 s).
        let free = first + min(0.1, model.decision(for: 2).gap / 2)
        machine.syncFinished(remaining: 0, tokenRejected: false, now: free)
        // Arrivals are scheduled from the previous arrival, not from when the device was free.
        let step8 = machine.next(now: free)
        #expect(step8 == .wait(until: first + model.decision(for: 2).gap))
        #expect(machine.composed == 1)
    }

    @Test func cancelledEnvelopesAreNotSyncedAndDeclinedOnesGetNoCaptiveSigners() throws {
        var behaviour = Behaviour(envelopesPerMinute: 60, remoteSigners: IntRange(1, 1), embeddedFraction: 1, signingDuration: ClosedSpan(0, 0))
        behaviour.cancelRate = 1
        let cancelling = Self.configuration(behaviour: behaviour)
        var machine = Self.machine(cancelling)
        Self.online(&machine)
        guard case .wait(let at) = machine.next(now: Self.start), case .compose(let decision) = machine.next(now: at) else {
            Issue.record("no arrival")
            return
        }
        #expect(decision.outcome == .cancel)
        machine.composed(envelope: "e1", decision: decision)
        let step9 = machine.next(now: at)
        #expect(step9 == .sign(envelope: "e1", decision: decision))
        machine.signed(.init(queued: false, declined: false, captive: try Self.captiveWork(decision, local: "e1")))
        let step10 = machine.next(now: at)
        #expect(step10 == .wait(until: at + machine.behaviour.decision(for: 2).gap), "nothing queued, nothing to sync")
        #expect(machine.awaitingSync.isEmpty)

        behaviour.cancelRate = 0
        behaviour.declineRate = 1
        machine = Self.machine(Self.configuration(behaviour: behaviour))
        Self.online(&machine)
        guard case .wait(let at2) = machine.next(now: Self.start), case .compose(let declined) = machine.next(now: at2) else {
            Issue.record("no arrival")
            return
        }
        guard case .decline = declined.outcome else {
            Issue.record("decline rate 1 gave \(declined.outcome)")
            return
        }
        machine.composed(envelope: "e1", decision: declined)
        _ = machine.next(now: at2)
        machine.signed(.init(queued: true, declined: true, captive: try Self.captiveWork(declined, local: "e1")))
        let step11 = machine.next(now: at2)
        #expect(step11 == .sync, "a declined envelope is queued so the server records it")
        machine.syncAcknowledged(transaction: "d-1-1", serverEnvelope: "s-1")
        machine.syncFinished(remaining: 0, tokenRejected: false, now: at2)
        #expect(machine.captiveQueue.isEmpty, "after a decline the remote signers never get their turn")
        let step12 = machine.next(now: at2)
        #expect(step12 == .wait(until: at2 + machine.behaviour.decision(for: 2).gap))
    }

    @Test func aSigningPlanScriptsTheFirstSignerToCancelAndTheDrawnSignerToDecline() {
        let model = BehaviourModel(behaviour: Behaviour(inPersonSigners: IntRange(3, 3)), pens: [:], seed: Self.seed)
        var decision = model.decision(for: 1)
        let signers = ["a", "b", "c"]
        let signing = SigningPlan(decision: decision, localSigners: signers)
        #expect(signing.operation == .sign && signing.scripted.isEmpty)
        #expect(signing.durations == ["a": decision.signingDurations[0], "b": decision.signingDurations[1], "c": decision.signingDurations[2]])
        decision.outcome = .cancel
        let cancel = SigningPlan(decision: decision, localSigners: signers)
        #expect(cancel.operation == .cancel && cancel.scripted == ["a": .finishLater])
        decision.outcome = .decline(signerDraw: 0.5)
        let decline = SigningPlan(decision: decision, localSigners: signers)
        #expect(decline.operation == .decline && decline.scripted == ["b": .decline(reason: "the signer declined (simulated)")])
        decision.outcome = .decline(signerDraw: 0.999)
        #expect(SigningPlan(decision: decision, localSigners: signers).scripted.keys.sorted() == ["c"])
        // No in-person signer (only remote ones): queued as it is, whatever the decision.
        #expect(SigningPlan(decision: decision, localSigners: []).operation == .sign)
    }

    @Test func aFailedPassIsRetriedAfterABackOffThatDoublesAndResetsAfterASuccess() {
        var machine = Self.machine(Self.configuration())
        let step13 = machine.next(now: Self.start)
        #expect(step13 == .goOnline(reason: .chain))
        let step14 = machine.next(now: Self.start)
        #expect(step14 == .logIn(online: true))
        machine.loginFinished(.online, now: Self.start)
        var now = Self.start
        for failures in 1...4 {
            let step15 = machine.next(now: now)
            #expect(step15 == .sync)
            machine.syncFinished(remaining: 2, tokenRejected: false, now: now)
            guard case .wait(let until) = machine.next(now: now) else {
                Issue.record("no wait after failure \(failures)")
                return
            }
            // requestTimeout (1 s) doubling per failure, times a jitter in [0.5, 1.5).
            let base = Double(1 << (failures - 1))
            #expect(until - now >= 0.5 * base && until - now < 1.5 * base, "back-off \(until - now) after \(failures) failures")
            now = until
        }
        let step16 = machine.next(now: now)
        #expect(step16 == .sync)
        machine.syncFinished(remaining: 0, tokenRejected: false, now: now)
        #expect(machine.syncFailures == 0 && machine.retrySyncAt == nil)
        let step17 = machine.next(now: now)
        #expect(step17 == .wait(until: .infinity), "nothing due: rate 0, always online")
    }

    @Test func aRejectedTokenLogsInAgainBeforeTheNextPass() {
        var machine = Self.machine(Self.configuration())
        Self.online(&machine)
        machine.signed(.init(queued: true, declined: false, captive: nil))
        let step18 = machine.next(now: Self.start + 1)
        #expect(step18 == .sync)
        machine.syncFinished(remaining: 1, tokenRejected: true, now: Self.start + 1)
        let step19 = machine.next(now: Self.start + 1)
        #expect(step19 == .logIn(online: true))
        machine.loginFinished(.online, now: Self.start + 1)
        guard case .wait(let retry) = machine.next(now: Self.start + 1) else {
            Issue.record("no wait for the retry")
            return
        }
        let step20 = machine.next(now: retry)
        #expect(step20 == .sync)
    }

    @Test func syncEveryNSecondsAndManualSync() {
        var every = Self.machine(Self.configuration(behaviour: Behaviour(envelopesPerMinute: 0, sync: .every(30))))
        let step21 = every.next(now: Self.start)
        #expect(step21 == .goOnline(reason: .chain))
        let step22 = every.next(now: Self.start)
        #expect(step22 == .logIn(online: true))
        every.loginFinished(.online, now: Self.start)
        // The device's timer ticks at start + (phase + k) × 30, its phase drawn from its seed.
        let phase = every.syncPhase
        #expect(phase >= 0 && phase < 1)
        let firstTick = Self.start + phase * 30
        let step23 = every.next(now: Self.start)
        #expect(step23 == .wait(until: firstTick), "the timer's first tick (phase \(phase))")
        let step24 = every.next(now: firstTick)
        #expect(step24 == .sync)
        every.syncFinished(remaining: 3, tokenRejected: false, now: firstTick + 1)
        let step25 = every.next(now: firstTick + 1)
        #expect(step25 == .wait(until: firstTick + 30), "every(N) does not retry in between")
        // Other devices' timers fall elsewhere in the period: started together, they do not push together.
        let phases = Set((1...20).map { seed in
            Self.machine(Self.configuration(behaviour: Behaviour(envelopesPerMinute: 0, sync: .every(30)), seed: UInt64(seed))).syncPhase
        })
        #expect(phases.count == 20 && phases.max()! - phases.min()! > 0.5, "\(phases.sorted())")

        var manual = Self.machine(Self.configuration(behaviour: Behaviour(envelopesPerMinute: 0, sync: .manual)))
        let step26 = manual.next(now: Self.start)
        #expect(step26 == .goOnline(reason: .chain))
        let step27 = manual.next(now: Self.start)
        #expect(step27 == .logIn(online: true))
        manual.loginFinished(.online, now: Self.start)
        manual.signed(.init(queued: true, declined: false, captive: nil))
        let step28 = manual.next(now: Self.start + 5)
        #expect(step28 == .wait(until: .infinity), "manual: only on drain")
        let step29 = manual.drain(now: Self.start + 5)
        #expect(!step29)
        let step30 = manual.next(now: Self.start + 6)
        #expect(step30 == .inspectOutbox)
        manual.outboxInspected(empty: false, needsReconcile: false)
        let step31 = manual.next(now: Self.start + 6)
        #expect(step31 == .sync)
    }

    @Test func templatesAreCachedAfterAnOnlineLoginAndTriedAgainOnlyWhenTheDeviceComesBackOnline() {
        let configuration = Self.configuration(
            behaviour: Behaviour(envelopesPerMinute: 0, templateFraction: 0.5), outages: [Outage(start: 10, end: 20), Outage(start: 30, end: 40)])
        let start = Self.start
        var machine = Self.machine(configuration)
        let step32 = machine.next(now: start)
        #expect(step32 == .goOnline(reason: .chain))
        let step33 = machine.next(now: start)
        #expect(step33 == .logIn(online: true))
        machine.loginFinished(.online, now: start)
        let step34 = machine.next(now: start)
        #expect(step34 == .cacheTemplates)
        machine.templatesCached(false)
        let step35 = machine.next(now: start)
        #expect(step35 == .sync, "a failure is not tried again at once")
        machine.syncFinished(remaining: 0, tokenRejected: false, now: start)
        let step36 = machine.next(now: start)
        #expect(step36 == .wait(until: start + 10))
        let step37 = machine.next(now: start + 10)
        #expect(step37 == .goOffline(reason: .outage))
        let step38 = machine.next(now: start + 10)
        #expect(step38 == .wait(until: start + 20))
        let step39 = machine.next(now: start + 20)
        #expect(step39 == .goOnline(reason: .chain))
        let step40 = machine.next(now: start + 20)
        #expect(step40 == .cacheTemplates, "back online, logged in: tried again")
        machine.templatesCached(true)
        let step41 = machine.next(now: start + 20)
        #expect(step41 == .sync)
        machine.syncFinished(remaining: 0, tokenRejected: false, now: start + 20)
        let step42 = machine.next(now: start + 20)
        #expect(step42 == .wait(until: start + 30))
        let step43 = machine.next(now: start + 30)
        #expect(step43 == .goOffline(reason: .outage))
        let step44 = machine.next(now: start + 40)
        #expect(step44 == .goOnline(reason: .chain))
        let step45 = machine.next(now: start + 40)
        #expect(step45 == .sync, "cached once: not asked for again")
    }

    // MARK: Connectivity

    @Test func offlineADeviceLogsInWithItsAccountSignsAndSyncsOnlyWhenBackOnline() {
        let configuration = Self.configuration(
            behaviour: Behaviour(envelopesPerMinute: 60, signingDuration: ClosedSpan(0, 0)), outages: [Outage(start: 0, end: 30)])
        var world = DeviceWorld(machine: Self.machine(configuration), now: Self.start)
        world.run(until: Self.start + 40)
        let log = world.log
        #expect(log.first?.action == .goOffline(reason: .outage))
        #expect(log.dropFirst().first?.action == .logIn(online: false))
        let back = log.firstIndex { $0.action == .goOnline(reason: .chain) }
        #expect(back.map { log[$0].time } == Self.start + 30)
        let offline = back.map { log[..<$0] } ?? []
        #expect(offline.contains { if case .compose = $0.action { true } else { false } }, "composes offline: \(offline)")
        #expect(!offline.contains { $0.action == .sync }, "no sync offline")
        if let back {
            let after = log[(back + 1)...].map(\.action).prefix(2)
            #expect(Array(after) == [.logIn(online: true), .sync], "back online: an online login, then the outbox")
        }
    }

    @Test func transitionsFollowTheConnectivityModelAndEveryWaitEndsWithSomethingToDo() {
        let connectivity = Connectivity(model: .gilbertElliott(onlineMean: 20, offlineMean: 10), startOffline: 0.5)
        let outages = [Outage(start: 300, end: 400)]
        let configuration = Self.configuration(
            behaviour: Behaviour(envelopesPerMinute: 4, signingDuration: ClosedSpan(0, 0)), connectivity: connectivity, outages: outages)
        var world = DeviceWorld(machine: Self.machine(configuration), now: Self.start)
        world.run(until: Self.start + 3000)
        var model = ConnectivityModel(connectivity: connectivity, outages: outages, seed: Self.seed)
        var flips: [(Double, Bool)] = []
        var t = 0.0
        while t < 3000 {
            let state = model.state(at: t)
            flips.append((Self.start + t, state.online))
            t = state.until
        }
        let transitions = world.log.compactMap { entry -> (Double, Bool)? in
            switch entry.action {
            case .goOnline: return (entry.time, true)
            case .goOffline: return (entry.time, false)
            default: return nil
            }
        }
        #expect(transitions.map(\.0) == flips.map(\.0), "transition times (seed \(Self.seed))")
        #expect(transitions.map(\.1) == flips.map(\.1), "transition states (seed \(Self.seed))")
        var online = false
        for entry in world.log {
            switch entry.action {
            case .goOnline: online = true
            case .goOffline: online = false
            case .sync: #expect(online, "a pass at \(entry.time - Self.start) s while offline (seed \(Self.seed))")
            default: break
            }
        }
        // Offline for the whole outage (300 to 400 s), whatever the chain says (it may already be offline at 300 s).
        #expect(transitions.last { $0.0 <= Self.start + 300 }?.1 == false, "offline when the outage starts (seed \(Self.seed))")
        #expect(!transitions.contains { $0.0 > Self.start + 300 && $0.0 < Self.start + 400 }, "a change inside the outage (seed \(Self.seed))")
        // No wake-up for nothing: each wait's end has an action (issue 16: no timer that wakes idle).
        for (entry, following) in zip(world.log, world.log.dropFirst()) {
            if case .wait = entry.action, case .wait = following.action {
                Issue.record("a wait at \(entry.time - Self.start) s ended with nothing to do (seed \(Self.seed))")
            }
        }
        #expect(world.composed > 100, "\(world.composed) envelopes in 3000 s at 4 a minute")
    }

    @Test func theSameSeedGivesTheSameActionsAndAnotherSeedOthers() {
        let behaviour = Behaviour(
            envelopesPerMinute: 10, inPersonSigners: IntRange(1, 3), remoteSigners: IntRange(0, 2), cancelRate: 0.2, declineRate: 0.2)
        let connectivity = Connectivity(model: .gilbertElliott(onlineMean: 30, offlineMean: 10), startOffline: 0.3)
        func actions(_ seed: UInt64) -> [DeviceWorld.Entry] {
            var world = DeviceWorld(
                machine: Self.machine(Self.configuration(behaviour: behaviour, connectivity: connectivity, seed: seed)), now: Self.start)
            world.syncFailsEvery = 3
            world.run(until: Self.start + 600)
            return world.log
        }
        let first = actions(Self.seed)
        #expect(first.count > 50)
        #expect(first == actions(Self.seed), "seed \(Self.seed)")
        #expect(first != actions(Self.seed &+ 1))
    }

    // MARK: Start, drain, finish

    @Test func theStartDelayComesFirstUnlessTheDeviceDrains() {
        var configuration = Self.configuration()
        configuration.startDelay = 1.5
        var machine = Self.machine(configuration)
        let step46 = machine.next(now: Self.start)
        #expect(step46 == .wait(until: Self.start + 1.5))
        let step47 = machine.next(now: Self.start + 1.5)
        #expect(step47 == .goOnline(reason: .chain))
        var draining = Self.machine(configuration)
        _ = draining.drain(now: Self.start)
        let step48 = draining.next(now: Self.start)
        #expect(step48 == .goOnline(reason: .drain))
    }

    /// With a drain ramp each device starts draining at its own seeded moment in the window,
    /// going on as before until then; different seeds spread over the window.
    @Test func aDrainRampDelaysEachDevicesDrainToItsSeededMoment() {
        var starts: [Double] = []
        for seed in UInt64(1)...40 {
            var configuration = Self.configuration(
                behaviour: Behaviour(envelopesPerMinute: 60, signingDuration: ClosedSpan(0, 0)), outages: [Outage(start: 0, end: 1000)])
            configuration.seed = seed
            configuration.drainRamp = 10
            var world = DeviceWorld(machine: Self.machine(configuration), now: Self.start)
            world.run(until: Self.start + 10)
            let requested = Self.start + 10
            let done = world.machine.drain(now: requested)
            #expect(!done)
            #expect(world.machine.nextArrivalAt == nil, "no arrival after the drain was asked for")
            let at = world.machine.drainPhase * 10 + requested
            #expect(world.machine.drainAt == at)
            #expect(!world.machine.draining)
            // Offline in its outage until then: nothing to do but wait for the drain's moment.
            let before = world.machine.next(now: requested)
            #expect(before == .wait(until: at))
            let then = world.machine.next(now: at)
            #expect(then == .goOnline(reason: .drain))
            #expect(world.machine.draining && world.machine.drainAt == nil)
            starts.append(at - requested)
        }
        #expect(starts.allSatisfy { $0 >= 0 && $0 < 10 })
        #expect(starts.contains { $0 < 3 } && starts.contains { $0 > 7 }, "spread over the window: \(starts)")
        // A second drain request does not move the moment, and without a ramp the drain is immediate.
        var configuration = Self.configuration(behaviour: Behaviour(envelopesPerMinute: 60, signingDuration: ClosedSpan(0, 0)))
        configuration.drainRamp = 10
        var machine = Self.machine(configuration)
        _ = machine.drain(now: Self.start)
        let first = machine.drainAt
        _ = machine.drain(now: Self.start + 1)
        #expect(machine.drainAt == first)
        configuration.drainRamp = 0
        var immediate = Self.machine(configuration)
        _ = immediate.drain(now: Self.start)
        #expect(immediate.draining && immediate.drainAt == nil)
    }

    @Test func drainingGoesOnlineSyncsUntilTheOutboxIsEmptyThenReportsTheDrain() {
        let configuration = Self.configuration(
            behaviour: Behaviour(envelopesPerMinute: 60, signingDuration: ClosedSpan(0, 0)), outages: [Outage(start: 0, end: 1000)])
        var world = DeviceWorld(machine: Self.machine(configuration), now: Self.start)
        world.run(until: Self.start + 10)
        #expect(world.pending > 0 && world.log.allSatisfy { $0.action != .sync })
        let step49 = world.machine.drain(now: Self.start + 10)
        #expect(!step49)
        #expect(world.machine.nextArrivalAt == nil)
        let now = Self.start + 10
        let step50 = world.machine.next(now: now)
        #expect(step50 == .goOnline(reason: .drain))
        let step51 = world.machine.next(now: now)
        #expect(step51 == .logIn(online: true))
        world.machine.loginFinished(.online, now: now)
        let step52 = world.machine.next(now: now)
        #expect(step52 == .inspectOutbox)
        world.machine.outboxInspected(empty: false, needsReconcile: false)
        let step53 = world.machine.next(now: now)
        #expect(step53 == .sync)
        world.machine.syncFinished(remaining: 1, tokenRejected: false, now: now)
        let step54 = world.machine.next(now: now)
        #expect(step54 == .inspectOutbox)
        world.machine.outboxInspected(empty: false, needsReconcile: false)
        guard case .wait(let retry) = world.machine.next(now: now) else {
            Issue.record("no back-off")
            return
        }
        #expect(retry > now && retry < now + 1.5)
        let step55 = world.machine.next(now: retry)
        #expect(step55 == .inspectOutbox)
        world.machine.outboxInspected(empty: false, needsReconcile: false)
        let step56 = world.machine.next(now: retry)
        #expect(step56 == .sync)
        world.machine.syncFinished(remaining: 0, tokenRejected: false, now: retry)
        let step57 = world.machine.next(now: retry)
        #expect(step57 == .inspectOutbox)
        world.machine.outboxInspected(empty: true, needsReconcile: false)
        let step58 = world.machine.next(now: retry)
        #expect(step58 == .finishDrain)
        let step59 = world.machine.drain(now: retry)
        #expect(step59, "drained")
        let step60 = world.machine.next(now: retry)
        #expect(step60 == .inspectOutbox)
        world.machine.outboxInspected(empty: true, needsReconcile: true)
        let step61 = world.machine.next(now: retry)
        #expect(step61 == .sync, "a coordinator that needs this device's retained items gets a pass")
        world.machine.syncFinished(remaining: 0, tokenRejected: false, now: retry)
        let step62 = world.machine.next(now: retry)
        #expect(step62 == .inspectOutbox)
        world.machine.outboxInspected(empty: true, needsReconcile: false)
        let step63 = world.machine.next(now: retry)
        #expect(step63 == .wait(until: .infinity), "drained and not finishing: waits to be stopped")
        let step64 = world.machine.next(now: Self.start + 2000)
        #expect(step64 == .inspectOutbox, "no connectivity change while draining")
    }

    @Test func theEnvelopesModeComposesItsEnvelopesThenDrainsAndFinishes() {
        var configuration = SimulatedDeviceConfiguration(
            deviceID: "d-1", endpoint: "tcp://127.0.0.1:1", storeDirectory: "/nonexistent", email: "host@example.com", secret: "s",
            seed: Self.seed, envelopes: 3, meanInterval: .milliseconds(200))
        configuration.runStart = Self.start
        var world = DeviceWorld(machine: Self.machine(configuration), now: Self.start)
        world.operationTime = 0.5
        world.run(until: Self.start + 3600)
        let actions = world.log.map(\.action)
        #expect(world.composed == 3)
        #expect(actions.suffix(4) == [.inspectOutbox, .finishDrain, .inspectOutbox, .finish], "\(actions.suffix(6))")
        // gapsFromIdle: each gap counts from when the device was idle again (after its pass).
        let composes = world.log.filter { if case .compose = $0.action { true } else { false } }
        let passes = world.log.filter { $0.action == .sync }
        let model = world.machine.behaviour
        #expect(composes.count == 3)
        for (index, compose) in composes.enumerated().dropFirst() {
            let idle = passes.last { $0.time < compose.time }.map { $0.time + world.operationTime }
            #expect(idle.map { abs(compose.time - ($0 + model.decision(for: index + 1).gap)) < 1e-9 } == true, "compose \(index + 1)")
        }
    }

    // MARK: Captive signing

    @Test func embeddedSignersArePresentedAfterTheirSyncWhileOnlineAndGivenUpAfterFiveErrors() throws {
        let behaviour = Behaviour(
            envelopesPerMinute: 60, remoteSigners: IntRange(2, 2), embeddedFraction: 1, signingDuration: ClosedSpan(0, 0), maxEnvelopes: 1)
        var machine = Self.machine(Self.configuration(behaviour: behaviour, outages: [Outage(start: 50, end: 100)]))
        Self.online(&machine)
        guard case .wait(let at) = machine.next(now: Self.start), case .compose(let decision) = machine.next(now: at) else {
            Issue.record("no arrival")
            return
        }
        #expect(at < Self.start + 50, "seed \(Self.seed): the arrival falls before the outage")
        machine.composed(envelope: "e1", decision: decision)
        _ = machine.next(now: at)
        let work = try Self.captiveWork(decision, local: "e1")
        #expect(work.signers.count == 2)
        machine.signed(.init(queued: true, declined: false, captive: work))
        let step65 = machine.next(now: at)
        #expect(step65 == .sync)
        #expect(machine.captiveQueue.isEmpty, "nothing to present before the sync is acknowledged")
        machine.syncAcknowledged(transaction: "d-1-1", serverEnvelope: "s-1")
        // The pass ended inside the outage: the ceremonies wait until the device is online again.
        machine.syncFinished(remaining: 0, tokenRejected: false, now: Self.start + 60)
        let step66 = machine.next(now: Self.start + 60)
        #expect(step66 == .goOffline(reason: .outage))
        let step67 = machine.next(now: Self.start + 60)
        #expect(step67 == .wait(until: Self.start + 100))
        let step68 = machine.next(now: Self.start + 100)
        #expect(step68 == .goOnline(reason: .chain))
        let step69 = machine.next(now: Self.start + 100)
        #expect(step69 == .sync)
        machine.syncFinished(remaining: 0, tokenRejected: false, now: Self.start + 100)
        var expected = work
        expected.serverEnvelope = "s-1"
        let step70 = machine.next(now: Self.start + 100)
        #expect(step70 == .presentCaptive(expected))
        // The first signer signs: the second comes at once.
        var rest = expected
        rest.signers.removeFirst()
        rest.presented = 1
        machine.captiveFinished(.signed(rest), now: Self.start + 101)
        let step71 = machine.next(now: Self.start + 101)
        #expect(step71 == .presentCaptive(rest))
        // Errors: tried again after the back-off, given up after five.
        var now = Self.start + 101
        var failing = rest
        for errors in 1...CaptiveWork.maxErrors {
            let kept = machine.captiveFinished(.failed(failing), now: now)
            #expect(kept == (errors < CaptiveWork.maxErrors))
            guard case .wait(let retry) = machine.next(now: now) else {
                Issue.record("no wait after error \(errors)")
                return
            }
            if errors == CaptiveWork.maxErrors {
                #expect(retry == .infinity, "given up: nothing left to do")
                break
            }
            #expect(retry > now)
            failing.errors = errors
            let step72 = machine.next(now: retry)
            #expect(step72 == .presentCaptive(failing))
            now = retry
        }
        #expect(machine.captiveQueue.isEmpty)
    }

    // MARK: Crash recovery

    @Test func afterARestartTheLastUnqueuedEnvelopeIsSignedAgainAndNumberingCarriesOn() throws {
        let behaviour = Behaviour(envelopesPerMinute: 6, remoteSigners: IntRange(1, 1), embeddedFraction: 1)
        let configuration = Self.configuration(behaviour: behaviour)
        let model = BehaviourModel(behaviour: behaviour, pens: configuration.pens, seed: Self.seed)
        var owed = try Self.captiveWork(model.decision(for: 2), local: "e2")
        owed.serverEnvelope = "s-2"
        owed.restored = true
        let restored = DeviceStateMachine.Restored(
            composed: 3, unqueuedLast: .init(envelope: "e3", number: 3), awaitingSync: [], owedCaptive: [owed])
        var machine = Self.machine(configuration, restored: restored)
        let step73 = machine.next(now: Self.start)
        #expect(step73 == .goOnline(reason: .chain))
        let step74 = machine.next(now: Self.start)
        #expect(step74 == .logIn(online: true))
        machine.loginFinished(.online, now: Self.start)
        let step75 = machine.next(now: Self.start)
        #expect(step75 == .sign(envelope: "e3", decision: model.decision(for: 3)), "signed again, as decided")
        machine.signed(.init(queued: true, declined: false, captive: nil))
        let step76 = machine.next(now: Self.start)
        #expect(step76 == .sync)
        machine.syncFinished(remaining: 0, tokenRejected: false, now: Self.start)
        let step77 = machine.next(now: Self.start)
        #expect(step77 == .presentCaptive(owed), "ceremonies owed before the kill, checked first (restored)")
        machine.captiveFinished(.nothingLeft, now: Self.start)
        let next = Self.start + model.decision(for: 4).gap
        let step78 = machine.next(now: Self.start)
        #expect(step78 == .wait(until: next), "arrivals restart from the restart")
        let step79 = machine.next(now: next)
        #expect(step79 == .compose(model.decision(for: 4)), "envelope 4 gets envelope 4's decisions")

        // A last envelope its decision cancelled stays as it is.
        var cancelling = behaviour
        cancelling.cancelRate = 1
        var again = Self.machine(Self.configuration(behaviour: cancelling), restored: .init(composed: 3, unqueuedLast: .init(envelope: "e3", number: 3)))
        #expect(again.resumeEnvelope == nil)
        let step80 = again.next(now: Self.start)
        #expect(step80 == .goOnline(reason: .chain))
        let step81 = again.next(now: Self.start)
        #expect(step81 == .logIn(online: true))
        again.loginFinished(.online, now: Self.start)
        let step82 = again.next(now: Self.start)
        #expect(step82 == .sync)
    }

    @Test func aRestartedOfflineDeviceSignsWithItsPersistedAccountAndEnvelopesAwaitingSyncKeepTheirSigners() throws {
        let behaviour = Behaviour(envelopesPerMinute: 0, remoteSigners: IntRange(1, 1), embeddedFraction: 1)
        let configuration = Self.configuration(behaviour: behaviour, outages: [Outage(start: 0, end: 20)])
        let pending = try Self.captiveWork(BehaviourModel(behaviour: behaviour, pens: [:], seed: Self.seed).decision(for: 1), local: "e1")
        var machine = Self.machine(
            configuration, restored: .init(composed: 2, unqueuedLast: .init(envelope: "e2", number: 2), awaitingSync: [pending]))
        let step83 = machine.next(now: Self.start)
        #expect(step83 == .goOffline(reason: .outage))
        let step84 = machine.next(now: Self.start)
        #expect(step84 == .logIn(online: false))
        machine.loginFinished(.unavailable(offlineAccount: true), now: Self.start)
        let step85 = machine.next(now: Self.start)
        #expect(step85 == .sign(envelope: "e2", decision: machine.behaviour.decision(for: 2)))
        machine.signed(.init(queued: true, declined: false, captive: nil))
        let step86 = machine.next(now: Self.start)
        #expect(step86 == .wait(until: Self.start + 20))
        let step87 = machine.next(now: Self.start + 20)
        #expect(step87 == .goOnline(reason: .chain))
        let step88 = machine.next(now: Self.start + 20)
        #expect(step88 == .logIn(online: true))
        machine.loginFinished(.online, now: Self.start + 20)
        let step89 = machine.next(now: Self.start + 20)
        #expect(step89 == .sync)
        machine.syncAcknowledged(transaction: pending.transaction, serverEnvelope: "s-1")
        machine.syncFinished(remaining: 0, tokenRejected: false, now: Self.start + 20)
        guard case .presentCaptive(let work) = machine.next(now: Self.start + 20) else {
            Issue.record("the pending envelope's embedded signer was not presented")
            return
        }
        #expect(work.localId == "e1" && work.serverEnvelope == "s-1" && !work.restored)
    }

    // MARK: The device's wait

    @Test(.timeLimit(.minutes(5))) func aWaitEndsAtItsDeadlineOnTheClock() async {
        let clock = ManualDeviceClock(now: 0)
        let wakeup = DeviceWakeup()
        let waiting = Task { await wakeup.wait(until: 10, on: clock) }
        #expect(await clock.nextScheduled() == 10)
        clock.advance(to: 9.5)
        #expect(wakeup.isWaiting, "not before its deadline")
        clock.advance(to: 10)
        await waiting.value
        #expect(!wakeup.isWaiting)
    }

    @Test(.timeLimit(.minutes(5))) func aRingEndsTheWaitAtOnceOrTheNextWaitWhenNobodyWaits() async {
        let clock = ManualDeviceClock(now: 0)
        let wakeup = DeviceWakeup()
        let waiting = Task { await wakeup.wait(until: 1000, on: clock) }
        #expect(await clock.nextScheduled() == 1000)
        wakeup.ring()
        await waiting.value
        #expect(clock.live == 0, "the ring cancelled the timer")
        // Rung while nobody waits (a drain while the device is busy): the next wait returns at once.
        wakeup.ring()
        await wakeup.wait(until: 5000, on: clock)
        #expect(clock.scheduledCount == 1, "returned without a timer")
    }

    @Test(.timeLimit(.minutes(5))) func aLateTimerOfAnEarlierWaitDoesNotEndALaterOne() async {
        let clock = ManualDeviceClock(now: 0)
        clock.ignoresCancel = true  // a timer that fires as it is being cancelled
        let wakeup = DeviceWakeup()
        let first = Task { await wakeup.wait(until: 10, on: clock) }
        #expect(await clock.nextScheduled() == 10)
        wakeup.ring()
        await first.value
        let second = Task { await wakeup.wait(until: 20, on: clock) }
        #expect(await clock.nextScheduled() == 20)
        clock.advance(to: 10)
        #expect(wakeup.isWaiting, "the first wait's timer ended the second")
        clock.advance(to: 20)
        await second.value
    }

    @Test(.timeLimit(.minutes(5))) func cancellingTheWaitingTaskEndsTheWait() async {
        let clock = ManualDeviceClock(now: 0)
        let wakeup = DeviceWakeup()
        let waiting = Task { await wakeup.wait(until: 1000, on: clock) }
        #expect(await clock.nextScheduled() == 1000)
        waiting.cancel()
        await waiting.value
        #expect(!wakeup.isWaiting)
    }

    @Test(.timeLimit(.minutes(5))) func theWallClockWaitsOnRealTime() async {
        let clock = WallDeviceClock()
        let deadline = clock.now + 0.05
        await DeviceWakeup().wait(until: deadline, on: clock)
        #expect(clock.now >= deadline - 0.002, "woke \(deadline - clock.now) s early")
    }
}

/// A device's surroundings that answer every action at once (after `operationTime`): logins work
/// online, the persisted account works offline, passes sync everything (but every
/// `syncFailsEvery`th), signings queue what their decision says. It records every action.
struct DeviceWorld {
    struct Entry: Equatable {
        var time: Double
        var action: DeviceStateMachine.Action
    }

    var machine: DeviceStateMachine
    var now: Double
    var log: [Entry] = []
    var pending = 0
    var composed = 0
    var operationTime = 0.0
    var syncFailsEvery = 0
    private var passes = 0

    init(machine: DeviceStateMachine, now: Double) {
        self.machine = machine
        self.now = now
    }

    mutating func run(until end: Double, maxSteps: Int = 100_000) {
        for _ in 0..<maxSteps {
            guard now < end else { return }
            let action = machine.next(now: now)
            log.append(Entry(time: now, action: action))
            switch action {
            case .wait(let until):
                guard until.isFinite else { return }
                now = max(now, min(until, end))
                continue
            case .finish:
                return
            case .goOnline, .goOffline, .finishDrain:
                break
            case .logIn(let online):
                machine.loginFinished(online ? .online : .unavailable(offlineAccount: true), now: now)
            case .cacheTemplates:
                machine.templatesCached(true)
            case .compose(let decision):
                composed += 1
                machine.composed(envelope: "e\(decision.number)", decision: decision)
            case .sign(_, let decision):
                let declined = if case .decline = decision.outcome { true } else { false }
                let queued = decision.outcome != .cancel
                if queued { pending += 1 }
                machine.signed(.init(queued: queued, declined: declined, captive: nil))
            case .sync:
                passes += 1
                if syncFailsEvery == 0 || passes % syncFailsEvery != 0 { pending = 0 }
                machine.syncFinished(remaining: pending, tokenRejected: false, now: now + operationTime)
            case .presentCaptive:
                machine.captiveFinished(.ended, now: now)
            case .inspectOutbox:
                machine.outboxInspected(empty: pending == 0, needsReconcile: false)
            }
            now += operationTime
        }
        Issue.record("the device did not settle in \(maxSteps) actions")
    }
}

/// A clock the test moves: timers fire when ``advance(to:)`` passes their deadline.
final class ManualDeviceClock: DeviceClock {
    private struct State {
        var now: Double
        var timers: [(id: Int, deadline: Double, action: (@Sendable () -> Void)?)] = []
        var nextId = 0
        var ignoresCancel = false
    }

    private let state: Mutex<State>
    private let scheduledStream: AsyncStream<Double>
    private let scheduledContinuation: AsyncStream<Double>.Continuation

    init(now: Double) {
        state = Mutex(State(now: now))
        (scheduledStream, scheduledContinuation) = AsyncStream.makeStream(of: Double.self)
    }

    var now: Double { state.withLock { $0.now } }

    /// Cancelled timers still fire (a race the wait must survive).
    var ignoresCancel: Bool {
        get { state.withLock { $0.ignoresCancel } }
        set { state.withLock { $0.ignoresCancel = newValue } }
    }

    /// Timers scheduled so far.
    var scheduledCount: Int { state.withLock { $0.nextId } }
    /// Timers neither fired nor cancelled.
    var live: Int { state.withLock { $0.timers.filter { $0.action != nil }.count } }

    /// The deadline of the next timer scheduled (waits for it).
    func nextScheduled() async -> Double? {
        var iterator = scheduledStream.makeAsyncIterator()
        return await iterator.next()
    }

    func schedule(at deadline: Double, _ action: @escaping @Sendable () -> Void) -> any DeviceTimer {
        let id = state.withLock { state in
            state.nextId += 1
            state.timers.append((state.nextId, deadline, action))
            return state.nextId
        }
        scheduledContinuation.yield(deadline)
        return Timer(clock: self, id: id)
    }

    func advance(to time: Double) {
        let due = state.withLock { state -> [@Sendable () -> Void] in
            state.now = time
            var due: [@Sendable () -> Void] = []
            for index in state.timers.indices where state.timers[index].deadline <= time {
                if let action = state.timers[index].action { due.append(action) }
                state.timers[index].action = nil
            }
            return due
        }
        for action in due { action() }
    }

    fileprivate func cancel(_ id: Int) {
        state.withLock { state in
            guard !state.ignoresCancel, let index = state.timers.firstIndex(where: { $0.id == id }) else { return }
            state.timers[index].action = nil
        }
    }

    private struct Timer: DeviceTimer {
        let clock: ManualDeviceClock
        let id: Int
        func cancel() { clock.cancel(id) }
    }
}
