// StressCommand.swift — `courier stress cache` (and the parent of `stress frozen`, StressFrozenCommand.swift): worker threads (and processes) driving the C core's
// cache directly (the loop is in C: Benchmarks/CBench/stress.c), then an integrity check of the
// store through courier_cache_verify. Several processes are this tool started again in a hidden
// worker mode, each writing its result as JSON to a file the first one reads.
import ArgumentParser
import CBench
import Courier
import Foundation

struct StressCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress",
        abstract: "Stress tests (build with -c release to measure).",
        subcommands: [StressCacheCommand.self, StressFrozenCommand.self]
    )
}

/// "100", "1k", "64KiB", "1m", "2g" (powers of 1024).
func parseBytes(_ text: String) -> Int64? {
    var t = text.lowercased().trimmingCharacters(in: .whitespaces)
    for suffix in ["ib", "b"] where t.hasSuffix(suffix) && t.count > suffix.count { t.removeLast(suffix.count) }
    var mult: Int64 = 1
    if let last = t.last, let m = ["k": Int64(1) << 10, "m": Int64(1) << 20, "g": Int64(1) << 30][String(last)] {
        mult = m
        t.removeLast()
    }
    guard let v = Double(t), v >= 0 else { return nil }
    return Int64(v * Double(mult))
}

/// "10", "10s", "500ms", "2m".
func parseSeconds(_ text: String) -> Double? {
    let t = text.lowercased()
    if t.hasSuffix("ms"), let v = Double(t.dropLast(2)) { return v / 1000 }
    if t.hasSuffix("s"), let v = Double(t.dropLast()) { return v }
    if t.hasSuffix("m"), let v = Double(t.dropLast()) { return v * 60 }
    return Double(t)
}

