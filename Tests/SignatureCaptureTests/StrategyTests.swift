import FleetTesting
import Testing
@testable import SignatureCapture

@Suite struct StrategyTests {
    let order: [CaptureStrategy] = [.applePencil, .wacomBluetoothWithTouchManager, .hand]

    func capturer(strategies: [CaptureStrategy], connected: Set<PenKind>, palm: Double = 0,
                  drops: [PenKind: Double] = [:]) -> SignatureCapturer {
        SignatureCapturer(
            configuration: CaptureConfiguration(pen: PenProperties(strategies: strategies), palmTouchProbability: palm),
            availability: PenAvailability(connected: connected, dropsAfter: drops))
    }

    @Test func firstUsableStrategyInPriorityOrderWins() throws {
        let c = capturer(strategies: order, connected: [])
        #expect(try c.selectStrategy(connected: [.applePencil, .wacomBluetooth]) == .applePencil)
        #expect(try c.selectStrategy(connected: [.wacomBluetooth]) == .wacomBluetoothWithTouchManager)
        #expect(try c.selectStrategy(connected: [.signaturePad]) == .hand)
        let reversed = capturer(strategies: [.wacomBluetoothWithHandWarning, .applePencil, .hand], connected: [])
        #expect(try reversed.selectStrategy(connected: [.applePencil, .wacomBluetooth]) == .wacomBluetoothWithHandWarning)
    }

    @Test func handIsAlwaysUsableAndFallsBack() throws {
        let c = capturer(strategies: order, connected: [])
        let signature = try c.capture(signer: SignerProfile(seed: 5), signing: 1, fieldID: "f")
        #expect(signature.strategy == .hand)
        #expect(signature.pen == .finger)
        #expect(!signature.characteristics.reportsPressure)
        // Hand first shadows every other strategy, as the SDK warns.
        let handFirst = capturer(strategies: [.hand, .applePencil], connected: [.applePencil])
        #expect(try handFirst.selectStrategy(connected: [.applePencil]) == .hand)
    }

