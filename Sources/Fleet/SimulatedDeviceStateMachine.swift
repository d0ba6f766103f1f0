import DeviceNode
import Foundation
import SignatureCapture

/// What a simulated device decides, as a value: every input (the time, what an operation
/// returned) goes in through a method, and ``next(now:)`` says what to do now as an ``Action``.
/// No I/O, no clock, no task: ``SimulatedDevice`` performs the actions against its `DeviceNode`
/// and coordinator link and feeds the results back (docs/fleet-devices.md, "The device as a
/// state machine").
///
/// The loop that runs it:
///
/// ```swift
/// var machine = DeviceStateMachine(configuration: configuration)
/// machine.restore(restored)          // what the store held
/// machine.start(now: clock.now)
/// while true {
///     switch machine.next(now: clock.now) {
///     case .wait(let until): …       // one wait, until then or until woken
///     case .sync: …                  // a pass, then machine.syncFinished(…)
///     …
///     }
/// }
/// ```
///
/// Every random choice comes from the configuration's seed (``BehaviourModel``,
/// ``ConnectivityModel`` and the back-off jitter), so the same inputs at the same times give
/// the same actions.
struct DeviceStateMachine: Sendable {
    /// What the device's loop does next.
    enum Action: Hashable, Sendable {
        /// Nothing is due before `until` (seconds since the epoch; `.infinity`: until woken).
        case wait(until: Double)
        /// Connectivity changed: open a link (and an engine, when logged in).
        case goOnline(reason: TransitionReason)
        /// Connectivity changed: close the link.
        case goOffline(reason: TransitionReason)
        /// Log in: online through the link when `online`, then with the persisted account when
        /// that failed and the device has no token yet. Report with ``loginFinished(_:now:)``.
        case logIn(online: Bool)
        /// Cache the coordinator's templates (at most 20). Report with ``templatesCached(_:)``.
        case cacheTemplates
        /// Compose envelope `decision.number`. Report with ``composed(envelope:decision:)``.
        case compose(EnvelopeDecision)
        /// Sign (or cancel, or decline, as the decision says) a composed envelope. Report with
        /// ``signed(_:)``.
        case sign(envelope: String, decision: EnvelopeDecision)
        /// One sync pass. Report with ``syncFinished(remaining:tokenRejected:now:)``.
        case sync
        /// Captive signing for the work's next embedded signer (asking the coordinator first when
        /// the work was restored). Report with ``captiveFinished(_:now:)``.
        case presentCaptive(CaptiveWork)
        /// Draining: tell whether the outbox is empty and the engine must reconcile
        /// (``outboxInspected(empty:needsReconcile:)``).
        case inspectOutbox
        /// The drain is done: record it, wake whoever waits for it.
        case finishDrain
        /// ``SimulatedDeviceConfiguration/finishWhenDone``: the device's work is over.
        case finish
    }

    /// Why connectivity changed (the history's `details.reason`).
    enum TransitionReason: String, Hashable, Sendable {
        case chain, outage, drain
    }

    /// How a login ended.
    enum LoginResult: Hashable, Sendable {
        /// The coordinator gave a token.
        case online
        /// No online login (offline, or the coordinator did not answer); `offlineAccount`: the
        /// persisted account was used instead.
        case unavailable(offlineAccount: Bool)
    }

    /// How a signing session ended, as far as the machine cares.
    struct SigningResult: Hashable, Sendable {
        /// The envelope entered the outbox (signed or declined, or only remote signers left).
        var queued: Bool
        /// An in-person signer declined (the remote signers then never sign).
        var declined: Bool
        /// Its embedded remote signers, when it has any.
        var captive: CaptiveWork?
    }

    /// How a captive step ended.
    enum CaptiveResult: Hashable, Sendable {
        /// Nothing left to sign (the coordinator says so, or the work had no signer).
        case nothingLeft
        /// Asking the coordinator about restored work failed; the work as it was.
        case checkFailed(CaptiveWork)
        /// The signer completed; the work with the signers still to come.
        case signed(CaptiveWork)
        /// Another ending (cancel, decline, …): the later signers never get their turn.
        case ended
        /// An error or the deadline; the work with that signer first again.
        case failed(CaptiveWork)
    }

