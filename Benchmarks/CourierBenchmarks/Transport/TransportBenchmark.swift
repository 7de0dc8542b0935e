// TransportBenchmark.swift — `courier bench transport`: N GETs of a 1 KiB body over keep-alive at
// a fixed concurrency against one local server, measured for a plain libcurl multi loop (the
// ceiling), the Courier C API driven from C, the Courier Swift facade, and URLSession; each run
// `runs` times, reported as medians and ratios against the project's targets.
import Foundation

/// The transport benchmark.
public enum TransportBenchmark {
    /// What to run.
    public struct Options: Sendable {
        /// GETs per run for libcurl and Courier.
        public var requests = 20_000
        /// GETs per run for URLSession (slow on Linux); its rate is what is compared.
        public var urlSessionRequests = 2_000
        /// Requests in flight.
        public var concurrency = 32
        /// How many times the whole set runs; the median of each client is reported.
        public var runs = 3
        /// Untimed requests on the same connections before each client's timed phase.
        public var warmup = 500
        /// A server to use instead of starting nginx.
        public var url: String?
        /// Which clients to run (all by default).
        public var clients: [TransportClient] = TransportClient.allCases

        /// The defaults: 20 000 requests, 32 in flight, 3 runs.
        public init() {}
    }

    /// A target the project holds itself to: numerator / denominator >= minimum.
    public struct Target: Sendable {
        public let name: String
        public let key: String
        public let numerator: TransportClient
        public let denominator: TransportClient
        public let minimum: Double
        /// Shown for context, not one of the issue's targets (no verdict).
        public var informational = false
    }

    /// The targets: C >= 0.85x curl; Swift >= 0.7x curl; Swift >= 5x URLSession.
    public static let targets: [Target] = [
        Target(name: "Courier C / libcurl", key: "courier_c_vs_curl", numerator: .courierC, denominator: .curl, minimum: 0.85),
        Target(name: "Courier Swift / libcurl", key: "swift_vs_curl", numerator: .courierSwift, denominator: .curl, minimum: 0.7),
        Target(name: "Courier Swift / URLSession", key: "swift_vs_urlsession", numerator: .courierSwift, denominator: .urlSession, minimum: 5),
        // Like for like: the ceiling sending the same request (Courier's User-Agent and
        // Accept-Encoding lines, which libcurl formats byte by byte: ~6% of a 1 KiB GET's cost).
        Target(name: "Courier C / same-headers curl", key: "courier_c_vs_curl_headers", numerator: .courierC,
               denominator: .curlHeaders, minimum: 0.85, informational: true),
        Target(name: "Swift / same-headers curl", key: "swift_vs_curl_headers", numerator: .courierSwift,
               denominator: .curlHeaders, minimum: 0.7, informational: true),
    ]

    /// Everything one benchmark measured.
    public struct Report: Sendable {
        public var options: Options
        public var serverKind: BenchServer.Kind
        public var serverDescription: String
        public var url: String
        public var warnings: [String]
        /// Every run of every client, in order.
        public var runs: [TransportClient: [ClientRun]]

        /// The median successful requests per second of a client (nil if it did not run).
        public func median(_ client: TransportClient) -> Double? {
            guard let list = runs[client], !list.isEmpty else { return nil }
            return TransportBenchmark.median(list.map(\.requestsPerSecond))
        }

        /// The median CPU microseconds per request of a client (nil if it did not run).
        public func medianCPU(_ client: TransportClient) -> Double? {
            guard let list = runs[client], !list.isEmpty else { return nil }
            return TransportBenchmark.median(list.map(\.cpuMicrosecondsPerRequest))
        }

        /// A target's ratio computed from CPU per request (denominator's CPU / numerator's CPU):
        /// what the throughput ratio would be if CPU were the only limit. Paired by run, as `ratio`.
        public func cpuRatio(_ target: Target) -> Double? {
            paired(target) { n, d in
                n.cpuMicrosecondsPerRequest > 0 && d.cpuMicrosecondsPerRequest > 0
                    ? d.cpuMicrosecondsPerRequest / n.cpuMicrosecondsPerRequest : nil
            }
        }

