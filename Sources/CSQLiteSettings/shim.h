#include <sqlite3.h>

/* sqlite3_config is variadic, which Swift cannot call: these wrap the calls SignFleet makes. */

/* No initial bulk allocation for page caches (SQLITE_CONFIG_PAGECACHE with no buffer and 0
   pages): each connection's cache grows a page at a time, as used. Valid only before SQLite is
   initialised (before the first connection opens); returns SQLITE_MISUSE after. */
static inline int signfleet_sqlite_no_page_cache_bulk(void) {
    return sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
}