    /// What the store held at start (see ``SimulatedDevice``, "After a restart").
    struct Restored: Hashable, Sendable {
        /// The highest envelope number composed.
        var composed = 0
        /// The last composed envelope when it is cached and not queued: its local id and number.
        var unqueuedLast: PendingSigning?
        /// Pending envelopes with embedded signers, waiting for their sync.
        var awaitingSync: [CaptiveWork] = []
        /// Synced envelopes whose embedded signers may still be owed (`restored` set).
        var owedCaptive: [CaptiveWork] = []
    }

    /// An envelope to sign: its local id and number.
    struct PendingSigning: Hashable, Sendable {
        var envelope: String
        var number: Int
    }

    let configuration: SimulatedDeviceConfiguration
    let behaviour: BehaviourModel
    private var connectivity: ConnectivityModel
    private var jitter: SeededRandom
    /// Where this device's `every(N)` sync timer falls within each period, as a fraction of N
    /// (from its seed): its passes come at `runStart + (syncPhase + k) × N`. Devices started
    /// together do not share a phase, as apps' timers on separate phones do not; with one phase
    /// for all, a thousand depot devices pushed in the same second every period.
    let syncPhase: Double
    /// Where in the drain ramp (``SimulatedDeviceConfiguration/drainRamp``) this device starts
    /// draining, as a fraction of it (from its seed): a fleet returns over the ramp, not in the
    /// same millisecond.
    let drainPhase: Double
    /// When a requested drain begins (a ramp delays it); until then the device goes on as before.
    private(set) var drainAt: Double?

    /// When the first arrival may be scheduled (after ``SimulatedDeviceConfiguration/startDelay``).
    private var startAt: Double?
    private var arrivalsScheduled = false

    private(set) var online: Bool?
    private(set) var connectivityUntil = Double.infinity
    /// The same moment as `connectivityUntil`, in seconds since the run's start.
    private var connectivityFlip = Double.infinity
    private(set) var hasToken = false
    private(set) var loggedInOnline = false
    private(set) var nextLoginAttempt = 0.0
    private(set) var loginFailures = 0
    private var templatesChecked = false
    private var templatesWanted = false

    private(set) var composed = 0
    private(set) var nextArrivalAt: Double?
    /// With ``SimulatedDeviceConfiguration/gapsFromIdle``: the next arrival is scheduled once idle.
    private var scheduleWhenIdle = false
    /// Restored: signed again once logged in.
    private(set) var resumeEnvelope: PendingSigning?
    /// Just composed: signed before anything else.
    private var signNext: (envelope: String, decision: EnvelopeDecision)?

    private var needsSync = false
    private var lastSyncAt = 0.0
    private(set) var retrySyncAt: Double?
    private(set) var syncFailures = 0

    /// Envelopes with embedded remote signers, by transaction, until their sync is acknowledged.
    private(set) var awaitingSync: [String: CaptiveWork] = [:]
    /// Synced envelopes whose embedded remote signers are still to be presented, oldest first.
    private(set) var captiveQueue: [CaptiveWork] = []
    /// After a ceremony's error, the next one waits (the back-off of sync passes).
    private(set) var captiveRetryAt: Double?

    private(set) var draining = false
    private(set) var drained = false
    private var outboxFacts: (empty: Bool, needsReconcile: Bool)?

    init(configuration: SimulatedDeviceConfiguration) {
        self.configuration = configuration
        behaviour = BehaviourModel(behaviour: configuration.behaviour, pens: configuration.pens, seed: configuration.seed)
        connectivity = ConnectivityModel(connectivity: configuration.connectivity, outages: configuration.outages, seed: configuration.seed)
        jitter = SeededRandom(mixing: configuration.seed, 0xBAC0_FF)
        var phase = SeededRandom(mixing: configuration.seed, 0x5EC0_0D)
        syncPhase = phase.nextDouble()
        var drainDraw = SeededRandom(mixing: configuration.seed, 0xD8A1_4A)
        drainPhase = drainDraw.nextDouble()
    }

    /// The first tick of the `every(seconds)` timer after `time` (``syncPhase``).
    func nextSyncTick(after time: Double, every seconds: Double) -> Double {
        let periods = ((time - configuration.runStart) / seconds - syncPhase).rounded(.down) + 1
        return configuration.runStart + (periods + syncPhase) * seconds
    }

    private var retryDelay: Double { max(0.05, SimulatedDevice.seconds(configuration.requestTimeout)) }

