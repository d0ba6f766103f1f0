import CZeroMQ

/// Gives memory the process freed back to the system. glibc's allocator keeps freed pages for
/// reuse, so memory that a burst of connections took and then freed still counts as resident;
/// `malloc_trim(0)` releases the free pages of every arena (not only the top of the heap).
public enum MemoryReturn {
    /// Returns the process's free heap pages to the system; true when some were released.
    /// Walks every arena's free lists: milliseconds for a heap of hundreds of MB, so callers
    /// run it off their hot path and not often.
    @discardableResult
    public static func releaseFreePages() -> Bool {
        #if os(Linux)
        return signfleet_malloc_trim() == 1
        #else
        return false
        #endif
    }
}
