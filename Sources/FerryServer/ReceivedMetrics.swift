import Metrics
import FerrySync

/// Counts of change sets taken in, by how they came (`push` to this server,
/// `pull` by this daemon) and what became of them.
public enum ReceivedMetrics {
    /// Adds one apply's counts to `ferry_changesets_received_total`.
    public static func record(_ report: ApplyReport, via: String) {
        for (result, count) in [("applied", report.applied), ("duplicate", report.duplicate),
                                ("waiting", report.waiting), ("quarantined", report.quarantined)] where count > 0 {
            Counter(label: "ferry_changesets_received_total", dimensions: [("via", via), ("result", result)]).increment(by: count)
        }
    }
}
