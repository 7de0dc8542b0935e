// TransportBenchmark.swift — `courier bench transport`: N GETs of a 1 KiB body over keep-alive at
// a fixed concurrency against one local server, measured for a plain libcurl multi loop (the
// ceiling), the Courier C API driven from C, the Courier Swift facade, and URLSession; each run
// `runs` times, reported as medians and ratios against the project's targets.
import CBench
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
        /// Which clients to run (nil: `TransportClient.defaults(tls:)`).
        public var clients: [TransportClient]?
        /// Plain HTTP, or nginx over TLS made by scripts/tls-fixture (HTTPS/1.1, or h2 by ALPN).
        public var mode: Mode = .plain
        /// How to run one URLSession client in a child process (see `ClientSetup.childCommand`).
        public var childCommand: [String]?

        /// The defaults: 20 000 requests, 32 in flight, 3 runs.
        public init() {}

        /// The clients this run measures.
        public var selectedClients: [TransportClient] { clients ?? TransportClient.defaults(tls: mode != .plain) }
    }

    /// What the server speaks.
    public enum Mode: String, Sendable {
        /// HTTP/1.1 without TLS.
        case plain
        /// HTTPS/1.1: nginx over TLS offering only HTTP/1.1.
        case tls
        /// nginx over TLS offering h2 (and HTTP/1.1) by ALPN.
        case h2
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

    /// The targets of a mode: plain HTTP's (`targets`), or over TLS (`tlsTargets`).
    public static func targets(_ mode: Mode) -> [Target] { mode == .plain ? targets : tlsTargets }

    /// Over TLS (HTTPS/1.1 and h2), against the libcurl loop that sends the same headers: C >=
    /// 0.95x, Swift >= 0.9x, Swift >= 10x URLSession; the rest for context.
    public static let tlsTargets: [Target] = [
        Target(name: "Courier C / same-headers curl", key: "courier_c_vs_curl_headers", numerator: .courierC,
               denominator: .curlHeaders, minimum: 0.95),
        Target(name: "Swift / same-headers curl", key: "swift_vs_curl_headers", numerator: .courierSwift,
               denominator: .curlHeaders, minimum: 0.9),
        Target(name: "Courier Swift / URLSession", key: "swift_vs_urlsession", numerator: .courierSwift, denominator: .urlSession,
               minimum: 10),
        Target(name: "Courier C / libcurl", key: "courier_c_vs_curl", numerator: .courierC, denominator: .curl, minimum: 0.95,
               informational: true),
        Target(name: "Courier Swift / libcurl", key: "swift_vs_curl", numerator: .courierSwift, denominator: .curl, minimum: 0.9,
               informational: true),
        Target(name: "libcurl / h2load", key: "curl_vs_h2load", numerator: .curl, denominator: .h2load, minimum: 0,
               informational: true),
        Target(name: "Swift on the executor / same-headers curl", key: "swift_executor_vs_curl_headers",
               numerator: .courierSwiftExecutor, denominator: .curlHeaders, minimum: 0.9, informational: true),
    ]

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
        // The issue's next bar (>= 0.9x) for the Swift facade, on the engine's executor.
        Target(name: "Swift on the executor / libcurl", key: "swift_executor_vs_curl", numerator: .courierSwiftExecutor,
               denominator: .curl, minimum: 0.9, informational: true),
        Target(name: "Swift on the executor / same-headers curl", key: "swift_executor_vs_curl_headers",
               numerator: .courierSwiftExecutor, denominator: .curlHeaders, minimum: 0.9, informational: true),
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

        /// Over TLS: whether, in every run of every client, nginx saw as many TLS handshakes as it
        /// accepted connections (nil over plain HTTP).
        public var handshakesEqualConnections: Bool? {
            guard options.mode != .plain else { return nil }
            return runs.values.joined().allSatisfy { $0.server.map { $0.handshakes == $0.connections } ?? false }
        }

        /// A client's TLS protocol and HTTP version as nginx saw them, from its runs.
        func seen(_ client: TransportClient) -> (tls: String?, http: String?) {
            let counts = runs[client]?.compactMap(\.server) ?? []
            return (counts.compactMap(\.tlsProtocol).first, counts.compactMap(\.httpVersion).first)
        }
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
        } else if options.mode != .plain {
            guard let nginx = BenchServer.findNginx() else {
                throw BenchError("--tls and --h2 need nginx (install nginx-light, or set COURIER_NGINX)")
            }
            guard let fixture = BenchServer.findTLSFixture() else {
                throw BenchError("--tls and --h2 need scripts/tls-fixture: run from the checkout, or set COURIER_TLS_FIXTURE")
            }
            server = try BenchServer.nginxTLS(path: nginx, fixture: fixture, http2: options.mode == .h2)
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
        let clients = options.selectedClients
        let setup = ClientSetup(url: server.url, caFile: server.tls?.caFile, http2: options.mode == .h2,
                                childCommand: options.childCommand)
        for run in 1...max(1, options.runs) {
            // The order rotates from run to run: no client always goes first (or last).
            let shift = (run - 1) % max(1, clients.count)
            for client in Array(clients[shift...] + clients[..<shift]) {
                let total = client == .urlSession ? options.urlSessionRequests : options.requests
                let warmup = client == .urlSession ? min(options.warmup, max(total / 10, 1)) : options.warmup
                progress("run \(run)/\(options.runs): \(client.title): \(total) requests...")
                let watch = try server.tls.map { try ServerWatch(files: $0) }
                var result = await client.run(setup, total: total, concurrency: options.concurrency, warmup: warmup)
                if let watch { result.server = try watch.finish() }
                report.runs[client, default: []].append(result)
                var line = "run \(run)/\(options.runs): \(client.title): \(format(result.requestsPerSecond)) req/s"
                    + " (\(result.completed) in \(String(format: "%.2f", result.seconds)) s,"
                    + " \(String(format: "%.1f", result.cpuMicrosecondsPerRequest)) us CPU/req)"
                if let seen = result.server {
                    line += "; nginx: \(seen.connections) connections, \(seen.handshakes) TLS handshakes"
                        + " (\(seen.resumed) resumed), \(seen.tlsProtocol ?? "?") HTTP/\(seen.httpVersion ?? "?")"
                }
                if let mine = result.clientConnections, server.tls != nil { line += "; the client made \(mine)" }
                if result.errors > 0 { line += ", \(result.errors) ERRORS, first: \(result.firstError ?? "?")" }
                progress(line)
            }
        }
        return report
    }

    /// Counts what nginx sees of one client: stub_status before and after it, and the lines its
    /// connections.log gains meanwhile (the status requests' own connections are left out: the
    /// log skips /status, and the second status request's connection is subtracted).
    struct ServerWatch {
        let files: BenchServer.TLSFiles
        let accepts: Int
        let offset: UInt64

        init(files: BenchServer.TLSFiles) throws {
            self.files = files
            accepts = try ServerWatch.status(files).accepts
            offset = (try? FileManager.default.attributesOfItem(atPath: files.connectionsLog)[.size] as? UInt64) ?? 0
        }

        static func status(_ files: BenchServer.TLSFiles) throws -> (accepts: Int, requests: Int) {
            var accepts = 0, requests = 0
            var message = [CChar](repeating: 0, count: 256)
            guard cbench_nginx_status(files.statusURL, files.caFile, &accepts, &requests, &message, message.count) == 0 else {
                throw BenchError(String(cString: message))
            }
            return (accepts, requests)
        }

        func finish() throws -> ServerCount {
            let after = try ServerWatch.status(files).accepts
            var lines: [Substring] = []
            if let handle = FileHandle(forReadingAtPath: files.connectionsLog) {
                defer { try? handle.close() }
                try handle.seek(toOffset: offset)
                let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
                lines = text.split(separator: "\n")
            }
            var protocols: [String: Int] = [:]
            var versions: [String: Int] = [:]
            var resumed = 0
            for line in lines {  // "CONNECTION REUSED TLS_PROTOCOL HTTP_PROTOCOL"
                let fields = line.split(separator: " ")
                guard fields.count == 4 else { continue }
                if fields[1] == "r" { resumed += 1 }
                protocols[String(fields[2]), default: 0] += 1
                versions[fields[3].hasPrefix("HTTP/") ? String(fields[3].dropFirst(5)) : String(fields[3]), default: 0] += 1
            }
            return ServerCount(connections: after - accepts - 1, handshakes: lines.count, resumed: resumed,
                               tlsProtocol: protocols.max { $0.value < $1.value }?.key,
                               httpVersion: versions.max { $0.value < $1.value }?.key)
        }
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
        if o.mode != .plain {
            out += "\n" + pad("over TLS, as nginx saw it", 32) + pad(" TLS", 9) + pad("HTTP", 6)
                + "per run: connections / TLS handshakes (resumed) [as the client counts its connections]\n"
            for client in TransportClient.allCases {
                guard let list = report.runs[client] else { continue }
                let seen = report.seen(client)
                let perRun = list.map { run -> String in
                    guard let count = run.server else { return "?" }
                    return "\(count.connections)/\(count.handshakes) (\(count.resumed))"
                        + (run.clientConnections.map { " [\($0)]" } ?? "")
                }.joined(separator: "  ")
                out += pad(client.title, 32) + " " + pad(seen.tls ?? "?", 8) + pad(seen.http ?? "?", 6) + perRun + "\n"
            }
            let equal = report.handshakesEqualConnections ?? false
            out += "handshakes == connections in every run: \(equal ? "yes" : "NO")"
                + " (each connection made one TLS handshake and was kept alive for its requests)\n"
        }
        out += "\n"
        out += pad("ratio (median of per-run)", 32) + lpad("measured", 10) + lpad("target", 10) + "          by CPU/req\n"
        for target in targets(o.mode) where report.runs[target.numerator] != nil && report.runs[target.denominator] != nil {
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
        let targets = targets(report.options.mode)
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
        object["mode"] = report.options.mode.rawValue
        if report.options.mode != .plain {
            // Per client: what nginx saw (TLS protocol, HTTP version; per run: TLS handshakes,
            // connections accepted, resumed sessions) and the connections the client counted.
            var tls: [String: Any] = [:], versions: [String: Any] = [:], handshakes: [String: Any] = [:]
            var connections: [String: Any] = [:], resumed: [String: Any] = [:], counted: [String: Any] = [:]
            for client in TransportClient.allCases {
                guard let list = report.runs[client] else { continue }
                let seen = report.seen(client)
                tls[client.rawValue] = seen.tls ?? NSNull()
                versions[client.rawValue] = seen.http ?? NSNull()
                handshakes[client.rawValue] = list.map { $0.server?.handshakes ?? -1 }
                connections[client.rawValue] = list.map { $0.server?.connections ?? -1 }
                resumed[client.rawValue] = list.map { $0.server?.resumed ?? -1 }
                if list.allSatisfy({ $0.clientConnections != nil }) {
                    counted[client.rawValue] = list.map { $0.clientConnections ?? -1 }
                }
            }
            object["tls"] = tls
            object["http_version"] = versions
            object["handshakes"] = handshakes
            object["connections"] = connections
            object["resumed"] = resumed
            object["client_connections"] = counted
            object["handshakes_equal_connections"] = report.handshakesEqualConnections ?? false
        }
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
