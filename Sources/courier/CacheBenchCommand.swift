// CacheBenchCommand.swift — `courier bench cache`: the cache benchmark of Benchmarks/ (raw LMDB,
// Courier C, Courier Swift, URLCache), with a progress bar on stderr and --json on stdout.
import ArgumentParser
import CBench
import CourierBenchmarks
import Foundation

struct CacheBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Cache puts/s and gets/s: raw LMDB vs Courier C vs Courier Swift vs URLCache.",
        discussion: """
            32-byte keys, 1 KiB bodies, --entries entries per store. Puts are single-put commits (one put, \
            one commit each) into a raw LMDB store, a Courier store through the C API and one through the \
            Swift facade, measured side by side: in --chunks chunks alternating between them (the order \
            rotating), so a machine whose load drifts slows them alike. First --entries puts each under the \
            no-sync setting (COURIER_CACHE_FAST, MDB_NOSYNC): the figure reported as *_put_ops, and the one \
            compared with URLCache, which never syncs its files; then --durable-puts each into fresh stores \
            under the cache's default durable setting (COURIER_CACHE_DURABLE, MDB_NOMETASYNC: one fdatasync \
            per commit), reported as *_put_durable_ops. Both also in CPU time per put (*_put_cpu_ns, \
            *_put_durable_cpu_ns). Raw LMDB always uses the same flags as the Courier figure it is compared \
            with, and inserts its keys in order (LMDB's best case); raw_scattered_put_ops is raw LMDB \
            inserting the same keys in a scattered order, as a store of hashed keys receives them \
            (--no-scattered to skip).

            Gets are --gets random hits per thread, on 1 and 2 threads, for raw LMDB, Courier C and Courier \
            Swift side by side, in --chunks alternating chunks too, on the stores the no-sync puts loaded. A \
            raw get renews a reset read transaction, copies the value out (as a cache client would) and \
            resets it; raw_nocopy_get_ops is the same without the copy, the ceiling as LMDB's own benchmarks \
            take it. Gets are reported per second of wall time (*_get_ops) and in CPU time per get \
            (*_get_cpu_ns, steadier on a busy machine).

            URLCache stores --urlcache-entries entries once and looks up --urlcache-gets of them (it rescans \
            its directory on every call). Medians of --runs runs; then the median get latency at each of \
            --latency-sizes entries.

            Targets: C gets >= 0.6x raw, C puts >= 0.5x raw under the same durability setting, Swift gets >= \
            0.4x raw, Courier >= 1000x URLCache for gets and (no-sync) puts.

            --backend redis: the cache on Redis instead. Courier C (courier_cache_put_key / get_key on an \
            engine whose cache store is the Redis URL) against a plain hiredis SET / GET loop on the same \
            server, one command per operation, in --chunks alternating chunks: --redis-entries puts, then \
            --gets random hits; keys hiredis_get_ops, hiredis_put_ops, courier_get_ops, courier_put_ops \
            (target Courier >= 0.8x hiredis). --backend redis-cluster: the same on a Redis Cluster \
            (a redis+cluster:// URL; its own is 3 masters with a replica each, scripts/redis-fixture cluster), \
            the hiredis side sending each command straight to its slot's master. Without --redis-url it starts a redis-server of its own \
            (scripts/redis-fixture: AOF with --redis-fsync, default everysec). --requests-cache adds requests-cache's Redis \
            backend driven from Python (bindings/python/run-redis-bench.sh, in a virtual environment of its \
            own): requests_cache_get_ops, requests_cache_put_ops (target Courier >= 10x).
            """
    )

    @Option(help: "Entries per run.") var entries = 100_000
    @Option(name: .customLong("durable-puts"), help: "Durable single-put commits timed per run.") var durablePuts = 2_000
    @Flag(name: .customLong("no-scattered"), help: "Skip the raw LMDB puts in a scattered key order.")
    var noScattered = false
    @Option(help: "Random gets per thread per measurement.") var gets = 200_000
    @Option(help: "Chunks the puts and the gets are split into, alternating between raw LMDB, C and Swift.")
    var chunks = 20
    @Option(help: "Runs; medians are reported.") var runs = 3
    @Option(name: .customLong("urlcache-entries"), help: "URLCache entries (slow: ~20 stores/s).") var urlCacheEntries = 1_000
    @Option(name: .customLong("urlcache-gets"), help: "URLCache lookups.") var urlCacheGets = 300
    @Option(name: .customLong("latency-sizes"), help: "Comma-separated entry counts for the latency table.")
    var latencySizes = "10000,100000,1000000"
    @Option(help: "Directory for the stores (default: a temporary one, removed after).") var directory: String?
    @Flag(help: "Print one JSON object on stdout.") var json = false
    @Option(help: "The store: lmdb (the default), redis or redis-cluster.") var backend = "lmdb"
    @Option(name: .customLong("redis-url"), help: "The Redis to measure (default: a redis-server of its own).")
    var redisURL: String?
    @Option(name: .customLong("redis-entries"), help: "Entries put per side with --backend redis.")
    var redisEntries = 20_000
    @Flag(name: .customLong("requests-cache"), help: "With --backend redis, also measure requests-cache's Redis backend.")
    var requestsCache = false
    @Option(name: .customLong("redis-fsync"),
            help: "appendfsync of the redis-server it starts: everysec (a cache's usual setting) or always.")
    var redisFsync = "everysec"

    func validate() throws {
        guard entries > 0, gets >= 0, runs > 0, chunks > 0, durablePuts > 0, urlCacheEntries > 0,
              urlCacheGets > 0, redisEntries > 0 else {
            throw ValidationError("counts must be > 0")
        }
        guard ["lmdb", "redis", "redis-cluster"].contains(backend) else {
            throw ValidationError("--backend is lmdb, redis or redis-cluster")
        }
        guard ["everysec", "always", "no"].contains(redisFsync) else {
            throw ValidationError("--redis-fsync is everysec, always or no")
        }
        _ = try sizes()
    }

    func sizes() throws -> [Int] {
        try latencySizes.split(separator: ",").map {
            guard let n = Int($0.trimmingCharacters(in: .whitespaces)), n > 0 else {
                throw ValidationError("bad --latency-sizes '\(latencySizes)'")
            }
            return n
        }
    }

    func run() throws {
        if backend != "lmdb" { return try runRedis() }
        var options = CacheBenchmark.Options()
        options.entries = entries
        options.durablePuts = durablePuts
        options.scatteredPuts = !noScattered
        options.gets = gets
        options.chunks = chunks
        options.runs = runs
        options.urlCacheEntries = urlCacheEntries
        options.urlCacheGets = urlCacheGets
        options.latencySizes = try sizes()
        options.directory = directory
        let tty = isatty(STDERR_FILENO) != 0
        let report = try CacheBenchmark.run(options) { fraction, what in
            let width = 30
            let filled = Int((fraction * Double(width)).rounded(.down))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            let line = String(format: "[%@] %3d%% %@", bar, Int(fraction * 100), what)
            FileHandle.standardError.write(Data(((tty ? "\r\u{1B}[K" : "") + line + (tty ? "" : "\n")).utf8))
        }
        if tty { FileHandle.standardError.write(Data("\n".utf8)) }
        let f = report.figures
        if json {
            var object: [String: Any] = f
            object["latency"] = report.latency.map {
                ["entries": $0.entries, "courier_get_ns_p50": $0.courierNs, "raw_get_ns_p50": $0.rawNs,
                 "courier_get_ops": $0.courierGetOps] as [String: Any]
            }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        func ops(_ k: String) -> String { String(format: "%12.0f", f[k] ?? 0) }
        func ratio(_ a: String, _ b: String) -> String {
            guard let x = f[a], let y = f[b], y > 0 else { return "   -" }
            return String(format: "%8.2fx", x / y)
        }
        print("cache benchmark: \(entries) entries, 32-byte keys, 1 KiB bodies, median of \(runs) runs")
        func ns(_ k: String) -> String { String(format: "%7.0f", f[k] ?? 0) }
        func pad(_ name: String) -> String { name.padding(toLength: 20, withPad: " ", startingAt: 0) }
        print(pad("") + "gets/s 1 thr" + "    gets/s 2 thr" + " CPU ns/get, 1 and 2 thr" + "        puts/s no-sync"
              + "   puts/s durable")
        func row(_ name: String, _ p: String, puts: Bool) {
            var line = pad(name) + ops(p + "_get_ops") + "    " + ops(p + "_get_ops_2t")
                + "        " + ns(p + "_get_cpu_ns") + "  " + ns(p + "_get_cpu_ns_2t")
            if puts { line += "          " + ops(p + "_put_ops") + "     " + ops(p + "_put_durable_ops") }
            print(line)
        }
        row("raw LMDB (copy)", "raw", puts: true)
        row("raw LMDB (no copy)", "raw_nocopy", puts: false)
        row("Courier C", "courier", puts: true)
        row("Courier Swift", "swift", puts: true)
        if f["raw_scattered_put_ops"] != nil {
            print(pad("raw LMDB, scattered") + String(repeating: " ", count: 62)
                  + ops("raw_scattered_put_ops") + String(repeating: " ", count: 17) + "   (keys in a scattered order, as hashed keys land)")
        }
        print(pad("URLCache (\(urlCacheEntries))") + ops("urlcache_get_ops")
              + String(repeating: " ", count: 50) + ops("urlcache_put_ops") + "   (it never syncs: its only setting)")
        print("ratios: C gets \(ratio("courier_get_ops", "raw_get_ops")) raw (target 0.6x; 2 thr "
              + "\(ratio("courier_get_ops_2t", "raw_get_ops_2t")), CPU \(ratio("raw_get_cpu_ns", "courier_get_cpu_ns"))); "
              + "vs raw without the copy \(ratio("courier_get_ops", "raw_nocopy_get_ops"))")
        print("        Swift gets \(ratio("swift_get_ops", "raw_get_ops")) raw (target 0.4x; 2 thr "
              + "\(ratio("swift_get_ops_2t", "raw_get_ops_2t")), CPU \(ratio("raw_get_cpu_ns", "swift_get_cpu_ns"))); "
              + "vs raw without the copy \(ratio("swift_get_ops", "raw_nocopy_get_ops"))")
        print("        C puts \(ratio("courier_put_ops", "raw_put_ops")) raw no-sync (CPU \(ratio("raw_put_cpu_ns", "courier_put_cpu_ns"))), "
              + "\(ratio("courier_put_durable_ops", "raw_put_durable_ops")) raw durable (CPU "
              + "\(ratio("raw_put_durable_cpu_ns", "courier_put_durable_cpu_ns"))) (target 0.5x, same durability)")
        print("        C puts no-sync vs raw in a scattered key order \(ratio("courier_put_ops", "raw_scattered_put_ops")) "
              + "(CPU \(ratio("raw_scattered_put_cpu_ns", "courier_put_cpu_ns"))); Swift puts \(ratio("swift_put_ops", "raw_put_ops")) raw no-sync")
        print("        Courier C vs URLCache: gets \(ratio("courier_get_ops", "urlcache_get_ops")), "
              + "puts \(ratio("courier_put_ops", "urlcache_put_ops")) no-sync vs URLCache's never-synced (target 1000x); "
              + "durable puts \(ratio("courier_put_durable_ops", "urlcache_put_ops"))")
        print("get latency (median of 20,001 single gets):")
        for l in report.latency {
            print(String(format: "  %9d entries: Courier C %7.0f ns (%9.0f gets/s), raw LMDB %6.0f ns", l.entries,
                         l.courierNs, l.courierGetOps, l.rawNs))
        }
        if (f["errors"] ?? 0) > 0 {
            printError("error: \(Int(f["errors"] ?? 0)) operations failed")
            throw ExitCode.failure
        }
    }

    func runRedis() throws {
        let redis = try BenchRedis(url: redisURL, appendfsync: redisFsync, cluster: backend == "redis-cluster")
        defer { redis.stop() }
        let url = redis.url
        var results: [cbench_redis_result] = []
        for _ in 0..<runs {
            var r = cbench_redis_result()
            let rc = cbench_redis_cache(url, redisEntries, gets, Int32(chunks), 1024, &r)
            let message = withUnsafeBytes(of: r.first_error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if rc != 0 || r.errors > 0 {
                printError("error: \(message)")
                throw ExitCode.failure
            }
            results.append(r)
        }
        func median(_ k: (cbench_redis_result) -> Double) -> Double {
            let v = results.map(k).sorted()
            return v[v.count / 2]
        }
        var f: [String: Any] = [
            "backend": backend, "redis_appendfsync": redisURL == nil ? redisFsync : "its own", "entries": redisEntries, "gets": gets, "runs": runs, "value_bytes": 1024,
            "hiredis_get_ops": median { $0.hiredis_get_ops }, "hiredis_put_ops": median { $0.hiredis_put_ops },
            "courier_get_ops": median { $0.courier_get_ops }, "courier_put_ops": median { $0.courier_put_ops },
        ]
        if requestsCache {
            let py = try runScript([repositoryRoot().appendingPathComponent("bindings/python/run-redis-bench.sh").path, url,
                                 String(min(redisEntries, 5_000)), String(min(gets, 20_000))])
            guard py.status == 0, let line = py.output.split(separator: "\n").last,
                  let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                printError("error: the requests-cache side failed (bindings/python/run-redis-bench.sh)")
                throw ExitCode.failure
            }
            for (k, v) in obj { f[k] = v }
        }
        if json {
            let data = try JSONSerialization.data(withJSONObject: f, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        func num(_ k: String) -> Double { (f[k] as? Double) ?? 0 }
        print("cache on \(backend == "redis" ? "Redis" : "Redis Cluster") (\(url)): \(redisEntries) puts and \(gets) gets per side, 1 KiB bodies, median of \(runs) runs")
        print(String(format: "  hiredis GET/SET loop: %10.0f gets/s %10.0f puts/s", num("hiredis_get_ops"), num("hiredis_put_ops")))
        print(String(format: "  Courier C:            %10.0f gets/s %10.0f puts/s", num("courier_get_ops"), num("courier_put_ops")))
        print(String(format: "  ratios: gets %.2fx, puts %.2fx hiredis (target 0.8x)",
                     num("courier_get_ops") / max(num("hiredis_get_ops"), 1), num("courier_put_ops") / max(num("hiredis_put_ops"), 1)))
        if f["requests_cache_get_ops"] != nil {
            print(String(format: "  requests-cache:       %10.0f gets/s %10.0f puts/s; Courier %.1fx gets, %.1fx puts (target 10x)",
                         num("requests_cache_get_ops"), num("requests_cache_put_ops"),
                         num("courier_get_ops") / max(num("requests_cache_get_ops"), 1),
                         num("courier_put_ops") / max(num("requests_cache_put_ops"), 1)))
        }
    }
}
