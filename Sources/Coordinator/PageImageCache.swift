import FleetProtocol

/// Rendered page images kept in memory, least recently used out first, within a byte budget.
///
/// A page asked for while it is being drawn waits for that render rather than starting another,
/// and at most ``maxConcurrentRenders`` renders run at once (each is a `pdftoppm` process on a
/// machine with few cores), shared fairly between accounts (``FairRenderSlots``). A failed
/// render is remembered too, so a hostile PDF costs one render per page, not one per request;
/// a timed-out one for ``timeoutMemory``, so a document too heavy to draw in time does not take
/// a slot for the whole time-out again on every reload.
actor PageImageCache {
    struct Key: Hashable, Sendable {
        var envelopeID: String
        var documentID: String
        var page: Int
        var scale: Int
    }

    private struct Entry {
        var image: Result<[UInt8], PDFPageRenderer.Failure>
        var lastUse: UInt64
        /// When a remembered time-out is forgotten (nil: kept until evicted).
        var expires: ContinuousClock.Instant?
        var cost: Int { if case .success(let bytes) = image { bytes.count } else { 1024 } }
    }

    let maxBytes: Int
    var maxConcurrentRenders: Int { slots.capacity }
    /// How long a timed-out render is answered from memory before the page is tried again.
    let timeoutMemory: Duration
    private let clock: any FleetClock
    private var entries: [Key: Entry] = [:]
    private var bytes = 0
    private var tick: UInt64 = 0
    private var inFlight: [Key: Task<Result<[UInt8], PDFPageRenderer.Failure>, Never>] = [:]
    private var slots: FairRenderSlots

    init(maxBytes: Int = 128 << 20, maxConcurrentRenders: Int = 2, timeoutMemory: Duration = .seconds(300), clock: any FleetClock = ContinuousClock()) {
        self.maxBytes = maxBytes
        self.slots = FairRenderSlots(capacity: maxConcurrentRenders)
        self.timeoutMemory = timeoutMemory
        self.clock = clock
    }

    /// The image for `key`, drawn by `render` when it is not held; `cached` is true when no
    /// render ran for this call. `account` owns the envelope: render slots are shared fairly
    /// between accounts.
    func image(
        _ key: Key, account: String = "", render: @escaping @Sendable () async throws(PDFPageRenderer.Failure) -> [UInt8]
    ) async -> (image: Result<[UInt8], PDFPageRenderer.Failure>, cached: Bool) {
        tick &+= 1
        if let entry = entries[key], let expires = entry.expires, clock.now >= expires {
            forget(key)
        }
        if var entry = entries[key] {
            entry.lastUse = tick
            entries[key] = entry
            return (entry.image, true)
        }
        if let task = inFlight[key] {
            joined += 1
            return (await task.value, true)
        }
        let task = Task { () -> Result<[UInt8], PDFPageRenderer.Failure> in
            await self.acquire(account: account)
            let image: Result<[UInt8], PDFPageRenderer.Failure>
            do throws(PDFPageRenderer.Failure) {
                image = .success(try await render())
            } catch {
                image = .failure(error)
            }
            self.release(account: account)
            return image
        }
        inFlight[key] = task
        let image = await task.value
        inFlight[key] = nil
        store(key, image)
        return (image, false)
    }

    /// How many requests waited for another request's render (for tests and metrics).
    private(set) var joined = 0

    /// How many images (and failures) are held, and their bytes.
    var usage: (count: Int, bytes: Int) { (entries.count, bytes) }

    /// Renders waiting for a slot (for tests).
    var waitingRenders: Int { slots.waitingCount }
    /// Renders holding a slot now.
    var runningRenders: Int { slots.running }

    private func store(_ key: Key, _ image: Result<[UInt8], PDFPageRenderer.Failure>) {
        // What the PDF itself caused is remembered; a store error may pass and a missing renderer
        // may be installed. A time-out may be the machine's load, or a document too heavy to draw:
        // it is remembered for a while, so it costs a slot once per `timeoutMemory`, not per request.
        var expires: ContinuousClock.Instant?
        switch image {
        case .failure(.transient), .failure(.missing): return
        case .failure(.timedOut): expires = clock.now.advanced(by: timeoutMemory)
        default: break
        }
        let entry = Entry(image: image, lastUse: tick, expires: expires)
        guard entry.cost <= maxBytes else { return }
        entries[key] = entry
        bytes += entry.cost
        while bytes > maxBytes, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            forget(oldest.key)
        }
    }

    private func forget(_ key: Key) {
        guard let entry = entries.removeValue(forKey: key) else { return }
        bytes -= entry.cost
    }

    private func acquire(account: String) async {
        if slots.tryAcquire(account: account) { return }
        await withCheckedContinuation { slots.enqueue($0, account: account) }
    }

    private func release(account: String) {
        // The slot passes straight to the waiter chosen (its account's count already includes it).
        slots.release(account: account)?.resume()
    }
}
