import Foundation
import Testing

@testable import Fleet

/// The report at fleet scale: thousands of anomalies are counted per kind and only the first
/// ones of each kind are written out with their witnesses.
@Suite struct ReportAnomaliesTests {
    @Test func thousandsOfAnomaliesAreCountedPerKindAndCappedOnThePage() {
        var report = ReportRenderTests.sampleReport()
        report.anomalies =
            (1...1_401).map { ReportAnomaly(kind: "unsynced", message: "device rural-\($0) did not drain", witness: "w-unsynced-\($0)") }
            + (1...3).map { ReportAnomaly(kind: "lost", message: "item \($0) lost", witness: "w-lost-\($0)") }
        let html = report.html()
        #expect(html.contains("<tr><td>unsynced</td><td>1401</td></tr>"))
        #expect(html.contains("<tr><td>lost</td><td>3</td></tr>"))
        let shown = RunReport.anomaliesShownPerKind
        #expect(html.contains("w-unsynced-\(shown)<") && !html.contains("w-unsynced-\(shown + 1)<"), "only the first \(shown) unsynced are written")
        #expect(html.contains("… and \(1_401 - shown) more of this kind"))
        for index in 1...3 { #expect(html.contains("w-lost-\(index)<"), "a kind with few anomalies shows them all") }
        #expect(html.utf8.count < 200_000, "the page stays small: \(html.utf8.count) bytes")
    }

    @Test func aRunWithoutAnomaliesSaysSo() {
        var report = ReportRenderTests.sampleReport()
        report.anomalies = []
        #expect(report.html().contains("<h2>Anomalies</h2>\n<p>None found.</p>"))
    }
}
