// Peers.swift — `peers transport`: GETs of a 1 KiB body from one nginx (plain, --tls, --h2: the
// servers of `courier bench transport`) by Courier's Swift facade and by AsyncHTTPClient, the
// client server-side Swift uses, side by side in one run (the order alternating from run to run),
// `concurrency` in flight over keep-alive. Medians of the runs; the ratio is the median of the
// per-run ratios. Target: Courier Swift >= 1.5x AsyncHTTPClient on every protocol.
import ArgumentParser
import AsyncHTTPClient
import Courier
import CourierBenchmarks
import Foundation
import NIOCore
import NIOSSL

@main
struct Peers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract: "Courier beside the clients users would pick instead.",
        subcommands: [PeersTransport.self, PeersWebSocket.self, PeersSSE.self, PeersOpenAPI.self]
    )
}

struct PeersTransport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transport",
        abstract: "GETs of a 1 KiB body: Courier Swift vs AsyncHTTPClient (target: Courier >= 1.5x).",
        discussion: "Starts nginx as `courier bench transport` does (plain HTTP; --tls and --h2: over TLS with "
            + "scripts/tls-fixture's CA, given to both clients). Progress goes to stderr."
    )

    @Option(help: "GETs per client and run.") var requests = 20_000
    @Option(help: "Requests in flight.") var concurrency = 32
    @Option(help: "Runs; medians are reported.") var runs = 3
    @Option(help: "Untimed warm-up requests per client and run.") var warmup = 500
    @Flag(help: "nginx over TLS (HTTPS/1.1).") var tls = false
    @Flag(help: "nginx over TLS offering h2 by ALPN.") var h2 = false
    @Flag(help: "Print one JSON object (courier_swift_rps, asynchttpclient_rps, ...).") var json = false

    func run() async throws {
        guard let nginx = BenchServer.findNginx() else { throw ValidationError("nginx not found (scripts/setup installs it)") }
        let server: BenchServer
        if tls || h2 {
            guard let fixture = BenchServer.findTLSFixture() else {
                throw ValidationError("scripts/tls-fixture not found: run from the checkout or set COURIER_TLS_FIXTURE")
            }
            server = try BenchServer.nginxTLS(path: nginx, fixture: fixture, http2: h2)
        } else {
            server = try BenchServer.nginx(path: nginx)
        }
        defer { server.stop() }
        let mode = h2 ? "h2" : tls ? "tls" : "plain"
        log("server: \(server.description) at \(server.url)")
        let setup = ClientSetup(url: server.url, caFile: server.tls?.caFile, http2: h2)
        let ahc = try makeClient(caFile: server.tls?.caFile)
        // 0: Courier Swift (the global executor), 1: AsyncHTTPClient, 2: Courier Swift with its
        // tasks on the engine's executor (Engine.taskExecutor); the order rotates from run to run.
        var courier: [Double] = [], peer: [Double] = [], executor: [Double] = [], errors = 0
        // CPU of this process per request (user + system, every thread: Courier's worker and the
        // pool, or AsyncHTTPClient's event loops), per run: nginx runs in its own processes, so
        // when it holds the rate of both clients near its own (two cores shared by all), this is
        // what tells the clients' own costs apart.
        var courierCPU: [Double] = [], peerCPU: [Double] = [], executorCPU: [Double] = []
        let names = ["Courier Swift", "AsyncHTTPClient", "Courier Swift (engine's executor)"]
        for run in 1...max(1, runs) {
            let order = [[0, 1, 2], [1, 2, 0], [2, 0, 1]][(run - 1) % 3]
            for which in order {
                let result: ClientRun
                switch which {
                case 0: result = await TransportClient.courierSwift.run(setup, total: requests, concurrency: concurrency, warmup: warmup)
                case 1: result = await asyncHTTPClient(ahc, url: server.url)
                default:
                    result = await TransportClient.courierSwiftExecutor.run(setup, total: requests, concurrency: concurrency,
                                                                          warmup: warmup)
                }
                errors += result.errors
                switch which {
                case 0: courier.append(result.requestsPerSecond); courierCPU.append(result.cpuMicrosecondsPerRequest)
                case 1: peer.append(result.requestsPerSecond); peerCPU.append(result.cpuMicrosecondsPerRequest)
                default: executor.append(result.requestsPerSecond); executorCPU.append(result.cpuMicrosecondsPerRequest)
                }
                log("run \(run)/\(runs): \(names[which]): "
                    + "\(Int(result.requestsPerSecond)) req/s, "
                    + String(format: "%.2f us CPU/request", result.cpuMicrosecondsPerRequest) + (result.errors > 0 ? ", \(result.errors) ERRORS: \(result.firstError ?? "?")" : ""))
            }
        }
        try await ahc.shutdown()
        let ratios = zip(courier, peer).compactMap { $1 > 0 ? $0 / $1 : nil }
        let executorRatios = zip(executor, peer).compactMap { $1 > 0 ? $0 / $1 : nil }
        // By CPU: the peer's CPU per request over Courier's (above 1: Courier spends less).
        let cpuRatios = zip(courierCPU, peerCPU).compactMap { $0 > 0 ? $1 / $0 : nil }
        let executorCPURatios = zip(executorCPU, peerCPU).compactMap { $0 > 0 ? $1 / $0 : nil }
        let report: [String: Any] = [
            "mode": mode, "requests": requests, "concurrency": concurrency, "run_count": runs,
            "courier_swift_rps": median(courier), "asynchttpclient_rps": median(peer),
            "courier_swift_executor_rps": median(executor),
            "courier_swift_cpu_us": median(courierCPU), "asynchttpclient_cpu_us": median(peerCPU),
            "courier_swift_executor_cpu_us": median(executorCPU),
            "ratios": ["courier_swift_vs_asynchttpclient": median(ratios),
                       "courier_swift_executor_vs_asynchttpclient": median(executorRatios),
                       "courier_swift_vs_asynchttpclient_by_cpu": median(cpuRatios),
                       "courier_swift_executor_vs_asynchttpclient_by_cpu": median(executorCPURatios)],
            "targets": ["courier_swift_vs_asynchttpclient": 1.5],
            "targets_met": ["courier_swift_vs_asynchttpclient": median(ratios) >= 1.5],
            "runs": ["courier_swift": courier, "asynchttpclient": peer, "courier_swift_executor": executor,
                     "courier_swift_cpu_us": courierCPU, "asynchttpclient_cpu_us": peerCPU,
                     "courier_swift_executor_cpu_us": executorCPU],
            "ok": errors == 0, "url": server.url,
        ]
        if json {
            let data = try JSONSerialization.data(withJSONObject: report, options: [.sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("Courier Swift    \(Int(median(courier))) req/s\nAsyncHTTPClient  \(Int(median(peer))) req/s\n"
                + String(format: "ratio            %.2fx (target >= 1.5x)\n", median(ratios))
                + String(format: "by CPU           %.2f vs %.2f us/request: %.2fx\n", median(courierCPU), median(peerCPU),
                         median(cpuRatios))
                + "Courier Swift on the engine's executor \(Int(median(executor))) req/s, "
                + String(format: "%.2fx AsyncHTTPClient (%.2fx by CPU)", median(executorRatios), median(executorCPURatios)))
        }
        if errors > 0 { throw ExitCode.failure }
    }

    /// AsyncHTTPClient on its shared event loop group, trusting the run's CA, a connection per
    /// request in flight over HTTP/1.1 (h2 by ALPN when the server offers it).
    private func makeClient(caFile: String?) throws -> HTTPClient {
        var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
        if let caFile { tlsConfiguration.additionalTrustRoots = [.file(caFile)] }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tlsConfiguration)
        configuration.connectionPool = .init(idleTimeout: .seconds(300), concurrentHTTP1ConnectionsPerHostSoftLimit: concurrency)
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    private func asyncHTTPClient(_ client: HTTPClient, url: String) async -> ClientRun {
        let one: @Sendable () async -> (ok: Bool, bytes: Int, error: String?) = {
            do {
                let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
                let body = try await response.body.collect(upTo: 1 << 20)
                return response.status.code == 200 ? (true, body.readableBytes, nil) : (false, 0, "HTTP status \(response.status.code)")
            } catch {
                return (false, 0, "\(error)")
            }
        }
        if warmup > 0 { _ = await runInFlight(total: warmup, concurrency: concurrency, one) }
        return await runInFlight(total: requests, concurrency: concurrency, one)
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    private func log(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
