// StressFrozenCommand.swift — `courier stress frozen --backend redis-cluster --chaos`: the long form of
// the journal's chaos test on Redis Cluster. Freezer and replayer processes (this tool started again
// in a hidden child mode) on one journal while the journal's master is SIGKILLed and its replica takes
// over; then what arrived at a loopback recorder is checked. The run is C (Benchmarks/CBench/
// stress_frozen.c); this file parses the options, starts the cluster and prints the figures.
import ArgumentParser
import CBench
import Foundation

struct StressFrozenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frozen",
        abstract: "Freeze and replay in several processes on a Redis Cluster while its masters are killed; check nothing acknowledged is lost.",
        discussion: """
            --backend redis-cluster --chaos: a Redis Cluster of its own (scripts/redis-fixture cluster: 3 masters \
            with a replica each, appendfsync always). --processes freezer processes, each offline (every send \
            frozen) freezing every 20 ms an unordered request and, every 4th time, an ordered one to a host of its \
            own, each with WAIT --replicas; --replayers replayer processes replaying the journal. --kills times, evenly over \
            --duration, the journal's master is SIGKILLed, its replica takes over, the old master is restarted \
            and waited for until it is in sync; with each, a replayer process is SIGKILLed and started again. \
            Then the freezers stop, the replayers drain the journal, and a loopback recorder's arrivals are \
            checked: acknowledged (answered FROZEN), lost (acknowledged, never arrived), delivered, sent again, \
            Idempotency-Key mismatches, and order violations (an acknowledged ordered request first arriving \
            after a later one of its host). Exit status 1 when an acknowledged freeze was lost with --replicas \
            >= 1, on an order violation or a key mismatch, or when the run could not finish (a failover that \
            did not happen, a journal not drained).
            """
    )

    @Option(help: "The journal's store: redis-cluster (the only one with --chaos).") var backend = "redis-cluster"
    @Flag(help: "Kill masters (and replayers) during the run (required).") var chaos = false
    @Option(help: "How long the freezers run (10, 10s, 2m).") var duration = "60s"
    @Option(help: "Master kills during the run.") var kills = 3
    @Option(help: "Replicas each freeze waits for (WAIT N); 0: none.") var replicas = 1
    @Option(name: .customLong("replicas-timeout-ms"), help: "WAIT's timeout.") var replicasTimeoutMs = 1000
    @Option(help: "Freezer processes.") var processes = 2
    @Option(help: "Replayer processes.") var replayers = 2
    @Option(name: .customLong("drain-timeout"), help: "How long the replayers may take to empty the journal after.")
    var drainTimeout = "300s"
    @Option(help: "Directory for the children's stores (default: a temporary one, removed after).") var store: String?
    @Flag(help: "Print one JSON object on stdout.") var json = false
    @Option(name: .customLong("child"), help: .hidden) var child: String?

    func validate() throws {
        if child != nil { return }
        guard backend == "redis-cluster" else { throw ValidationError("--backend is redis-cluster") }
        guard chaos else { throw ValidationError("stress frozen runs with --chaos (the failover run)") }
        guard let d = parseSeconds(duration), d > 0 else { throw ValidationError("bad --duration '\(duration)'") }
        guard parseSeconds(drainTimeout).map({ $0 > 0 }) == true else {
            throw ValidationError("bad --drain-timeout '\(drainTimeout)'")
        }
        guard kills >= 0, replicas >= 0, replicasTimeoutMs > 0 else {
            throw ValidationError("--kills >= 0, --replicas >= 0, --replicas-timeout-ms > 0")
        }
        guard (1...64).contains(processes), (1...64).contains(replayers) else {
            throw ValidationError("--processes and --replayers are 1...64")
        }
    }

    func run() throws {
        if let child { throw ExitCode(cstress_frozen_child(child)) }
        let redis = try BenchRedis(url: nil, cluster: true)
        defer { redis.stop() }
        let fm = FileManager.default
        let storeDir = store ?? fm.temporaryDirectory.appendingPathComponent("courier-stress-frozen-\(getpid())").path
        try fm.createDirectory(atPath: storeDir, withIntermediateDirectories: true)
        defer { if store == nil { try? fm.removeItem(atPath: storeDir) } }
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let owned: [UnsafeMutablePointer<CChar>?] = [exe, "stress", "frozen", "--child"].map { s in s.withCString { strdup($0) } }
        defer { owned.forEach { free($0) } }
        let childArgv: [UnsafePointer<CChar>?] = owned.map { $0.map { UnsafePointer($0) } } + [nil]
        let fixture = repositoryRoot().appendingPathComponent("scripts/redis-fixture").path
        let url = redis.url + "#stress"
        var result = cstress_frozen_result()
        let rc: Int32 = url.withCString { cURL in
            storeDir.withCString { cStore in
                fixture.withCString { cFixture in
                    (redis.fixtureDirectory ?? "").withCString { cDir in
                        childArgv.withUnsafeBufferPointer { argv in
                            var c = cstress_frozen_config()
                            c.journal_url = cURL
                            c.cluster_dir = cDir
                            c.fixture = cFixture
                            c.store_dir = cStore
                            c.child_argv = argv.baseAddress
                            c.freezers = Int32(processes)
                            c.replayers = Int32(replayers)
                            c.replicas = Int32(replicas)
                            c.replicas_timeout_ms = Int64(replicasTimeoutMs)
                            c.duration_s = parseSeconds(duration) ?? 60
                            c.kills = Int32(kills)
                            c.drain_timeout_ms = Int64((parseSeconds(drainTimeout) ?? 300) * 1000)
                            return cstress_frozen_run(&c, &result)
                        }
                    }
                }
            }
        }
        let firstError = withUnsafeBytes(of: result.first_error) { raw -> String in
            String(decoding: raw.bindMemory(to: UInt8.self).prefix { $0 != 0 }, as: UTF8.self)
        }
        guard rc == 0 else {
            printError("error: cannot run: \(firstError)")
            throw ExitCode.failure
        }
        let object: [String: Any] = [
            "kind": "stress_frozen", "backend": backend, "replicas": replicas, "processes": processes,
            "replayers": replayers, "duration_s": parseSeconds(duration) ?? 0, "kills": kills,
            "kills_done": result.kills_done, "replayer_kills": result.replayer_kills, "answered": result.answered,
            "acknowledged": result.acknowledged, "unconfirmed": result.unconfirmed, "failed": result.failed,
            "failed_code": result.failed_code,
            "delivered": result.delivered, "arrivals": result.arrivals, "sent_again": result.arrivals - result.delivered,
            "lost": result.lost, "order_violations": result.order_violations, "key_mismatches": result.key_mismatches,
            "left": result.left, "seconds": result.seconds, "first_error": firstError,
        ]
        if json {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            writeOut(data + Data("\n".utf8))
        } else {
            print("stress frozen on a Redis Cluster: \(processes) freezer and \(replayers) replayer processes, WAIT \(replicas), "
                  + "\(duration), \(result.kills_done) of \(kills) master kills (each with a replayer killed), "
                  + String(format: "%.1f s in all", result.seconds))
            print("  freezes answered \(result.answered): acknowledged \(result.acknowledged), unconfirmed "
                  + "\(result.unconfirmed), failed \(result.failed)"
                  + (result.failed > 0 ? " (the first with \(result.failed_code))" : ""))
            print("  delivered \(result.delivered) (\(result.arrivals) arrivals, \(result.arrivals - result.delivered) sent again)")
            print("  acknowledged lost \(result.lost), order violations \(result.order_violations), key mismatches "
                  + "\(result.key_mismatches), left in the journal \(result.left)")
            if !firstError.isEmpty { print("  error: \(firstError)") }
        }
        let bad = (replicas >= 1 && result.lost > 0) || result.order_violations > 0 || result.key_mismatches > 0
            || !firstError.isEmpty
        if bad { throw ExitCode.failure }
    }
}
