import FleetProtocol
import Metrics

/// The metrics captive signing reports through swift-metrics.
///
/// | name | kind | dimensions |
/// |---|---|---|
/// | `signfleet_captive_urls_issued_total` | counter | — (signing URLs issued by `recipient.view`, `signing.url.create` and the admin endpoint) |
/// | `signfleet_captive_redirects_total` | counter | `event`: the `event` value of each redirect to a return URL (`signing_complete`, `decline`, `cancel`, `ttl_expired`, `session_timeout`, `viewing_complete`, `exception`) |
public struct CaptiveSigningMetrics: Sendable {
    public static let issuedLabel = "signfleet_captive_urls_issued_total"
    public static let redirectsLabel = "signfleet_captive_redirects_total"

    let issued: Counter
    let redirects: [SigningViewEvent: Counter]

    public init(factory: any MetricsFactory) {
        issued = Counter(label: Self.issuedLabel, factory: factory)
        var redirects: [SigningViewEvent: Counter] = [:]
        for event in SigningViewEvent.allCases {
            redirects[event] = Counter(label: Self.redirectsLabel, dimensions: [("event", event.rawValue)], factory: factory)
        }
        self.redirects = redirects
    }

    func redirected(_ event: SigningViewEvent) {
        redirects[event]?.increment()
    }
}