    /// The wait before the next try after `failures` failures in a row: `requestTimeout`
    /// doubling up to 30 s (5 s while draining), times a jitter in [0.5, 1.5).
    private mutating func backoff(after failures: Int) -> Double {
        let delay = min(retryDelay * Double(1 << min(max(0, failures - 1), 10)), draining ? 5 : 30)
        return delay * (0.5 + jitter.nextDouble())
    }

    // MARK: Inputs

    /// What the store held; call before ``start(now:)``.
    mutating func restore(_ restored: Restored) {
        composed = restored.composed
        if let last = restored.unqueuedLast, last.number == composed, behaviour.decision(for: last.number).outcome != .cancel {
            resumeEnvelope = last
        }
        for work in restored.awaitingSync { awaitingSync[work.transaction] = work }
        captiveQueue.append(contentsOf: restored.owedCaptive)
    }

    /// The device's loop starts: arrivals are scheduled after the start delay.
    mutating func start(now: Double) {
        startAt = configuration.startRamp > 0
            ? max(now, configuration.runStart + configuration.startDelay)
            : now + configuration.startDelay
    }

    /// Stops arrivals; the device is treated as online and syncs until its outbox is empty. With
    /// a drain ramp it does so from `now + drainPhase × drainRamp`, going on as before until then.
    /// - Returns: whether the drain is already done.
    mutating func drain(now: Double) -> Bool {
        nextArrivalAt = nil
        if !draining {
            if drainAt != nil { return false }
            let delay = drainPhase * max(0, configuration.drainRamp)
            if delay > 0 {
                drainAt = now + delay
                return false
            }
        }
        beginDrain()
        return drained
    }

    /// The state a drain depends on, in one line (the node's log when a drain takes long).
    var drainStatus: String {
        let outbox = outboxFacts.map { "empty \($0.empty), reconcile \($0.needsReconcile)" } ?? "not inspected"
        return "draining \(draining), drained \(drained), online \(online.map(String.init) ?? "unknown"), token \(hasToken), "
            + "login failures \(loginFailures), sync failures \(syncFailures), retry sync at \(retrySyncAt.map { String(format: "%.1f", $0) } ?? "none"), "
            + "captive queued \(captiveQueue.count), awaiting sync \(awaitingSync.count), outbox \(outbox)"
    }

    private mutating func beginDrain() {
        draining = true
        drainAt = nil
        // An arrival scheduled while the ramp delayed the drain is dropped too.
        nextArrivalAt = nil
    }

    mutating func loginFinished(_ result: LoginResult, now: Double) {
        switch result {
        case .online:
            hasToken = true
            loggedInOnline = true
            loginFailures = 0
            templatesWanted = true
        case .unavailable(let offlineAccount):
            loginFailures += 1
            nextLoginAttempt = now + backoff(after: loginFailures)
            if offlineAccount { hasToken = true }
        }
    }

    /// `success`: the templates are cached (they are not asked for again).
    mutating func templatesCached(_ success: Bool) {
        if success { templatesChecked = true }
    }

    /// The envelope of an arrival is composed: it is signed next.
    mutating func composed(envelope: String, decision: EnvelopeDecision) {
        signNext = (envelope, decision)
    }

    mutating func signed(_ result: SigningResult) {
        if result.queued, configuration.behaviour.sync == .whenOnline { needsSync = true }
        // Signed by everyone here and queued: the embedded remote signers come once it has synced.
        if result.queued, !result.declined, let work = result.captive {
            awaitingSync[work.transaction] = work
        }
    }

    /// A sync pass ended with `remaining` items not acknowledged; `tokenRejected`: the coordinator
    /// no longer knows the token (the device logs in online again at once).
    mutating func syncFinished(remaining: Int, tokenRejected: Bool, now: Double) {
        if tokenRejected {
            loggedInOnline = false
            nextLoginAttempt = now
        }
        lastSyncAt = now
        needsSync = false
        let retries = draining || configuration.behaviour.sync == .whenOnline
        syncFailures = remaining > 0 ? syncFailures + 1 : 0
        retrySyncAt = remaining > 0 && retries ? now + backoff(after: syncFailures) : nil
    }

    /// The coordinator acknowledged an envelope (an item of a pass): its embedded signers' turn.
    mutating func syncAcknowledged(transaction: String, serverEnvelope: String) {
        if var work = awaitingSync.removeValue(forKey: transaction) {
            work.serverEnvelope = serverEnvelope
            captiveQueue.append(work)
        }
    }

