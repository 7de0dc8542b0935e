// FrozenBenchCommand.swift — `courier bench frozen`: the frozen-request benchmark of Benchmarks/
// (freezes/s against raw LMDB synced commits, replay against the transport), progress on stderr,
// --json on stdout.
import ArgumentParser
import CBench
import CourierBenchmarks
import Foundation

struct FrozenBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frozen",
        abstract: "Freezes/s vs raw LMDB synced commits; replayed requests/s vs the engine's transport.",
        discussion: """
            Each run: --requests single-put synced commits into fresh LMDB environments opened as the
            journal opens its own, each value the size of a frozen request as the journal stores it
            (record_bytes), appended (the ceiling, raw_sync_commits) and --requests freezes through the C API one at a time (freeze_ops: sends
            while offline, each answered "frozen" after its synced commit), alternating in --chunks
            chunks so both meet the same disk; --requests freezes --group-concurrency at once
            (freeze_grouped_ops: the journal groups concurrent freezes into one commit); the replay of
            that store to a local server with --concurrency in flight (replay_rps); the same POSTs sent
            normally at that concurrency just before and after the replay (transport_rps, the mean).
            --backend redis: the journals on Redis instead (a redis-server of its own from
            scripts/redis-fixture, AOF with appendfsync always, unless --redis-url): freeze_ops is then
            one XADD script per freeze answered by Redis; raw_sync_commits stays LMDB's, for scale.
            --backend redis-cluster: on a Redis Cluster (its own: scripts/redis-fixture cluster, 3
            masters with a replica each); --replicas N: each freeze followed by WAIT N
            --replicas-timeout-ms (courier_config_set_frozen_replicas), to set WAIT 1 against WAIT 0.
            Medians of --runs runs. Targets: freeze_ops >= 0.8x raw_sync_commits; replay_rps >= 0.5x
            transport_rps.
            """
    )

    @Option(help: "Requests frozen and replayed per run.") var requests = 10_000
    @Option(help: "Runs; medians are reported.") var runs = 3
    @Option(help: "Replays (and transport sends) in flight.") var concurrency = 8
    @Option(name: .customLong("group-concurrency"), help: "Freezes in flight for freeze_grouped_ops.")
    var groupConcurrency = 32
    @Option(help: "Chunks the raw commits and single freezes alternate in.") var chunks = 10
    @Option(help: "Directory for the stores (default: a temporary one, removed after).") var directory: String?
    @Option(help: "The journal's store: lmdb (the default), redis or redis-cluster.") var backend = "lmdb"
    @Option(name: .customLong("redis-url"), help: "The Redis to measure (default: a redis-server of its own).")
    var redisURL: String?
    @Option(help: "With a Redis journal: replicas each freeze waits for (WAIT N), 0: none.") var replicas = 0
    @Option(name: .customLong("replicas-timeout-ms"), help: "WAIT's timeout with --replicas.")
    var replicasTimeoutMs = 1000
    @Flag(help: "Print one JSON object on stdout.") var json = false

    func validate() throws {
        guard requests > 0, runs > 0, concurrency > 0, groupConcurrency > 0 else { throw ValidationError("counts must be > 0") }
        guard ["lmdb", "redis", "redis-cluster"].contains(backend) else {
            throw ValidationError("--backend is lmdb, redis or redis-cluster")
        }
        guard replicas >= 0, replicasTimeoutMs > 0 else { throw ValidationError("--replicas >= 0, --replicas-timeout-ms > 0") }
    }

    func run() throws {
        var options = FrozenBenchmark.Options()
        options.requests = requests
        options.runs = runs
        options.concurrency = concurrency
        options.groupConcurrency = groupConcurrency
        options.chunks = chunks
        options.directory = directory
        let redis = backend == "lmdb" ? nil : try BenchRedis(url: redisURL, cluster: backend == "redis-cluster")
        defer { redis?.stop() }
        options.journal = redis?.url
        cbench_frozen_set_replicas(Int32(replicas), Int64(replicasTimeoutMs))
        defer { cbench_frozen_set_replicas(0, 0) }
        let tty = isatty(STDERR_FILENO) != 0
        let report = try FrozenBenchmark.run(options) { fraction, what in
            let line = String(format: "[%3.0f%%] %@", fraction * 100, what)
            FileHandle.standardError.write(Data((tty ? "\r\u{1B}[K" + line : line + "\n").utf8))
        }
        if tty { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        let f = report.figures
        if json {
            var object: [String: Any] = f.mapValues { ($0 * 100).rounded() / 100 }
            object["requests"] = requests
            object["runs"] = runs
            object["concurrency"] = concurrency
            object["group_concurrency"] = groupConcurrency
            object["backend"] = backend
            object["replicas"] = replicas
            object["errors"] = report.errors
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        } else {
            func rate(_ k: String) -> String { String(format: "%10.0f /s", f[k] ?? 0) }
            print("frozen requests: \(requests) per run, medians of \(runs) runs, journal on \(backend)\(replicas > 0 ? ", WAIT \(replicas)" : "")")
            print("  raw LMDB synced commits      \(rate("raw_sync_commits"))   \(String(format: "%.0f-byte values (a frozen request as stored)", f["record_bytes"] ?? 0))")
            print("  freezes, one at a time       \(rate("freeze_ops"))   \(String(format: "%.2fx raw (target >= 0.8x)", f["freeze_ratio"] ?? 0))")
            print("  freezes, \(groupConcurrency) at once         \(rate("freeze_grouped_ops"))   \(String(format: "%.2fx raw (group commit)", f["freeze_grouped_ratio"] ?? 0))")
            print("  replay, \(concurrency) in flight          \(rate("replay_rps"))   \(String(format: "%.2fx transport (target >= 0.5x)", f["replay_ratio"] ?? 0))")
            print("  transport, \(concurrency) in flight       \(rate("transport_rps"))")
            for e in report.errors { print("  error: \(e)") }
        }
        if !report.errors.isEmpty { throw ExitCode.failure }
    }
}