struct StressCacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Load the cache with many threads and processes, then check that nothing was lost or torn.",
        discussion: """
            Worker threads call the C core directly (courier_cache_get_key, put_key, remove_key), so the figures \
            are the engine's. Each value carries its key's number and a version and its bytes follow from them: a \
            get that reads a value that is not whole counts as an error. With --processes N, N processes (this \
            tool started again) share one store. With --http, each operation is a request through the whole \
            request path (the HTTP cache policy, against the embedded loopback server's /cache route): gets use \
            the HTTP policy, puts the write-only policy, removes courier_cache_remove; --value-size does not apply.

            At the end: totals, a per-second series of throughput and get/put latency (p50, p99, p99.9, max; with \
            several processes the series sums throughput and shows the worst process's percentiles), evictions, \
            the growth of data.mdb, errors, and courier_cache_verify of the store (every entry whole, the index \
            and the totals). Exit status 1 when any operation failed, a value was torn, or the verify found the \
            store inconsistent. A progress line goes to stderr when it is a terminal.
            """
    )

    @Option(help: "Worker threads per process.") var threads = 2
    @Option(help: "Processes on one store.") var processes = 1
    @Option(help: "How long to run (10, 10s, 500ms, 2m); 0 with --ops: until the operations are done.")
    var duration = "10s"
    @Option(help: "Operations per process (0: only --duration bounds the run).") var ops: Int64 = 0
    @Option(help: "Key space.") var entries: Int64 = 100_000
    @Option(name: .customLong("value-size"), help: "Value size: fixed (1k) or a uniform range (1k..1m); at least 16.")
    var valueSize = "1k"
    @Option(help: "Weights of get:put:remove.") var mix = "90:9:1"
    @Option(help: "Key popularity: uniform or zipf.") var skew = "uniform"
    @Option(name: .customLong("zipf-s"), help: "The Zipf exponent.") var zipfS = 0.99
    @Option(name: .customLong("size-limit"), help: "The cache's size limit (e.g. 64m); default the engine's 256 MiB.")
    var sizeLimit: String?
    @Option(help: "durable, fast or synced.") var durability = "durable"
    @Option(help: "Expiry of the entries written, in seconds (entries expire during the run when it is short).")
    var expiry: Int64 = 0
    @Flag(help: "Through the whole request path (HTTP policy, loopback origin) instead of the cache API.")
    var http = false
    @Flag(help: "Write every key once before the clock starts (so gets find their entries).") var prefill = false
    @Flag(help: ArgumentHelp(
        "Kill worker processes with SIGKILL at random moments and restart them; then check that no write a worker "
        + "had acknowledged is lost (each process's threads write keys of their own; needs --duration, no removes, "
        + "no expiry, and a key space that fits the size limit)."))
    var chaos = false
    @Option(name: .customLong("ack-file"), help: .hidden) var ackFile: String?
    @Option(name: .customLong("chaos-slot"), help: .hidden) var chaosSlot = 0
    @Option(name: .customLong("chaos-slots"), help: .hidden) var chaosSlots = 0
    @Option(help: "The store directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Random seed.") var seed: UInt64 = 1
    @Flag(help: "Print one JSON object on stdout.") var json = false

    // Worker mode (hidden): run one process's share and write the result to a file.
    @Option(name: .customLong("worker-result"), help: .hidden) var workerResult: String?
    @Option(name: .customLong("http-url"), help: .hidden) var httpURL: String?

    func validate() throws {
        guard threads >= 1, threads <= 256 else { throw ValidationError("--threads must be 1...256") }
        guard processes >= 1, processes <= 64 else { throw ValidationError("--processes must be 1...64") }
        guard entries >= 1 else { throw ValidationError("--entries must be >= 1") }
        guard let d = parseSeconds(duration), d >= 0 else { throw ValidationError("bad --duration '\(duration)'") }
        guard d > 0 || ops > 0 else { throw ValidationError("give --duration or --ops") }
        _ = try values()
        _ = try weights()
        guard ["uniform", "zipf"].contains(skew) else { throw ValidationError("--skew is uniform or zipf") }
        guard ["durable", "fast", "synced"].contains(durability) else {
            throw ValidationError("--durability is durable, fast or synced")
        }
        if chaos {
            let limit = sizeLimit.flatMap(parseBytes) ?? (256 << 20)
            guard d > 0, ops == 0 else { throw ValidationError("--chaos runs for a --duration (and --ops 0)") }
            guard try weights()[2] == 0, expiry == 0, !http else {
                throw ValidationError("--chaos needs no removes (--mix G:P:0), no --expiry and no --http")
            }
            guard entries * (try values()).1 * 3 <= limit else {
                throw ValidationError("--chaos needs a key space that fits the size limit (entries x largest value "
                                      + "x 3 <= the limit), so no acknowledged write is evicted")
            }
            guard entries >= Int64(processes * threads) else { throw ValidationError("--chaos needs more keys than threads") }
        }
        if prefill && http { throw ValidationError("--prefill writes the cache API's keys; it does not apply to --http") }
        if let sizeLimit, parseBytes(sizeLimit) == nil { throw ValidationError("bad --size-limit '\(sizeLimit)'") }
    }

    func values() throws -> (Int64, Int64) {
        let parts = valueSize.components(separatedBy: "..")
        guard parts.count <= 2, let lo = parseBytes(parts[0]), let hi = parseBytes(parts.last!), lo >= 16, hi >= lo
        else { throw ValidationError("bad --value-size '\(valueSize)' (at least 16 bytes; a range is lo..hi)") }
        return (lo, hi)
    }

    func weights() throws -> [Int32] {
        let w = mix.split(separator: ":").compactMap { Int32($0) }
        guard w.count == 3, w.allSatisfy({ $0 >= 0 }), w.reduce(0, +) > 0 else {
            throw ValidationError("bad --mix '\(mix)' (get:put:remove, e.g. 90:9:1)")
        }
        return w
    }

    var durabilityCode: Int32 {
        switch durability {
        case "fast": return 1
        case "synced": return 2
        default: return 0
        }
    }

    /// The C settings (strings borrowed for the duration of `body`).
    func withConfig<R>(storeDir: String, httpURL: String?, _ body: (inout cstress_config) -> R) throws -> R {
        let (lo, hi) = try values()
        let w = try weights()
        return storeDir.withCString { dir in
            (httpURL ?? "").withCString { url in
                var c = cstress_config()
                c.store_dir = dir
                c.threads = Int32(threads)
                c.duration_s = parseSeconds(duration) ?? 0
                c.ops = ops
                c.entries = entries
                c.value_min = lo
                c.value_max = hi
                c.mix_get = w[0]
                c.mix_put = w[1]
                c.mix_remove = w[2]
                c.zipf = skew == "zipf" ? 1 : 0
                c.zipf_s = zipfS
                c.size_limit = sizeLimit.flatMap(parseBytes) ?? 0
                c.durability = durabilityCode
                c.expiry_s = expiry
                c.http_base_url = httpURL == nil ? nil : url
                c.seed = seed &* 1000 &+ UInt64(getpid())
                c.ack_fd = -1
                c.key_slot = Int32(chaosSlot)
                c.key_slots = Int32(chaosSlots)
                return body(&c)
            }
        }
    }

    /// Runs this process's share in C.
    func runShare(storeDir: String, httpURL: String?, progress: Bool) throws -> [String: Any] {
        var result = cstress_result()
        let ackFD: Int32 = ackFile.map { open($0, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600) } ?? -1
        defer { if ackFD >= 0 { close(ackFD) } }
        let rc: Int32 = try withConfig(storeDir: storeDir, httpURL: httpURL) { c in
            c.ack_fd = ackFD
            let callback: (@convention(c) (UnsafePointer<cstress_live>?, UnsafeMutableRawPointer?) -> Void)? =
                progress ? { live, _ in
                    guard let l = live?.pointee else { return }
                    let rate = l.elapsed_s > 0 ? Double(l.ops) / l.elapsed_s : 0
                    // The p99 of the last whole second ("-" during the first).
                    let p99 = l.last_get_p99 > 0 ? String(format: "%8.1f µs", Double(l.last_get_p99) / 1000) : "       - µs"
                    let line = String(format: "\r\u{1B}[K%6.1f s  %10.0f ops/s  get p99 %@  %lld errors",
                                      l.elapsed_s, rate, p99, l.errors)
                    FileHandle.standardError.write(Data(line.utf8))
                } : nil
            return cstress_run(&c, &result, callback, nil)
        }
        defer { cstress_result_free(&result) }
        if progress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        guard rc == 0 else {
            throw ValidationError("cannot run: \(resultObject(result)["first_error"] as? String ?? "")")
        }
        return resultObject(result)
    }

    func resultObject(_ r: cstress_result) -> [String: Any] {
        var series: [[String: Any]] = []
        for i in 0..<Int(r.nseconds) {
            let s = r.series[i]
            series.append(["second": i, "ops": s.ops, "gets": s.gets, "puts": s.puts, "removes": s.removes,
                           "hits": s.hits, "errors": s.errors,
                           "get_p50_ns": s.get_p50, "get_p99_ns": s.get_p99, "get_p999_ns": s.get_p999,
                           "get_max_ns": s.get_max, "put_p50_ns": s.put_p50, "put_p99_ns": s.put_p99,
                           "put_p999_ns": s.put_p999, "put_max_ns": s.put_max])
        }
        let firstError = withUnsafeBytes(of: r.first_error) { raw -> String in
            let bytes = raw.bindMemory(to: UInt8.self)
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return ["seconds": r.seconds, "ops": r.ops, "gets": r.gets, "puts": r.puts, "removes": r.removes,
                "hits": r.hits, "misses": r.misses, "errors": r.errors, "torn": r.torn, "evictions": r.evictions,
                "write_failures": r.write_failures, "file_bytes_start": r.file_bytes_start,
                "file_bytes_end": r.file_bytes_end, "rss_anon_max": r.rss_anon_max,
                "get_p50_ns": r.get_p50, "get_p99_ns": r.get_p99, "get_p999_ns": r.get_p999, "get_max_ns": r.get_max,
                "put_p50_ns": r.put_p50, "put_p99_ns": r.put_p99, "put_p999_ns": r.put_p999, "put_max_ns": r.put_max,
                "series": series, "first_error": firstError]
    }

    /// Sums the processes' results: counts and throughput add up, latencies are the worst process's.
    static func combine(_ parts: [[String: Any]]) -> [String: Any] {
        guard parts.count > 1 else { return parts.first ?? [:] }
        var out: [String: Any] = [:]
        func i(_ o: [String: Any], _ k: String) -> Int64 { (o[k] as? NSNumber)?.int64Value ?? 0 }
        for k in ["ops", "gets", "puts", "removes", "hits", "misses", "errors", "torn", "evictions", "write_failures"] {
            out[k] = parts.reduce(Int64(0)) { $0 + i($1, k) }
        }
        for k in ["get_p50_ns", "get_p99_ns", "get_p999_ns", "get_max_ns", "put_p50_ns", "put_p99_ns", "put_p999_ns",
                  "put_max_ns", "file_bytes_end", "rss_anon_max"] {
            out[k] = parts.map { i($0, k) }.max() ?? 0
        }
        out["file_bytes_start"] = parts.map { i($0, "file_bytes_start") }.min() ?? 0
        out["seconds"] = parts.map { ($0["seconds"] as? NSNumber)?.doubleValue ?? 0 }.max() ?? 0
        out["first_error"] = parts.compactMap { $0["first_error"] as? String }.first { !$0.isEmpty } ?? ""
        let seriesList = parts.map { $0["series"] as? [[String: Any]] ?? [] }
        let n = seriesList.map(\.count).max() ?? 0
        var series: [[String: Any]] = []
        for s in 0..<n {
            var row: [String: Any] = ["second": s]
            let rows = seriesList.compactMap { s < $0.count ? $0[s] : nil }
            for k in ["ops", "gets", "puts", "removes", "hits", "errors"] { row[k] = rows.reduce(Int64(0)) { $0 + i($1, k) } }
            for k in ["get_p50_ns", "get_p99_ns", "get_p999_ns", "get_max_ns", "put_p50_ns", "put_p99_ns", "put_p999_ns",
                      "put_max_ns"] {
                row[k] = rows.map { i($0, k) }.max() ?? 0
            }
            series.append(row)
        }
        out["series"] = series
        return out
    }

    func run() throws {
        if let workerResult {
            let object = try runShare(storeDir: store ?? "", httpURL: httpURL, progress: false)
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: workerResult))
            return
        }
        let fm = FileManager.default
        let storeDir = store ?? fm.temporaryDirectory.appendingPathComponent("courier-stress-\(getpid())").path
        try fm.createDirectory(atPath: storeDir, withIntermediateDirectories: true)
        defer { if store == nil { try? fm.removeItem(atPath: storeDir) } }
        let server = http ? try EmbeddedServer() : nil
        defer { server?.stop() }
        let tty = isatty(STDERR_FILENO) != 0
        if prefill {
            if tty { FileHandle.standardError.write(Data("prefilling \(entries) keys...".utf8)) }
            var error = [CChar](repeating: 0, count: 256)
            let rc = try withConfig(storeDir: storeDir, httpURL: nil) { c in cstress_prefill(&c, &error, error.count) }
            if tty { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            if rc != 0 {
                printError("error: \(String(cString: error))")
                throw ExitCode.failure
            }
        }
        let started = Date()
        var parts: [[String: Any]] = []
        var kills = 0
        var ackFiles: [String] = []
        if processes == 1 && !chaos {
            parts.append(try runShare(storeDir: storeDir, httpURL: server?.baseURL, progress: tty))
        } else {
            parts = try runWorkers(storeDir: storeDir, httpURL: server?.baseURL, tty: tty, started: started,
                                   kills: &kills, ackFiles: &ackFiles)
        }
        var result = Self.combine(parts)
        var lost: Int64 = 0, tornAcked: Int64 = 0
        if chaos {
            // Every write a worker acknowledged (its ack file) must be in the store, whole, as new.
            var checked: Int64 = 0
            var error = [CChar](repeating: 0, count: 256)
            let cPaths = ackFiles.map { strdup($0) }
            defer { cPaths.forEach { free($0) } }
            var pointers = cPaths.map { UnsafePointer<CChar>($0) }
            let rc = cstress_check_acks(storeDir, entries, &pointers, pointers.count, &checked, &lost, &tornAcked,
                                        &error, error.count)
            ackFiles.forEach { try? FileManager.default.removeItem(atPath: $0) }
            if rc != 0 {
                printError("error: cannot check the acknowledged writes: \(String(cString: error))")
                throw ExitCode.failure
            }
            result["chaos"] = ["kills": kills, "acknowledged_keys_checked": checked, "lost": lost,
                               "torn": tornAcked] as [String: Any]
        }
        // The integrity check, by a fresh engine after every worker closed its own.
        var configuration = Configuration()
        configuration.storeDirectory = storeDir
        let engine = try Engine(configuration: configuration)
        let report = try engine.cache.verify()
        engine.close()
        result["verify"] = report.jsonObject
        result["settings"] = settingsObject(storeDir: store)
        result["kind"] = "stress_cache"
        let errors = (result["errors"] as? NSNumber)?.int64Value ?? 0
        let torn = (result["torn"] as? NSNumber)?.int64Value ?? 0
        if json {
            let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
            writeOut(data + Data("\n".utf8))
        } else {
            printText(result, report: report)
        }
        if chaos && !json {
            print("chaos: \(kills) worker processes killed with SIGKILL and restarted; acknowledged writes lost: \(lost), "
                  + "torn: \(tornAcked)")
        }
        if errors > 0 || torn > 0 || !report.isConsistent || lost > 0 || tornAcked > 0 {
            if let first = result["first_error"] as? String, !first.isEmpty { printError("first error: \(first)") }
            printError("error: \(errors) errors, \(torn) torn values, verify \(report.isConsistent ? "clean" : "FAILED")")
            throw ExitCode.failure
        }
    }

    func settingsObject(storeDir: String?) -> [String: Any] {
        var s: [String: Any] = ["threads": threads, "processes": processes, "duration": duration, "ops": ops,
                                "entries": entries, "value_size": valueSize, "mix": mix, "skew": skew,
                                "durability": durability, "expiry": expiry, "http": http, "prefill": prefill, "chaos": chaos]
        if skew == "zipf" { s["zipf_s"] = zipfS }
        if let sizeLimit { s["size_limit"] = parseBytes(sizeLimit) ?? 0 }
        return s
    }

    /// One worker process: this executable again, in worker mode.
    final class Worker {
        let slot: Int
        let process = Process()
        let resultFile: String
        init(slot: Int, resultFile: String) {
            self.slot = slot
            self.resultFile = resultFile
        }
    }

    /// Starts the worker processes (this executable again), waits for them, reads their results.
    /// With --chaos, kills one with SIGKILL at random moments and starts it again for the rest of
    /// the run, each incarnation with an ack file of its own (returned in `ackFiles`).
    func runWorkers(storeDir: String, httpURL: String?, tty: Bool, started: Date, kills: inout Int,
                    ackFiles: inout [String]) throws -> [[String: Any]] {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var args = ["stress", "cache", "--threads", "\(threads)", "--processes", "1",
                    "--ops", "\(ops)", "--entries", "\(entries)", "--value-size", valueSize, "--mix", mix,
                    "--skew", skew, "--zipf-s", "\(zipfS)", "--durability", durability, "--expiry", "\(expiry)",
                    "--store", storeDir]
        if let sizeLimit { args += ["--size-limit", sizeLimit] }
        if let httpURL { args += ["--http-url", httpURL] }
        let total = parseSeconds(duration) ?? 0
        var generation = 0
        func launch(_ slot: Int) throws -> Worker {
            generation += 1
            let w = Worker(slot: slot, resultFile: storeDir + "/.stress-result-\(getpid())-\(slot)-\(generation).json")
            var a = args + ["--seed", "\(seed &+ UInt64(generation) &* 7919)", "--worker-result", w.resultFile]
            let left = chaos ? max(0.05, total - Date().timeIntervalSince(started)) : total
            a += ["--duration", chaos ? String(format: "%.3f", left) : duration]
            if chaos {
                let ack = storeDir + "/.stress-acks-\(getpid())-\(slot)-\(generation)"
                ackFiles.append(ack)
                a += ["--ack-file", ack, "--chaos-slot", "\(slot)", "--chaos-slots", "\(processes)"]
            }
            w.process.executableURL = exe
            w.process.arguments = a
            try w.process.run()
            return w
        }
        var running = try (0..<processes).map { try launch($0) }
        var finished: [Worker] = []
        var rng = SystemRandomNumberGenerator()
        var nextKill = Date().addingTimeInterval(Double.random(in: 0.2...0.8, using: &rng))
        while running.contains(where: { $0.process.isRunning }) {
            if tty {
                let line = String(format: "\r\u{1B}[K%6.1f s  %d processes running%@", Date().timeIntervalSince(started),
                                  running.filter { $0.process.isRunning }.count, chaos ? ", \(kills) killed" : "")
                FileHandle.standardError.write(Data(line.utf8))
            }
            usleep(50_000)
            if chaos, Date() >= nextKill, Date().timeIntervalSince(started) < total - 0.3,
               let i = running.indices.filter({ running[$0].process.isRunning }).randomElement(using: &rng) {
                let victim = running[i]
                kill(victim.process.processIdentifier, SIGKILL)
                victim.process.waitUntilExit()
                kills += 1
                try? FileManager.default.removeItem(atPath: victim.resultFile)
                running[i] = try launch(victim.slot)
                nextKill = Date().addingTimeInterval(Double.random(in: 0.2...0.8, using: &rng))
            }
        }
        finished += running
        if tty { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        var parts: [[String: Any]] = []
        for w in finished {
            defer { try? FileManager.default.removeItem(atPath: w.resultFile) }
            guard w.process.terminationStatus == 0, let data = FileManager.default.contents(atPath: w.resultFile),
                  let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw ValidationError("worker process \(w.process.processIdentifier) failed (status \(w.process.terminationStatus))")
            }
            parts.append(object)
        }
        return parts
    }

    func printText(_ r: [String: Any], report: CacheVerifyReport) {
        func i(_ k: String) -> Int64 { (r[k] as? NSNumber)?.int64Value ?? 0 }
        func us(_ ns: Any?) -> String { String(format: "%8.1f", Double((ns as? NSNumber)?.int64Value ?? 0) / 1000) }
        let seconds = (r["seconds"] as? NSNumber)?.doubleValue ?? 0
        print("stress cache: \(threads) thread(s) x \(processes) process(es), \(entries) keys, values \(valueSize), "
              + "mix \(mix), \(skew), \(durability)\(http ? ", whole request path" : "")")
        print(String(format: "totals: %lld ops in %.2f s (%.0f ops/s): %lld gets (%lld hits, %lld misses), %lld puts, "
                     + "%lld removes", i("ops"), seconds, seconds > 0 ? Double(i("ops")) / seconds : 0, i("gets"),
                     i("hits"), i("misses"), i("puts"), i("removes")))
        print("latency µs      p50      p99    p99.9      max")
        print("  get     \(us(r["get_p50_ns"])) \(us(r["get_p99_ns"])) \(us(r["get_p999_ns"])) \(us(r["get_max_ns"]))")
        print("  put     \(us(r["put_p50_ns"])) \(us(r["put_p99_ns"])) \(us(r["put_p999_ns"])) \(us(r["put_max_ns"]))")
        print("per second:  ops/s   get p50   get p99 get p99.9   get max   put p50   put p99 put p99.9   put max  errors")
        for s in r["series"] as? [[String: Any]] ?? [] {
            let n = (s["ops"] as? NSNumber)?.int64Value ?? 0
            print(String(format: "%4d %12lld", (s["second"] as? NSNumber)?.intValue ?? 0, n)
                  + " \(us(s["get_p50_ns"]))  \(us(s["get_p99_ns"]))  \(us(s["get_p999_ns"]))  \(us(s["get_max_ns"]))"
                  + "  \(us(s["put_p50_ns"]))  \(us(s["put_p99_ns"]))  \(us(s["put_p999_ns"]))  \(us(s["put_max_ns"]))"
                  + String(format: "  %6lld", (s["errors"] as? NSNumber)?.int64Value ?? 0))
        }
        print("evictions: \(i("evictions")), writes dropped: \(i("write_failures")); data.mdb \(i("file_bytes_start")) -> "
              + "\(i("file_bytes_end")) bytes; private memory at most \(i("rss_anon_max") >> 20) MiB")
        print("errors: \(i("errors")) (torn values: \(i("torn")))")
        print("verify: " + report.summary)
    }
}