    @Test func noUsableStrategyIsATypedError() {
        for strategies in [[CaptureStrategy.applePencil, .signaturePad], []] {
            let c = capturer(strategies: strategies, connected: [.wacomBluetooth])
            #expect {
                try c.capture(signer: SignerProfile(seed: 5), signing: 1, fieldID: "f")
            } throws: { error in
                (error as? CaptureError)?.code == .noUsableStrategy
            }
        }
    }

    @Test func capturedStrategyUsesThePensRate() throws {
        let pencil = try capturer(strategies: order, connected: [.applePencil]).capture(signer: SignerProfile(seed: 3), signing: 1, fieldID: "f")
        #expect(pencil.strategy == .applePencil)
        #expect(pencil.characteristics.sampleRate == 240)
        let pad = try SignatureCapturer(pen: .signaturePad).capture(signer: SignerProfile(seed: 3), signing: 1, fieldID: "f")
        #expect(pad.characteristics.sampleRate == 200)
        #expect(pad.samples.contains { !$0.isDown }, "pads report hover between strokes")
        #expect(pencil.samples.allSatisfy { $0.isDown }, "Apple Pencil reports no hover")
        // Pens without hover leave gaps in the sample clock at lifts.
        #expect(zip(pencil.samples, pencil.samples.dropFirst()).contains { $1.tick > $0.tick + 1 })
    }

    @Test func palmWithHandRestartsTheCaptureWithAnEvent() throws {
        var found = false
        for signing in 1...40 {
            let log = EventLog()
            let c = capturer(strategies: [.hand], connected: [], palm: 0.5)
            guard let signature = try? c.capture(signer: SignerProfile(seed: 9), signing: signing, fieldID: "f", onEvent: log.append)
            else { continue }
            guard signature.attempts > 1 else { continue }
            found = true
            let m = log.milestones
            #expect(m.first == .strategySelected(.hand, attempt: 1))
            #expect(m.contains(.palmDetected(attempt: 1)))
            #expect(m.contains(.erased(.palmDetected, attempt: 1)))
            #expect(m.contains(.strategySelected(.hand, attempt: 2)))
            #expect(m.last == .completed(fieldID: "f"))
            #expect(signature.startedAt > .epoch, "the successful attempt starts after the erased one")
            break
        }
        #expect(found, "some signing among 40 should have had a palm restart")
    }

    @Test func palmEveryTimeGivesUpWithTooManyAttempts() {
        let c = capturer(strategies: [.hand], connected: [], palm: 1)
        #expect {
            try c.capture(signer: SignerProfile(seed: 9), signing: 1, fieldID: "f")
        } throws: { ($0 as? CaptureError)?.code == .tooManyAttempts }
    }

    @Test func wacomStrategiesHandlePalmsWithoutRestart() throws {
        let log = EventLog()
        let warning = capturer(strategies: [.wacomBluetoothWithHandWarning, .hand], connected: [.wacomBluetooth], palm: 1)
        let signature = try warning.capture(signer: SignerProfile(seed: 9), signing: 1, fieldID: "f", onEvent: log.append)
        #expect(signature.attempts == 1)
        #expect(log.milestones.contains { if case .handWarning = $0 { return true } else { return false } })
        let log2 = EventLog()
        let manager = capturer(strategies: [.wacomBluetoothWithTouchManager, .hand], connected: [.wacomBluetooth], palm: 1)
        _ = try manager.capture(signer: SignerProfile(seed: 9), signing: 1, fieldID: "f", onEvent: log2.append)
        #expect(log2.milestones == [.strategySelected(.wacomBluetoothWithTouchManager, attempt: 1), .completed(fieldID: "f")])
    }

    @Test func penDroppingMidSessionFallsBackToTheNextStrategy() throws {
        let log = EventLog()
        let c = capturer(strategies: order, connected: [.applePencil], drops: [.applePencil: 0.8])
        let signature = try c.capture(signer: SignerProfile(seed: 11), signing: 1, fieldID: "f", onEvent: log.append)
        #expect(signature.strategy == .hand)
        #expect(signature.attempts == 2)
        let m = log.milestones
        #expect(m.starts(with: [.strategySelected(.applePencil, attempt: 1), .penDisconnected(.applePencil),
                                .erased(.penDisconnected, attempt: 1), .strategySelected(.hand, attempt: 2)]))
        let points = log.events.filter { if case .point = $0 { return true } else { return false } }
        #expect(points.count > signature.samples.count, "points of the interrupted attempt were reported too")
    }

    @Test func pointHistoryMatchesSamples() throws {
        let log = EventLog()
        let signature = try SignatureCapturer(pen: .applePencil).capture(signer: SignerProfile(seed: 2), signing: 1, fieldID: "f", onEvent: log.append)
        let points = log.events.compactMap { if case .point(let p) = $0 { return p } else { return nil } }
        #expect(points.count == signature.samples.count)
        #expect(points.last?.time == Double(signature.samples.last?.tick ?? 0) / 240)
        #expect(points.first?.x == signature.samples.first?.x)
    }

    @Test func abortIsReported() {
        let log = EventLog()
        let c = SignatureCapturer(configuration: CaptureConfiguration(abortProbability: 1), availability: .none)
        #expect {
            try c.capture(signer: SignerProfile(seed: 2), signing: 1, fieldID: "f", onEvent: log.append)
        } throws: { ($0 as? CaptureError)?.code == .aborted }
        #expect(log.milestones.last == .aborted(attempt: 1))
    }

    @Test func liveEventsArriveAtTheirMomentsNotBefore() async throws {
        let clock = ManualClock()
        let start = clock.now
        let capturer = SignatureCapturer(pen: .applePencil)
        let capture = capturer.captureWithEvents(signer: SignerProfile(seed: 2), signing: 1, fieldID: "f", clock: clock)
        // The reader notes the clock when each event reaches it; the driver moves the clock only
        // when the capture waits for it, so nothing can arrive before its moment.
        let reader = Task {
            var received: [(event: CaptureEvent, at: Double)] = []
            for try await event in capture.events { received.append((event, clock.elapsed(since: start).seconds)) }
            return received
        }
        let driver = Task {
            while !Task.isCancelled {
                await clock.sleeping(atLeast: 1)
                if let next = clock.pendingDeadlines.first { await clock.advance(by: next) }
            }
        }
        let signature = try await capture.run()
        let endedAt = clock.elapsed(since: start).seconds
        driver.cancel()
        await driver.value
        let received = try await reader.value

        let direct = try capturer.capture(signer: SignerProfile(seed: 2), signing: 1, fieldID: "f")
        #expect(signature == direct, "the same capture as without events")
        #expect(received.count == signature.samples.count + 2, "strategy, every point, completion")
        #expect(received.first?.event == .strategySelected(.applePencil, attempt: 1))
        #expect(received.last?.event == .completed(fieldID: "f"))
        #expect(endedAt >= signature.duration - 1e-9, "run() returns once the signer has finished writing: \(endedAt) s")
        var early: [String] = []
        for (event, at) in received {
            if case .point(let point) = event, at < point.time - 1e-9 { early.append("point of \(point.time) s at \(at) s") }
        }
        #expect(early.isEmpty, "events arrived before their moment: \(early.prefix(3))")
        let lastPoint = received.last { if case .point = $0.event { true } else { false } }
        #expect((lastPoint?.at ?? 0) > 1, "the last point arrives seconds into the capture, not at once")
    }

    @Test func liveCaptureThrowsAfterTheEventsThatLedToIt() async throws {
        let capturer = SignatureCapturer(configuration: CaptureConfiguration(abortProbability: 1), availability: .none)
        let capture = capturer.captureWithEvents(signer: SignerProfile(seed: 2), signing: 1, fieldID: "f", clock: ImmediateClock())
        await #expect(throws: CaptureError.self) { try await capture.run() }
        var events: [CaptureEvent] = []
        do {
            for try await event in capture.events { events.append(event) }
            Issue.record("the stream must end with the capture's error")
        } catch let error as CaptureError {
            #expect(error.code == .aborted)
        }
        let milestones = events.filter { if case .point = $0 { false } else { true } }
        #expect(milestones.last == .aborted(attempt: 1))
    }
}

