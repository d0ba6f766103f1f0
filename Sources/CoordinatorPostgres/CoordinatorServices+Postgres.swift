import Coordinator
import Foundation
import Metrics

extension CoordinatorServices {
    /// The coordinator's services on a PostgreSQL store (docs/storage.md), for programs outside this
    /// package: the ingest benchmark of `loadtests/` (`signfleet-bench store`), an embedding server.
    public init(
        postgres store: PostgresCoordinatorStore, host: String? = nil, tokenLifetime: Duration = .seconds(3600),
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(storage: store, host: host, tokenLifetime: tokenLifetime, metricsFactory: metricsFactory)
    }
}
