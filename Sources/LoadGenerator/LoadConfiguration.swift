/// Settings of a load run.
public struct LoadConfiguration: Sendable {
    public var profile: LoadProfile
    public var process: ArrivalProcess
    /// Virtual devices; arrivals go to them round robin, and each runs one ceremony at a time.
    public var devices: Int
    /// Ceremonies a device may have outstanding (running plus waiting); an arrival beyond that is
    /// dropped and counted — the generator never silently slows its schedule down.
    public var maxOutstandingPerDevice: Int
    /// Seeds the arrival schedule and every device.
    public var seed: UInt64
    public var thresholds: [Threshold]
    /// After the last arrival, how long outstanding ceremonies may take to finish; any still
    /// running then is counted as an `unfinished` error.
    public var drainTimeout: Duration
    /// Length of the time intervals of the plots and the interval log.
    public var interval: Duration
    /// Completed ceremonies needed before `abortOnFail` thresholds are checked during the run.
    public var abortMinimumCompleted: Int
    /// After the run, before the devices close: compare every device's outbox with what the
    /// coordinator holds (``SyncAudit``); a failed audit fails the run.
    public var audit: Bool

    public init(
        profile: LoadProfile, process: ArrivalProcess = .poisson, devices: Int, maxOutstandingPerDevice: Int = 16, seed: UInt64,
        thresholds: [Threshold] = [], drainTimeout: Duration = .seconds(10), interval: Duration = .seconds(1),
        abortMinimumCompleted: Int = 20, audit: Bool = true
    ) {
        self.profile = profile
        self.process = process
        self.devices = max(1, devices)
        self.maxOutstandingPerDevice = max(1, maxOutstandingPerDevice)
        self.seed = seed
        self.thresholds = thresholds
        self.drainTimeout = drainTimeout
        self.interval = interval
        self.abortMinimumCompleted = abortMinimumCompleted
        self.audit = audit
    }
}

/// The live state, once per interval (for the progress line).
public struct LoadProgress: Sendable {
    public var elapsed: Duration
    /// Ceremonies completed per second over the last interval.
    public var rate: Double
    /// Arrivals offered per second over the last interval.
    public var offeredRate: Double
    public var outstanding: Int
    public var completed: Int
    public var errors: Int
    public var dropped: Int
    /// Corrected p99 so far, in milliseconds.
    public var p99: Double

    /// `12s  rate 198.0/s (offered 200.0/s)  outstanding 3  done 2380  p99 41.2ms  errors 0  dropped 0`
    public var line: String {
        String(
            format: "%5.0fs  rate %.1f/s (offered %.1f/s)  outstanding %d  done %d  p99 %.1fms  errors %d  dropped %d",
            elapsed.seconds, rate, offeredRate, outstanding, completed, p99, errors, dropped)
    }
}