        /// The median over runs of a per-run ratio of the target's two clients. Within one run the
        /// clients go back to back (in an order that rotates from run to run), so a machine whose
        /// speed drifts between runs moves both sides of each ratio alike.
        func paired(_ target: Target, _ ratio: (ClientRun, ClientRun) -> Double?) -> Double? {
            guard let ns = runs[target.numerator], let ds = runs[target.denominator] else { return nil }
            let values = zip(ns, ds).compactMap { ratio($0, $1) }
            return values.isEmpty ? nil : TransportBenchmark.median(values)
        }

        /// Errors of a client over all runs.
        public func errors(_ client: TransportClient) -> Int { runs[client]?.reduce(0) { $0 + $1.errors } ?? 0 }

        /// The first error message of a client.
        public func firstError(_ client: TransportClient) -> String? { runs[client]?.lazy.compactMap(\.firstError).first }

        /// The ratio of a target, when both sides ran: the median of its per-run ratios (see `paired`).
        public func ratio(_ target: Target) -> Double? {
            paired(target) { n, d in
                d.requestsPerSecond > 0 && n.requestsPerSecond > 0 ? n.requestsPerSecond / d.requestsPerSecond : nil
            }
        }

        /// True when no client saw an error.
        public var clean: Bool { TransportClient.allCases.allSatisfy { errors($0) == 0 } }
    }

    /// Starts the server, runs every client `runs` times, stops the server (also on SIGINT/SIGTERM).
    /// - Parameters:
    ///   - options: what to run.
    ///   - progress: receives one line per step, for stderr.
    /// - Returns: the report.
    /// - Throws: `BenchError` when no server can be had.
    public static func run(_ options: Options, progress: @escaping (String) -> Void) async throws -> Report {
        var warnings: [String] = []
        let server: BenchServer
        if let url = options.url {
            server = .external(url: url)
        } else if let nginx = BenchServer.findNginx() {
            do {
                server = try BenchServer.nginx(path: nginx)
            } catch {
                warnings.append("WARNING: nginx (\(nginx)) did not start (\(error)); using the embedded test server instead; figures are not comparable with nginx runs")
                server = try BenchServer.testServer()
            }
        } else {
            warnings.append("WARNING: nginx not found (install nginx-light, or set COURIER_NGINX); using the embedded test server's /bytes/1024 instead; figures are not comparable with nginx runs")
            server = try BenchServer.testServer()
        }
        defer { server.stop() }
        for warning in warnings { progress(warning) }
        progress("server: \(server.description) at \(server.url)")

        var report = Report(options: options, serverKind: server.kind, serverDescription: server.description,
                            url: server.url, warnings: warnings, runs: [:])
        for run in 1...max(1, options.runs) {
            // The order rotates from run to run: no client always goes first (or last).
            let shift = (run - 1) % max(1, options.clients.count)
            for client in Array(options.clients[shift...] + options.clients[..<shift]) {
                let total = client == .urlSession ? options.urlSessionRequests : options.requests
                let warmup = client == .urlSession ? min(options.warmup, max(total / 10, 1)) : options.warmup
                progress("run \(run)/\(options.runs): \(client.title): \(total) requests...")
                let result = await client.run(url: server.url, total: total, concurrency: options.concurrency, warmup: warmup)
                report.runs[client, default: []].append(result)
                var line = "run \(run)/\(options.runs): \(client.title): \(format(result.requestsPerSecond)) req/s"
                    + " (\(result.completed) in \(String(format: "%.2f", result.seconds)) s,"
                    + " \(String(format: "%.1f", result.cpuMicrosecondsPerRequest)) us CPU/req)"
                if result.errors > 0 { line += ", \(result.errors) ERRORS, first: \(result.firstError ?? "?")" }
                progress(line)
            }
        }
        return report
    }

    // MARK: - Output