@Suite struct DeviceManagerTests {
    @Test func discoveryTakesTimeAndConnectsNearbyPens() async throws {
        let manager = PenDeviceManager(nearbyPens: [.applePencil, .wacomBluetooth, .finger], seed: 1)
        #expect(await manager.isAnyPenConnected == false)
        let clock = ImmediateClock()
        let connected = try await manager.discover(using: clock)
        #expect(connected == [.applePencil, .wacomBluetooth])
        #expect(await manager.isAnyPenConnected)
        let waited = clock.now.offset
        #expect(waited >= .seconds(1) && waited <= .seconds(3), "Bluetooth discovery takes 1–3 s, waited \(waited)")
    }

    @Test func eventsInVirtualTime() async {
        let manager = PenDeviceManager(nearbyPens: [.applePencil, .wacomBluetooth], seed: 4)
        let settle = await manager.startDiscovery()
        #expect(await manager.advance(to: 0.1).isEmpty, "nothing connects instantly")
        let events = await manager.advance(to: settle)
        #expect(events.contains(.connected(.applePencil, at: 0.25)))
        #expect(events.contains { if case .connected(.wacomBluetooth, _) = $0 { return true } else { return false } })
        var stream = manager.events.makeAsyncIterator()
        #expect(await stream.next() == .discoveryStarted(at: 0))
    }

    @Test func seededDropsAreReproducibleAndPencilDropsAreSilent() async {
        func run(_ seed: UInt64) async -> ([PenDeviceEvent], PenAvailability) {
            let manager = PenDeviceManager(nearbyPens: [.applePencil, .wacomBluetooth],
                                           dropModel: PenDropModel(meanTimeToDrop: 60, meanTimeToReconnect: 10), seed: seed)
            await manager.startDiscovery()
            // The first moment the Wacom pen is connected (whenever discovery and drops put it).
            var events: [PenDeviceEvent] = []
            var availability = PenAvailability()
            for second in 1...600 {
                events += await manager.advance(to: Double(second))
                availability = await manager.availability()
                if availability.connected.contains(.wacomBluetooth) { break }
            }
            events += await manager.advance(to: 600)
            return (events, availability)
        }
        let seed = testSeed("seededDrops")
        let (a, availability) = await run(seed)
        let (b, _) = await run(seed)
        #expect(a == b)
        #expect(a.contains { if case .disconnected(.wacomBluetooth, _) = $0 { return true } else { return false } })
        #expect(!a.contains { if case .disconnected(.applePencil, _) = $0 { return true } else { return false } })
        #expect(availability.connected.contains(.wacomBluetooth), "the Wacom pen connects at some point (seed \(seed))")
        #expect((availability.dropsAfter[.wacomBluetooth] ?? -1) > 0, "a connected pen that will drop reports when (seed \(seed))")
    }

    @Test func explicitDisconnect() async {
        let manager = PenDeviceManager(nearbyPens: [.wacomBluetooth], seed: 2)
        let settle = await manager.startDiscovery()
        await manager.advance(to: settle)
        await manager.disconnect(.wacomBluetooth)
        #expect(await manager.isAnyPenConnected == false)
    }
}
