// BenchCommand.swift — `courier bench <suite>`: the benchmarks under Benchmarks/. Each suite is a
// subcommand of its own (transport now; cache and mapping later).
import ArgumentParser
import CourierBenchmarks
import Foundation

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Run a benchmark (build with -c release to measure).",
        subcommands: [
            TransportBenchCommand.self,
            CacheBenchCommand.self,
            MappingBenchCommand.self,
            FrozenBenchCommand.self,
            StreamBenchCommand.self,
            URLSessionClientCommand.self,
        ]
    )
}

/// `courier bench urlsession-client`: one URLSession client run, as JSON on stdout. The transport
/// benchmark runs it as a child process over TLS (URLSession on Linux trusts only the system's CA
/// bundle, which the child sees with the run's CA added).
struct URLSessionClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "urlsession-client",
        abstract: "One URLSession client run of the transport benchmark, as JSON (used by the benchmark itself).",
        shouldDisplay: false
    )

    @Option var url: String
    @Option var requests: Int
    @Option var concurrency: Int
    @Option var warmup: Int

    func run() async throws {
        let result = await runURLSessionClient(url: url, total: requests, concurrency: concurrency, warmup: warmup)
        let data = try JSONEncoder().encode(result)
        print(String(decoding: data, as: UTF8.self))
    }
}

struct TransportBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transport",
        abstract: "GETs of a 1 KiB body over keep-alive: libcurl multi vs Courier C vs Courier Swift vs URLSession.",
        discussion: "Starts nginx (/usr/sbin/nginx, or $COURIER_NGINX) with a generated configuration in a "
            + "temporary directory, or falls back to the embedded test server with a warning; --url uses a server "
            + "you run. Each run sends --requests GETs per client (--urlsession-requests for URLSession, which is "
            + "slow on Linux; rates are compared) with --concurrency in flight, after an untimed warm-up. The "
            + "median of --runs runs is reported; within a run the clients go back to back (the order rotating "
            + "from run to run) and a ratio is the median of its per-run ratios. Targets: Courier C >= 0.85x "
            + "libcurl, Courier Swift >= 0.7x libcurl, Courier Swift >= 5x URLSession. The plain libcurl loop "
            + "sends no User-Agent or Accept-Encoding; the curl_headers client sends Courier's default ones, "
            + "for a like-for-like ratio shown as (info). Progress goes to stderr. Exit status 1 if any "
            + "request failed.\n\n"
            + "--tls and --h2 start nginx over TLS instead, with the CA, certificate and nginx.conf that "
            + "scripts/tls-fixture makes for the run (HTTPS/1.1; with --h2 nginx offers h2 by ALPN and the "
            + "libcurl loops multiplex): every client is given that CA, and h2load (nghttp2-client) runs as "
            + "the server's ceiling. For each client and run nginx's stub_status and its connections.log "
            + "count the connections it accepted and the TLS handshakes that carried requests; they must be "
            + "equal. Targets over TLS, against the libcurl loop sending the same headers: Courier C >= "
            + "0.95x, Courier Swift >= 0.9x, Courier Swift >= 10x URLSession."
    )

    @Option(help: "GETs per run for libcurl and Courier.")
    var requests = 20_000

    @Option(name: .customLong("urlsession-requests"), help: "GETs per run for URLSession.")
    var urlSessionRequests = 2_000

    @Option(help: "Requests in flight.")
    var concurrency = 32

    @Option(help: "Runs of the whole set; medians are reported.")
    var runs = 3

    @Option(help: "Untimed warm-up requests per client and run.")
    var warmup = 500

    @Option(help: "Measure against this URL instead of starting nginx.")
    var url: String?

    @Option(help: ArgumentHelp("Comma-separated clients to run: curl, curl_headers, courier_c, courier_swift, urlsession, h2load.", valueName: "list"))
    var clients: String?

    @Flag(help: "nginx over TLS (HTTPS/1.1) with a CA made for the run by scripts/tls-fixture.")
    var tls = false

    @Flag(help: "nginx over TLS offering HTTP/2 (h2 by ALPN); implies --tls.")
    var h2 = false

    @Flag(help: "Print one JSON object on stdout (curl_rps, courier_c_rps, courier_swift_rps, urlsession_rps, ...; over TLS also tls, http_version, handshakes, connections).")
    var json = false

    func validate() throws {
        guard requests > 0, urlSessionRequests > 0 else { throw ValidationError("request counts must be > 0") }
        guard concurrency > 0, concurrency <= 1024 else { throw ValidationError("--concurrency must be 1...1024") }
        guard runs > 0 else { throw ValidationError("--runs must be > 0") }
        guard warmup >= 0 else { throw ValidationError("--warmup must be >= 0") }
        guard url == nil || !(tls || h2) else { throw ValidationError("--url and --tls/--h2 exclude each other") }
        _ = try selectedClients()
    }

    private func selectedClients() throws -> [TransportClient]? {
        guard let clients else { return nil }
        return try clients.split(separator: ",").map {
            guard let client = TransportClient(rawValue: $0.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("unknown client '\($0)'; use curl, curl_headers, courier_c, courier_swift, urlsession, h2load")
            }
            return client
        }
    }

    func run() async throws {
        var options = TransportBenchmark.Options()
        options.requests = requests
        options.urlSessionRequests = urlSessionRequests
        options.concurrency = concurrency
        options.runs = runs
        options.warmup = warmup
        options.url = url
        options.clients = try selectedClients()
        options.mode = h2 ? .h2 : tls ? .tls : .plain
        if let executable = Bundle.main.executablePath {
            options.childCommand = [executable, "bench", "urlsession-client"]
        }
        #if DEBUG
        printError("note: this is a debug build; measure with `swift build -c release`")
        #endif
        let report: TransportBenchmark.Report
        do {
            report = try await TransportBenchmark.run(options) { printError($0) }
        } catch {
            printError("error: \(error)")
            throw ExitCode.failure
        }
        print(json ? TransportBenchmark.json(report) : TransportBenchmark.text(report), terminator: json ? "\n" : "")
        if !report.clean { throw ExitCode.failure }
    }
}