    /// - Returns: whether the envelope's remaining signers are still queued (false: given up or done).
    @discardableResult
    mutating func captiveFinished(_ result: CaptiveResult, now: Double) -> Bool {
        switch result {
        case .nothingLeft, .ended:
            return false
        case .signed(var work):
            work.errors = 0
            captiveRetryAt = nil
            guard !work.signers.isEmpty else { return false }
            captiveQueue.insert(work, at: 0)
            return true
        case .checkFailed(var work), .failed(var work):
            // Asking again is safe: a new URL, or a refusal when the first attempt did sign.
            work.errors += 1
            captiveRetryAt = now + backoff(after: work.errors)
            guard work.errors < CaptiveWork.maxErrors else { return false }
            captiveQueue.append(work)
            return true
        }
    }

    mutating func outboxInspected(empty: Bool, needsReconcile: Bool) {
        outboxFacts = (empty, needsReconcile)
    }

    // MARK: Deciding

    private var hasEngine: Bool { online == true && hasToken }

    /// Online with a login the coordinator accepted: captive signing needs both.
    private var canPresentCaptive: Bool { online == true && loggedInOnline && hasToken }

    private func captiveDue(_ now: Double) -> Bool { (captiveRetryAt ?? 0) <= now }

    private func syncDue(_ now: Double) -> Bool {
        switch configuration.behaviour.sync {
        case .whenOnline: return needsSync || (retrySyncAt.map { $0 <= now } ?? false)
        case .every(let seconds): return now >= nextSyncTick(after: lastSyncAt, every: seconds)
        case .manual: return false
        }
    }

    /// What to do at `now` (seconds since the epoch). Operations run one at a time, in this
    /// order of precedence: signing a just-composed envelope; a connectivity change; caching
    /// templates; a login that is due; signing a restored envelope; then, draining, a pass until
    /// the outbox is empty, the captive ceremonies still owed, and the drain's end; otherwise a
    /// due sync pass, a due captive ceremony, a due arrival; else a wait.
    mutating func next(now: Double) -> Action {
        if let drainAt, now >= drainAt { beginDrain() }
        // A compose and its signing are one operation: nothing comes between them.
        if let signing = signNext {
            signNext = nil
            return .sign(envelope: signing.envelope, decision: signing.decision)
        }
        // Facts about the outbox hold for the decision right after they were asked for.
        let facts = outboxFacts
        outboxFacts = nil
        let startAt = self.startAt ?? now
        if !arrivalsScheduled {
            if !draining, now < startAt { return .wait(until: startAt) }
            arrivalsScheduled = true
            if !draining { scheduleNextArrival(from: max(now, configuration.runStart)) }
        }
        if let transition = applyConnectivity(now: now) { return transition }
        if templatesWanted {
            templatesWanted = false
            if online == true, configuration.behaviour.templateFraction > 0, !templatesChecked { return .cacheTemplates }
        }
        if !hasToken || (online == true && !loggedInOnline), now >= nextLoginAttempt {
            return .logIn(online: online == true)
        }
        if hasToken, let resume = resumeEnvelope {
            resumeEnvelope = nil
            return .sign(envelope: resume.envelope, decision: behaviour.decision(for: resume.number))
        }
        // Work without a server envelope or a signer has nothing to present.
        captiveQueue.removeAll { $0.serverEnvelope == nil || $0.signers.isEmpty }
        while true {
            if draining {
                guard let facts else { return .inspectOutbox }
                if hasEngine, facts.needsReconcile {
                    // Nothing may be pending here, yet a coordinator restored from an older copy of
                    // its store needs this device's retained items: a drained device has reconciled.
                    return (retrySyncAt ?? 0) <= now ? .sync : .wait(until: nextWake())
                }
                if facts.empty {
                    if canPresentCaptive, !captiveQueue.isEmpty {
                        // Drained only once the ceremonies ran (or were given up).
                        if captiveDue(now) { return .presentCaptive(captiveQueue.removeFirst()) }
                    } else {
                        if !drained {
                            drained = true
                            return .finishDrain
                        }
                        if configuration.finishWhenDone { return .finish }
                    }
                } else if hasEngine, (retrySyncAt ?? 0) <= now {
                    return .sync
                }
                return .wait(until: nextWake())
            }
            // A due sync goes first: "after each signing" means before the next envelope.
            if hasEngine, syncDue(now) { return .sync }
            if canPresentCaptive, !captiveQueue.isEmpty, captiveDue(now) { return .presentCaptive(captiveQueue.removeFirst()) }
            if hasToken, let at = nextArrivalAt, at <= now { return arrive(now: now) }
            if scheduleWhenIdle {
                scheduleWhenIdle = false
                scheduleNextArrival(from: now)
                continue
            }
            if configuration.finishWhenDone, nextArrivalAt == nil, resumeEnvelope == nil {
                draining = true
                return .inspectOutbox
            }
            return .wait(until: nextWake())
        }
    }

