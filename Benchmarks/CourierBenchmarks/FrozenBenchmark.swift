// FrozenBenchmark.swift — `courier bench frozen`: freeze N requests (durable commits) and replay
// them to a local server. Freezes/s against raw LMDB synced commits in the same run (the ceiling:
// fsync; values the size of a stored frozen request, the journal's environment flags), one freeze at a time and with concurrent freezes (group commit); replayed requests/s
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
        /// Chunks the raw commits and single freezes alternate in, per run.
        public var chunks = 10
        /// Where the stores go (a temporary directory by default, removed after).
        public var directory: String?
        /// The journals' store: nil for LMDB in each store directory; a redis:// URL for Redis
        /// (each store directory's journal a named journal there).
        public var journal: String?
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
        let tag = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))" // a fresh Redis journal name per run
        let base = options.directory ?? NSTemporaryDirectory() + "courier-bench-frozen-\(getpid())"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { if options.directory == nil { try? FileManager.default.removeItem(atPath: base) } }

        var series: [String: [Double]] = [:]
        var report = Report()
        let n = options.requests
        let steps = Double(options.runs * 4)
        var step = 0.0
        func note(_ what: String) {
            progress?(step / steps, what)
            step += 1
        }
        func record(_ key: String, _ r: cbench_result, what: String) {
            series[key, default: []].append(r.seconds > 0 ? Double(r.completed) / r.seconds : 0)
            if r.errors > 0 { report.errors.append("\(what): \(r.errors) errors, first: \(firstError(r))") }
        }
        // The raw commits write values the size of a frozen request as the journal stores it.
        let sizeDir = "\(base)/size"
        let measured = cbench_frozen_record_bytes(sizeDir, url)
        try? FileManager.default.removeItem(atPath: sizeDir)
        let recordBytes = measured > 0 ? Int(measured) : 700
        if measured <= 0 { report.errors.append("record size: could not be measured") }
        cbench_frozen_set_journal(options.journal) // after the size: it is read from an LMDB journal
        defer { cbench_frozen_set_journal(nil) }
        for i in 0..<options.runs {
            let grouped = "\(base)/grouped-\(i)-\(tag)"
            var r = cbench_result()
            // The disk is shared: raw commits and single freezes alternate in chunks, so both see
            // the same conditions, and their rates are sums over the chunks.
            note("raw LMDB synced commits and single freezes, alternating (run \(i + 1))")
            let chunks = max(1, min(options.chunks, n))
            var raw = (ops: 0.0, seconds: 0.0), single = (ops: 0.0, seconds: 0.0)
            for c in 0..<chunks {
                let count = n / chunks + (c < n % chunks ? 1 : 0)
                let rawDir = "\(base)/raw-\(i)-\(c)", singleDir = "\(base)/single-\(i)-\(c)-\(tag)"
                _ = cbench_lmdb_sync_commits(rawDir, count, recordBytes, &r)
                raw.ops += Double(r.completed)
                raw.seconds += r.seconds
                if r.errors > 0 { report.errors.append("raw commits: \(firstError(r))") }
                _ = cbench_frozen_freeze(singleDir, url, count, 1, &r)
                single.ops += Double(r.completed)
                single.seconds += r.seconds
                if r.errors > 0 { report.errors.append("freezes: \(r.errors) errors, first: \(firstError(r))") }
                for dir in [rawDir, singleDir] { try? FileManager.default.removeItem(atPath: dir) }
            }
            series["raw_sync_commits", default: []].append(raw.seconds > 0 ? raw.ops / raw.seconds : 0)
            series["freeze_ops", default: []].append(single.seconds > 0 ? single.ops / single.seconds : 0)
            note("freezes, \(options.groupConcurrency) at once (run \(i + 1))")
            _ = cbench_frozen_freeze(grouped, url, n, Int32(options.groupConcurrency), &r)
            record("freeze_grouped_ops", r, what: "grouped freezes")
            // The transport before and after the replay: the mean is what the replay competes with.
            note("transport (run \(i + 1))")
            _ = cbench_frozen_transport(url, n, Int32(options.concurrency), &r)
            let before = r.seconds > 0 ? Double(r.completed) / r.seconds : 0
            if r.errors > 0 { report.errors.append("transport: \(r.errors) errors, first: \(firstError(r))") }
            note("replay (run \(i + 1))")
            _ = cbench_frozen_replay(grouped, Int32(options.concurrency), 300_000, &r)
            record("replay_rps", r, what: "replay")
            _ = cbench_frozen_transport(url, n, Int32(options.concurrency), &r)
            let after = r.seconds > 0 ? Double(r.completed) / r.seconds : 0
            if r.errors > 0 { report.errors.append("transport: \(r.errors) errors, first: \(firstError(r))") }
            series["transport_rps", default: []].append((before + after) / 2)
            try? FileManager.default.removeItem(atPath: grouped)
        }
        progress?(1, "done")
        for (key, values) in series { report.figures[key] = median(values) }
        let rawOps = report.figures["raw_sync_commits"] ?? 0
        let transport = report.figures["transport_rps"] ?? 0
        report.figures["freeze_ratio"] = rawOps > 0 ? (report.figures["freeze_ops"] ?? 0) / rawOps : 0
        report.figures["freeze_grouped_ratio"] = rawOps > 0 ? (report.figures["freeze_grouped_ops"] ?? 0) / rawOps : 0
        report.figures["record_bytes"] = Double(recordBytes)
        report.figures["replay_ratio"] = transport > 0 ? (report.figures["replay_rps"] ?? 0) / transport : 0
        return report
    }
}