    /// The report as aligned text.
    public static func text(_ report: Report) -> String {
        let o = report.options
        var out = "Courier transport benchmark: GET of a 1 KiB body, keep-alive, \(o.concurrency) in flight, "
            + "\(o.runs) run\(o.runs == 1 ? "" : "s") (median shown)\n"
        out += "server: \(report.serverDescription)\n"
        out += "url:    \(report.url)\n"
        for warning in report.warnings { out += warning + "\n" }
        out += "\n"
        out += pad("client", 32) + lpad("req/s", 10) + "   " + pad("runs (req/s)", 28) + lpad("requests", 9)
            + lpad("errors", 8) + lpad("CPU us/req", 12) + "\n"
        for client in TransportClient.allCases {
            guard let list = report.runs[client], let median = report.median(client) else { continue }
            let runs = list.map { format($0.requestsPerSecond) }.joined(separator: " ")
            let total = client == .urlSession ? o.urlSessionRequests : o.requests
            out += pad(client.title, 32) + lpad(format(median), 10) + "   " + pad(runs, 28) + lpad("\(total)", 9)
                + lpad("\(report.errors(client))", 8) + lpad(String(format: "%.1f", report.medianCPU(client) ?? 0), 12) + "\n"
        }
        out += "\n"
        out += pad("ratio (median of per-run)", 32) + lpad("measured", 10) + lpad("target", 10) + "          by CPU/req\n"
        for target in targets where report.runs[target.numerator] != nil && report.runs[target.denominator] != nil {
            let goal = lpad(target.informational ? "(info)" : String(format: ">= %gx", target.minimum), 10)
            guard let ratio = report.ratio(target) else {
                out += pad(target.name, 32) + lpad("n/a", 10) + goal + "  (no successful requests to compare)\n"
                continue
            }
            let verdict = target.informational ? "" : ratio >= target.minimum ? "met" : "MISSED"
            let cpu = report.cpuRatio(target).map { String(format: "%.2fx", $0) } ?? "n/a"
            out += pad(target.name, 32) + lpad(String(format: "%.2fx", ratio), 10) + goal + "  " + pad(verdict, 8) + lpad(cpu, 10) + "\n"
        }
        out += "(CPU us/req: this process's CPU time per request, steadier than req/s on a busy machine;"
            + " 'by CPU/req' is the ratio those costs give.)\n"
        for client in TransportClient.allCases where report.errors(client) > 0 {
            out += "\nERRORS: \(client.title) had \(report.errors(client)) failed requests; first: \(report.firstError(client) ?? "?")"
                + " (its rate counts successful requests only; this run is not a valid measurement)"
        }
        if !report.clean { out += "\n" }
        return out
    }

    /// The report as one JSON object (keys curl_rps, courier_c_rps, courier_swift_rps, urlsession_rps, ...).
    public static func json(_ report: Report) -> String {
        var object: [String: Any] = [:]
        var runs: [String: Any] = [:]
        var errors: [String: Any] = [:]
        for client in TransportClient.allCases {
            object["\(client.rawValue)_rps"] = report.median(client).map { ($0 * 10).rounded() / 10 } ?? NSNull()
            object["\(client.rawValue)_cpu_us_per_req"] = report.medianCPU(client).map { ($0 * 100).rounded() / 100 } ?? NSNull()
            if let list = report.runs[client] {
                runs[client.rawValue] = list.map { ($0.requestsPerSecond * 10).rounded() / 10 }
                errors[client.rawValue] = report.errors(client)
            }
        }
        var ratios: [String: Any] = [:]
        var met: [String: Any] = [:]
        var cpuRatios: [String: Any] = [:]
        for target in targets {
            if let ratio = report.ratio(target) {
                ratios[target.key] = (ratio * 1000).rounded() / 1000
                if !target.informational { met[target.key] = ratio >= target.minimum }
            }
            if let ratio = report.cpuRatio(target) { cpuRatios[target.key] = (ratio * 1000).rounded() / 1000 }
        }
        object["ratios"] = ratios
        object["cpu_ratios"] = cpuRatios
        object["targets"] = Dictionary(uniqueKeysWithValues: targets.filter { !$0.informational }.map { ($0.key, $0.minimum) })
        object["targets_met"] = met
        object["runs"] = runs
        object["errors"] = errors
        object["ok"] = report.clean
        object["requests"] = report.options.requests
        object["urlsession_requests"] = report.options.urlSessionRequests
        object["concurrency"] = report.options.concurrency
        object["run_count"] = report.options.runs
        object["server"] = report.serverKind.rawValue
        object["url"] = report.url
        if !report.warnings.isEmpty { object["warnings"] = report.warnings }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }

    static func format(_ rate: Double) -> String {
        let whole = Int(rate.rounded())
        var digits = String(whole)
        var out = ""
        while digits.count > 3 {
            out = "," + digits.suffix(3) + out
            digits.removeLast(3)
        }
        return digits + out
    }

    private static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
    }

    private static func lpad(_ s: String, _ width: Int) -> String {
        s.count >= width ? " " + s : String(repeating: " ", count: width - s.count) + s
    }
}
