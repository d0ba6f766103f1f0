import Foundation
import Thresholds

/// A scenario's `checks` applied to a finished run: the verdict against
/// `checks.verdict`, each threshold against the summary, and the exit code.
///
/// Exit codes (docs/fleet.md, "Exit codes"): 0 the verdict is the expected one and every
/// threshold held; 1 invalid where valid was expected (anomalies); 2 unknown where it was
/// not expected (the run could not be vouched for); 3 the checks failed otherwise: the
/// verdict is the expected one but a threshold failed, or it is another verdict than
/// expected (e.g. valid where a test scenario expects invalid).
public enum RunChecks {
    /// The checks failed (see the type's comment); distinct from the verdicts' 0, 1, 2.
    public static let checksFailedExitCode: Int32 = 3

    /// Fills in `expectedVerdict`, `thresholds` and `checksPassed` of `summary`.
    public static func apply(_ checks: Checks, to summary: inout RunSummary) {
        summary.expectedVerdict = checks.verdict
        summary.thresholds = FleetThreshold.evaluate(checks.thresholds, against: summary)
        summary.checksPassed = summary.verdict == checks.verdict && summary.thresholds.allSatisfy(\.passed)
    }

    /// The exit code of a run whose checker said `verdict` where the scenario expected `expected`.
    public static func exitCode(verdict: CheckVerdict, expected: CheckVerdict, thresholdsPassed: Bool) -> Int32 {
        if verdict == expected { return thresholdsPassed ? 0 : checksFailedExitCode }
        if verdict == .unknown || (verdict == .invalid && expected == .valid) { return verdict.exitCode }
        return checksFailedExitCode
    }

    public static func exitCode(_ summary: RunSummary) -> Int32 {
        exitCode(verdict: summary.verdict, expected: summary.expectedVerdict, thresholdsPassed: summary.thresholds.allSatisfy(\.passed))
    }

    /// The printed lines: the expectation when it is not `valid`, then one line per threshold.
    public static func lines(_ summary: RunSummary) -> [String] {
        var lines: [String] = []
        if summary.expectedVerdict != .valid || summary.verdict != summary.expectedVerdict {
            lines.append("expected verdict: \(summary.expectedVerdict.rawValue) (\(summary.verdict == summary.expectedVerdict ? "met" : "NOT met"))")
        }
        for result in summary.thresholds {
            let metric = (try? FleetThreshold.parse(result.threshold))?.metric
            let actual = metric?.format(result.actual) ?? result.actual.map { "\($0)" } ?? "no data"
            lines.append("threshold \(result.passed ? "PASS" : "FAIL")  \(result.threshold)  (actual \(actual))")
        }
        return lines
    }
}
