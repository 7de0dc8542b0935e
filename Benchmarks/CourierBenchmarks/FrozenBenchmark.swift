// FrozenBenchmark.swift — `courier bench frozen`: freeze N requests (durable commits) and replay
// them to a local server. Freezes/s against raw LMDB synced commits in the same run (the ceiling:
// fsync), one freeze at a time and with concurrent freezes (group commit); replayed requests/s
// against the engine's own transport rate for the same requests at the same concurrency. Medians
// of several runs. Driven from C (CBench) so Swift is not in the way.

import CBench
import CourierTestServer
import Foundation

public enum FrozenBenchmark {
    public struct Options: Sendable {
        /// Requests frozen (and replayed) per run.
        public var requests = 10_000
        /// Runs; medians are reported.
        public var runs = 3
        /// Replays (and transport sends) in flight.
        public var concurrency = 8
        /// Freezes in flight for the grouped measurement.
        public var groupConcurrency = 32
        /// Where the stores go (a temporary directory by default, removed after).
        public var directory: String?
        public init() {}
    }

    /// Medians over the runs, by JSON key.
    public struct Report: Sendable {
        public var figures: [String: Double] = [:]
        public var errors: [String] = []
    }

    public typealias Progress = @Sendable (Double, String) -> Void

    static func median(_ values: [Double]) -> Double {
        let s = values.sorted()
        guard !s.isEmpty else { return 0 }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func firstError(_ r: cbench_result) -> String {
        withUnsafeBytes(of: r.first_error) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    }

    /// Runs the benchmark.
    /// - Parameters:
    ///   - options: Sizes and counts.
    ///   - progress: Called between steps.
    /// - Returns: The medians.
    /// - Throws: When the server or a directory cannot be made.
    public static func run(_ options: Options, progress: Progress? = nil) throws -> Report {
        var server: OpaquePointer?
        let rc = cts_server_start(&server, "127.0.0.1", 0)
        guard rc == 0, let server else { throw NSError(domain: "FrozenBenchmark", code: Int(rc)) }
        defer { cts_server_stop(server) }
        let url = "http://127.0.0.1:\(cts_server_port(server))/status/200"
        let base = options.directory ?? NSTemporaryDirectory() + "courier-bench-frozen-\(getpid())"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { if options.directory == nil { try? FileManager.default.removeItem(atPath: base) } }

        var series: [String: [Double]] = [:]
        var report = Report()
        let n = options.requests
        let steps = Double(options.runs * 5)
        var step = 0.0
        func note(_ what: String) {
            progress?(step / steps, what)
            step += 1
        }
        func record(_ key: String, _ r: cbench_result, what: String) {
            series[key, default: []].append(r.seconds > 0 ? Double(r.completed) / r.seconds : 0)
            if r.errors > 0 { report.errors.append("\(what): \(r.errors) errors, first: \(firstError(r))") }
        }
        for i in 0..<options.runs {
            let raw = "\(base)/raw-\(i)", single = "\(base)/single-\(i)", grouped = "\(base)/grouped-\(i)"
            var r = cbench_result()
            note("raw LMDB synced commits (run \(i + 1))")
            _ = cbench_lmdb_sync_commits(raw, n, 400, &r)
            record("raw_sync_commits", r, what: "raw commits")
            note("freezes, one at a time (run \(i + 1))")
            _ = cbench_frozen_freeze(single, url, n, 1, &r)
            record("freeze_ops", r, what: "freezes")
            note("freezes, \(options.groupConcurrency) at once (run \(i + 1))")
            _ = cbench_frozen_freeze(grouped, url, n, Int32(options.groupConcurrency), &r)
            record("freeze_grouped_ops", r, what: "grouped freezes")
            note("replay (run \(i + 1))")
            _ = cbench_frozen_replay(grouped, Int32(options.concurrency), 300_000, &r)
            record("replay_rps", r, what: "replay")
            note("transport (run \(i + 1))")
            _ = cbench_frozen_transport(url, n, Int32(options.concurrency), &r)
            record("transport_rps", r, what: "transport")
            for dir in [raw, single, grouped] { try? FileManager.default.removeItem(atPath: dir) }
        }
        progress?(1, "done")
        for (key, values) in series { report.figures[key] = median(values) }
        let rawOps = report.figures["raw_sync_commits"] ?? 0
        let transport = report.figures["transport_rps"] ?? 0
        report.figures["freeze_ratio"] = rawOps > 0 ? (report.figures["freeze_ops"] ?? 0) / rawOps : 0
        report.figures["freeze_grouped_ratio"] = rawOps > 0 ? (report.figures["freeze_grouped_ops"] ?? 0) / rawOps : 0
        report.figures["replay_ratio"] = transport > 0 ? (report.figures["replay_rps"] ?? 0) / transport : 0
        return report
    }
}
