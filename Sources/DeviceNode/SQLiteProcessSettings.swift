import CSQLiteSettings

/// Process-wide SQLite settings for a process that holds many device stores.
public enum SQLiteProcessSettings {
    /// Stops SQLite from allocating each connection's page cache in one initial block (20 pages,
    /// about 90 KiB, even for a store that reads three pages): caches then grow a page at a time.
    /// Measured: 106 KiB → 28 KiB per connection opened (docs/performance.md, "Memory per device").
    ///
    /// Call it once, before the process opens its first SQLite database; it returns `false` (and
    /// changes nothing) when SQLite is already initialised.
    @discardableResult
    public static func growPageCachesOnDemand() -> Bool {
        signfleet_sqlite_no_page_cache_bulk() == SQLITE_OK
    }
}
