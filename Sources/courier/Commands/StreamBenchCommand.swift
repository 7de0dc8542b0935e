// StreamBenchCommand.swift — `courier bench stream`: one large body over loopback read as it
// arrives by a plain libcurl transfer whose write callback discards (the ceiling), by the Courier C
// stream API, and by the Swift facade's `bytes(for:)` chunks, side by side in one process, runs
// alternating; medians and ratios (target: Courier >= 0.9x libcurl).
import ArgumentParser
import CBench
import Courier
import Foundation

struct StreamBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "A large streamed body over loopback: libcurl (discarding; its default 16 KiB buffer and Courier's 256 KiB) vs Courier C stream vs Courier Swift bytes(for:).",
        discussion: "Serves /bytes/N from the embedded test server (in this process) or --url. Each run reads the "
            + "body once per client, the clients' order rotating from run to run; the median of --runs runs is "
            + "reported, and each ratio is the median of the per-run ratios. Exit status 1 when a read failed."
    )

    @Option(help: "Body size in bytes.")
    var size: Int64 = 1 << 30

    @Option(help: "Runs; medians are reported.")
    var runs = 5

    @Option(help: "Read this URL instead of the embedded server's /bytes/SIZE.")
    var url: String?

    @Flag(help: "Print JSON on stdout.")
    var json = false

    func run() async throws {
        let server = url == nil ? try EmbeddedServer() : nil
        defer { server?.stop() }
        let target = url ?? "\(server!.baseURL)/bytes/\(size)"
        let engine = try Engine(configuration: { var c = Configuration(); c.temporaryStore = true; return c }())
        defer { engine.close() }
        var results: [String: [(wall: Double, cpu: Double)]] = ["curl": [], "curl_256k": [], "courier_c": [], "courier_swift": []]
        var ratioC: [Double] = [], ratioSwift: [Double] = [], ratioC256: [Double] = []
        var maxHeld: Int64 = 0
        var failed = false
        let clients = ["curl", "curl_256k", "courier_c", "courier_swift"]
        for run in 0..<runs {
            var wall: [String: Double] = [:]
            for k in 0..<clients.count {
                let client = clients[(k + run) % clients.count]
                var bytes: Int64 = 0, held: Int64 = 0
                var w = 0.0, c = 0.0
                var rc: Int32 = 0
                switch client {
                case "curl": rc = cbench_stream_curl(target, 0, &bytes, &w, &c)
                case "curl_256k": rc = cbench_stream_curl(target, 256 * 1024, &bytes, &w, &c)
                case "courier_c": rc = cbench_stream_courier(target, &bytes, &held, &w, &c)
                default:
                    let c0 = cbench_process_cpu_seconds(), t0 = Date()
                    do {
                        let (body, _) = try await engine.bytes(for: .get(target))
                        for try await chunk in body.chunks { bytes += Int64(chunk.count) }
                    } catch { rc = -1 }
                    w = Date().timeIntervalSince(t0)
                    c = cbench_process_cpu_seconds() - c0
                }
                maxHeld = max(maxHeld, held)
                if rc != 0 || (url == nil && bytes != size) {
                    failed = true
                    printError("\(client): read failed after \(bytes) bytes")
                }
                results[client]!.append((w, c))
                wall[client] = w
                printError("run \(run + 1)/\(runs) \(client): \(bytesText(bytes)) in \(String(format: "%.3f", w)) s")
            }
            if let curl = wall["curl"], let cc = wall["courier_c"], let sw = wall["courier_swift"] {
                ratioC.append(curl / cc)
                ratioSwift.append(curl / sw)
                if let big = wall["curl_256k"] { ratioC256.append(big / cc) }
            }
        }
        func median(_ v: [Double]) -> Double {
            let s = v.sorted()
            return s.isEmpty ? 0 : s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
        }
        let bytes = Double(size)
        var out: [String: Any] = ["size": size, "runs": runs, "max_held_bytes": maxHeld]
        for client in clients {
            let w = median(results[client]!.map(\.wall)), c = median(results[client]!.map(\.cpu))
            out[client] = ["wall_s": w, "cpu_s": c, "mib_per_s": bytes / w / 1_048_576]
        }
        out["ratio_courier_c"] = median(ratioC)
        out["ratio_courier_swift"] = median(ratioSwift)
        out["ratio_courier_c_vs_curl_256k"] = median(ratioC256)
        if json {
            let data = try JSONSerialization.data(withJSONObject: out, options: [.sortedKeys, .prettyPrinted])
            writeOut(data + Data("\n".utf8))
        } else {
            print("streamed body of \(bytesText(size)) over loopback, median of \(runs) runs:")
            for client in clients {
                let r = out[client] as! [String: Double]
                print("  \(client.padding(toLength: 14, withPad: " ", startingAt: 0)) \(String(format: "%8.1f", r["mib_per_s"]!)) MiB/s  "
                      + "wall \(String(format: "%.3f", r["wall_s"]!)) s  cpu \(String(format: "%.3f", r["cpu_s"]!)) s")
            }
            print(String(format: "  Courier C / libcurl %.3fx, Courier Swift / libcurl %.3fx (target >= 0.9x); "
                         + "the engine held at most %@ unread", median(ratioC), median(ratioSwift), bytesText(maxHeld)))
            print(String(format: "  (info) Courier C / libcurl with the same 256 KiB buffer %.3fx", median(ratioC256)))
        }
        if failed { throw ExitCode.failure }
    }
}