    /// The earliest moment something is due. Only what can be done then counts (a pass needs a
    /// login, a ceremony an accepted one), so a wait never ends with nothing to do.
    func nextWake() -> Double {
        var next = Double.infinity
        if let drainAt { next = min(next, drainAt) }
        if !draining {
            next = min(next, connectivityUntil)
            if hasToken, let at = nextArrivalAt { next = min(next, at) }
            if hasEngine, case .every(let seconds) = configuration.behaviour.sync {
                next = min(next, nextSyncTick(after: lastSyncAt, every: seconds))
            }
        }
        if let retry = retrySyncAt, hasEngine { next = min(next, retry) }
        if let retry = captiveRetryAt, canPresentCaptive, !captiveQueue.isEmpty { next = min(next, retry) }
        if !hasToken || (online == true && !loggedInOnline) { next = min(next, nextLoginAttempt) }
        return next
    }

    private mutating func applyConnectivity(now: Double) -> Action? {
        var t = now - configuration.runStart
        // Woken for the change the last wait was for: rounding (runStart + until - runStart) must
        // not put the time just before it, or the device would wait for it again and again.
        if now >= connectivityUntil { t = max(t, connectivityFlip) }
        let state = connectivity.state(at: t)
        connectivityFlip = state.until
        connectivityUntil = configuration.runStart + state.until
        let want = draining || state.online
        guard want != online else { return nil }
        let reason: TransitionReason = draining ? .drain : (connectivity.inOutage(t) ? .outage : .chain)
        online = want
        if want {
            needsSync = configuration.behaviour.sync == .whenOnline
            lastSyncAt = now
            retrySyncAt = nil
            if hasToken, !templatesChecked { templatesWanted = true }
            return .goOnline(reason: reason)
        }
        return .goOffline(reason: reason)
    }

    private mutating func scheduleNextArrival(from base: Double) {
        nextArrivalAt = nil
        if let limit = configuration.behaviour.maxEnvelopes, composed >= limit { return }
        let at = base + behaviour.decision(for: composed + 1).gap
        guard at.isFinite else { return }
        if let duration = configuration.duration, at > configuration.runStart + duration { return }
        nextArrivalAt = at
    }

    private mutating func arrive(now: Double) -> Action {
        let base = nextArrivalAt ?? now
        composed += 1
        let decision = behaviour.decision(for: composed)
        if configuration.gapsFromIdle {
            nextArrivalAt = nil
            scheduleWhenIdle = true
        } else {
            scheduleNextArrival(from: base)
        }
        return .compose(decision)
    }
}

/// How one signing session goes, from the envelope's decision and its in-person signers.
struct SigningPlan: Hashable, Sendable {
    /// The history's operation: `sign`, `cancel` or `decline`.
    var operation: HistoryEvent.Operation
    /// Seconds each in-person signer takes, by recipient id.
    var durations: [String: Double]
    /// Signers who do something other than sign, by recipient id.
    var scripted: [String: SyntheticSigner.Behaviour]

    /// - Parameter localSigners: the in-person signers' recipient ids, in routing order.
    init(decision: EnvelopeDecision, localSigners: [String]) {
        durations = [:]
        for (index, recipient) in localSigners.enumerated() {
            durations[recipient] = decision.signingDurations[index % decision.signingDurations.count]
        }
        scripted = [:]
        operation = .sign
        switch decision.outcome {
        case .cancel where !localSigners.isEmpty:
            operation = .cancel
            scripted[localSigners[0]] = .finishLater
        case .decline(let draw) where !localSigners.isEmpty:
            operation = .decline
            let index = min(localSigners.count - 1, max(0, Int(draw * Double(localSigners.count))))
            scripted[localSigners[index]] = .decline(reason: "the signer declined (simulated)")
        default:
            break
        }
    }
}
