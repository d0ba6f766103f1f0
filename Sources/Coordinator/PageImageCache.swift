/// Rendered page images kept in memory, least recently used out first, within a byte budget.
///
/// A page asked for while it is being drawn waits for that render rather than starting another,
/// and at most ``maxConcurrentRenders`` renders run at once (each is a `pdftoppm` process on a
/// machine with few cores). A failed render is remembered too, so a hostile PDF costs one
/// render per page, not one per request.
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
        var cost: Int { if case .success(let bytes) = image { bytes.count } else { 1024 } }
    }

    let maxBytes: Int
    let maxConcurrentRenders: Int
    private var entries: [Key: Entry] = [:]
    private var bytes = 0
    private var tick: UInt64 = 0
    private var inFlight: [Key: Task<Result<[UInt8], PDFPageRenderer.Failure>, Never>] = [:]
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(maxBytes: Int = 128 << 20, maxConcurrentRenders: Int = 2) {
        self.maxBytes = maxBytes
        self.maxConcurrentRenders = max(1, maxConcurrentRenders)
    }

    /// The image for `key`, drawn by `render` when it is not held; `cached` is true when no
    /// render ran for this call.
    func image(
        _ key: Key, render: @escaping @Sendable () async throws(PDFPageRenderer.Failure) -> [UInt8]
    ) async -> (image: Result<[UInt8], PDFPageRenderer.Failure>, cached: Bool) {
        tick &+= 1
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
            await self.acquire()
            let image: Result<[UInt8], PDFPageRenderer.Failure>
            do throws(PDFPageRenderer.Failure) {
                image = .success(try await render())
            } catch {
                image = .failure(error)
            }
            self.release()
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

    private func store(_ key: Key, _ image: Result<[UInt8], PDFPageRenderer.Failure>) {
        // Only what the PDF itself caused is remembered: a timeout may be the machine's load, a
        // store error may pass, and a missing renderer may be installed.
        switch image {
        case .failure(.timedOut), .failure(.transient), .failure(.missing): return
        default: break
        }
        let entry = Entry(image: image, lastUse: tick)
        guard entry.cost <= maxBytes else { return }
        entries[key] = entry
        bytes += entry.cost
        while bytes > maxBytes, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            bytes -= oldest.value.cost
            entries[oldest.key] = nil
        }
    }

    private func acquire() async {
        if running < maxConcurrentRenders {
            running += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty {
            running -= 1
        } else {
            // The slot passes straight to the next waiter.
            waiting.removeFirst().resume()
        }
    }
}
