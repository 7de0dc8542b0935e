// CacheBenchmark.swift — `courier bench cache`: 32-byte keys and 1 KiB bodies; puts/s and gets/s
// (hits, 1 and 2 threads) for raw LMDB (the ceiling, same sizes and durability, in the same run),
// the Courier C cache API, the Swift facade and Foundation's URLCache; medians of several runs;
// and how get latency changes from 10,000 to 1,000,000 entries.
//
// Puts: `*_put_ops` are single-put commits under the no-sync setting (COURIER_CACHE_FAST,
// MDB_NOSYNC), the setting comparable with URLCache, which never syncs; `*_put_durable_ops` under
// the cache's default durable setting (MDB_NOMETASYNC, one fdatasync per commit). Raw LMDB always
// uses the same flags as the Courier figure it is compared with.
//
// The gets of raw LMDB (copying the value out, and not copying it), Courier C and Swift are
// measured side by side: each store is loaded, then all are opened and small chunks of gets
// alternate between them (the order rotating), each kind summing its wall and CPU time. On a shared
// machine the load drifts from second to second; measured in separate phases, they would be
// compared on different machines.

import CBench
import Courier
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

public enum CacheBenchmark {
    public struct Options: Sendable {
        /// Entries loaded before the gets (all put one commit at a time, timed, under the no-sync setting).
        public var entries = 100_000
        /// Single-put commits timed under the cache's default (durable) setting.
        public var durablePuts = 2_000
        /// Also time raw LMDB puts in a scattered key order (as hashed keys land).
        public var scatteredPuts = true
        /// Gets per thread per measurement.
        public var gets = 200_000
        /// Chunks the gets of each kind are split into, alternating between the kinds.
        public var chunks = 20
        /// Runs; medians are reported.
        public var runs = 3
        /// URLCache: entries stored (and then looked up), once.
        public var urlCacheEntries = 1_000
        /// URLCache lookups.
        public var urlCacheGets = 300
        /// Entry counts of the latency table.
        public var latencySizes = [10_000, 100_000, 1_000_000]
        /// Where the stores go (a temporary directory by default).
        public var directory: String?
        public init() {}
    }

    /// One figure per key, medians over the runs.
    public struct Report: Sendable {
        public var figures: [String: Double] = [:]
        public var latency: [(entries: Int, courierNs: Double, rawNs: Double, courierGetOps: Double)] = []
    }

    /// Progress: a fraction 0...1 and what is running.
    public typealias Progress = @Sendable (Double, String) -> Void

    static func median(_ values: [Double]) -> Double {
        let s = values.sorted()
        guard !s.isEmpty else { return 0 }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func key(_ i: Int) -> String {
        var buffer = [CChar](repeating: 0, count: 33)
        cbench_cache_key(i, &buffer)
        return String(cString: buffer)
    }

    static func body(_ i: Int) -> Data {
        Data((0..<1024).map { UInt8(ascii: "a") + UInt8((i + $0) % 26) })
    }

    // MARK: The Swift facade

    /// The Swift facade's side of the side-by-side puts: an engine on its own store, one `put` (one
    /// commit) per key.
    final class SwiftWriter {
        let engine: Engine
        let cache: Cache
        let bodies = (0..<26).map(CacheBenchmark.body)
        let headers: HTTPHeaders = [("Content-Type", "application/octet-stream")]

        init(dir: String, capacity: Int, durability: CacheDurability) throws {
            var configuration = Configuration()
            configuration.storeDirectory = dir
            configuration.cacheDurability = durability
            configuration.cacheMaxBytes = Int64(capacity + 1000) * 2048 + (64 << 20)
            engine = try Engine(configuration: configuration)
            cache = engine.cache
        }

        deinit { engine.close() }

        /// Puts keys from..<from+n; adds wall and CPU seconds; returns failures.
        func puts(from: Int, _ n: Int, wall: inout Double, cpu: inout Double) -> Int {
            let keys = (from..<from + n).map(CacheBenchmark.key)
            var errors = 0
            let c0 = cbench_thread_cpu_seconds(), t0 = DispatchTime.now().uptimeNanoseconds
            for (offset, key) in keys.enumerated() {
                do { try cache.put(key: key, headers: headers, body: bodies[(from + offset) % 26], expiry: 3600) } catch {
                    errors += 1
                }
            }
            wall += Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            cpu += cbench_thread_cpu_seconds() - c0
            return errors
        }
    }

    /// Single-put commits of raw LMDB (keys in order, and scattered), Courier C and Swift in
    /// alternating chunks (the order rotating), each into its own store: puts/s (wall) and CPU ns per
    /// put, under `suffix` ("" no-sync, "_durable"). The stores in `dirs` (raw, courier, swift) keep
    /// their entries for the gets.
    static func putsSideBySide(dirs: [String], scatteredDir: String?, count: Int, chunks: Int, durability: Int32,
                               swiftDurability: CacheDurability, suffix: String, add: (String, Double) -> Void) throws -> Int {
        var names = ["raw", "courier", "swift"]
        var writers: [OpaquePointer?] = [
            cbench_cache_writer_open(Int32(CBENCH_CACHE_RAW), dirs[0], count, durability, 0),
            cbench_cache_writer_open(Int32(CBENCH_CACHE_COURIER), dirs[1], count, durability, 0),
            nil,
        ]
        defer { for w in writers { cbench_cache_writer_close(w) } }
        guard writers[0] != nil, writers[1] != nil else { throw CourierError(.store, message: "cannot open the stores") }
        let swift = try SwiftWriter(dir: dirs[2], capacity: count, durability: swiftDurability)
        if let scatteredDir {
            guard let w = cbench_cache_writer_open(Int32(CBENCH_CACHE_RAW), scatteredDir, count, durability, 1) else {
                throw CourierError(.store, message: "cannot open the raw store")
            }
            writers.append(w)
            names.append("raw_scattered")
        }
        var wall = [Double](repeating: 0, count: names.count), cpu = wall
        var errors = 0
        let chunks = max(1, min(chunks, count))
        for i in 0..<chunks {
            let from = count * i / chunks, n = count * (i + 1) / chunks - from
            for k in names.indices {
                let kind = (i + k) % names.count // the order rotates
                if kind == 2 {
                    errors += swift.puts(from: from, n, wall: &wall[kind], cpu: &cpu[kind])
                } else {
                    errors += cbench_cache_writer_puts(writers[kind], from, n, &wall[kind], &cpu[kind])
                }
            }
        }
        for (kind, name) in names.enumerated() {
            add("\(name)_put\(suffix)_ops", wall[kind] > 0 ? Double(count) / wall[kind] : 0)
            add("\(name)_put\(suffix)_cpu_ns", cpu[kind] / Double(count) * 1e9)
        }
        return errors
    }

    /// The Swift facade's side of the side-by-side gets: an engine on a loaded store.
    final class SwiftReader: @unchecked Sendable { // used by one chunk at a time
        let engine: Engine
        let cache: Cache
        let entries: Int

        init(dir: String, entries: Int) throws {
            var configuration = Configuration()
            configuration.storeDirectory = dir
            configuration.cacheMaxBytes = Int64(entries + 1000) * 2048 + (64 << 20)
            engine = try Engine(configuration: configuration)
            cache = engine.cache
            self.entries = entries
        }

        deinit { engine.close() }

        /// `n` random hits on each of `threads` threads; adds wall and CPU seconds; returns failures.
        func gets(_ n: Int, threads: Int, seed: UInt64, wall: inout Double, cpu: inout Double) -> Int {
            let results = Locked2<[(cpu: Double, errors: Int)]>([])
            let start = DispatchTime.now().uptimeNanoseconds
            let run: @Sendable (Int) -> Void = { [self] t in
                let c0 = cbench_thread_cpu_seconds()
                var s = seed &+ 7919 &* UInt64(t)
                var errors = 0
                let count = UInt64(entries)
                // The key of each get is made as the C reader makes it: cbench_cache_key writes it,
                // here straight into a new String's storage (the one allocation a String key of 32
                // bytes needs; no C buffer, strlen and copy first). Reading it from a table of
                // `entries` Strings would cost two cache misses a get (the table's slot and the
                // String's storage) that neither the C reader nor raw LMDB pays, and the ratio
                // measured the table, not the facade.
                for _ in 0..<n {
                    s = s &* 6364136223846793005 &+ 1442695040888963407
                    let index = Int(truncatingIfNeeded: (s >> 33) % count)
                    let key = String(unsafeUninitializedCapacity: 33) { b in
                        b.withMemoryRebound(to: CChar.self) { cbench_cache_key(index, $0.baseAddress) }
                        return 32 // the NUL after the 32 characters is not part of the String
                    }
                    if (try? cache.get(key: key))??.body.count != 1024 { errors += 1 }
                }
                let used = cbench_thread_cpu_seconds() - c0
                results.mutate { $0.append((used, errors)) }
            }
            if threads == 1 { run(0) } else { DispatchQueue.concurrentPerform(iterations: threads, execute: run) }
            wall += Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            let all = results.get()
            cpu += all.map(\.cpu).reduce(0, +)
            return all.map(\.errors).reduce(0, +)
        }
    }

    /// Gets of raw LMDB (copying, and not copying, the value), Courier C and Swift in alternating
    /// chunks (after one untimed chunk each): gets/s (wall) and CPU ns per get, 1 and 2 threads, and
    /// the median single-get latency.
    static func sideBySide(raw rawDir: String, courier courierDir: String, swift swiftDir: String, entries: Int,
                           gets: Int, chunks: Int, add: (String, Double) -> Void) throws -> Int {
        guard let raw = cbench_cache_reader_open(Int32(CBENCH_CACHE_RAW), rawDir, entries) else {
            throw CourierError(.store, message: "cannot open the raw LMDB store")
        }
        defer { cbench_cache_reader_close(raw) }
        guard let courier = cbench_cache_reader_open(Int32(CBENCH_CACHE_COURIER), courierDir, entries) else {
            throw CourierError(.store, message: "cannot open the Courier store")
        }
        defer { cbench_cache_reader_close(courier) }
        let swift = try SwiftReader(dir: swiftDir, entries: entries)
        let per = max(1, gets / max(1, chunks))
        var errors = 0
        let names = ["raw", "courier", "swift", "raw_nocopy"]
        for threads in [1, 2] {
            var wall = [Double](repeating: 0, count: names.count), cpu = wall
            func chunk(_ kind: Int, _ n: Int, _ seed: UInt64, timed: Bool) {
                var w = 0.0, c = 0.0
                switch kind {
                case 0, 3:
                    cbench_cache_reader_set_nocopy(raw, kind == 3 ? 1 : 0)
                    errors += cbench_cache_reader_gets(raw, n, Int32(threads), seed, &w, &c)
                case 1: errors += cbench_cache_reader_gets(courier, n, Int32(threads), seed, &w, &c)
                default: errors += swift.gets(n, threads: threads, seed: seed, wall: &w, cpu: &c)
                }
                if timed {
                    wall[kind] += w
                    cpu[kind] += c
                }
            }
            for kind in names.indices { chunk(kind, per, 1, timed: false) } // pages mapped, caches warm
            for i in 0..<chunks {
                let seed = UInt64(1000 * threads + i)
                for k in names.indices { chunk((i + k) % names.count, per, seed, timed: true) } // the order rotates
            }
            let suffix = threads == 1 ? "" : "_2t"
            let total = Double(per * chunks * threads)
            for (kind, name) in names.enumerated() {
                add("\(name)_get_ops\(suffix)", total / wall[kind])
                add("\(name)_get_cpu_ns\(suffix)", cpu[kind] / total * 1e9)
            }
        }
        cbench_cache_reader_set_nocopy(raw, 0)
        add("raw_get_ns_p50", cbench_cache_reader_p50(raw, 20001, 4242))
        add("courier_get_ns_p50", cbench_cache_reader_p50(courier, 20001, 4242))
        return errors
    }

    // MARK: URLCache

    static func urlCacheRun(dir: String, entries: Int, gets: Int, progress: (Double) -> Void) -> (put: Double, get: Double) {
        let directory = URL(fileURLWithPath: dir, isDirectory: true)
        let cache = URLCache(memoryCapacity: 0, diskCapacity: 1 << 30, diskPath: directory.path)
        let bodies = (0..<26).map(body)
        func request(_ i: Int) -> URLRequest { URLRequest(url: URL(string: "http://bench.invalid/\(key(i))")!) }
        let t0 = Date()
        for i in 0..<entries {
            let req = request(i)
            let resp = HTTPURLResponse(url: req.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Content-Type": "application/octet-stream", "Cache-Control": "max-age=3600"])!
            cache.storeCachedResponse(CachedURLResponse(response: resp, data: bodies[i % 26]), for: req)
            if i % 10 == 0 { progress(Double(i) / Double(entries + gets)) }
        }
        let put = Double(entries) / Date().timeIntervalSince(t0)
        var s: UInt64 = 12345
        let t1 = Date()
        for n in 0..<gets {
            s = s &* 6364136223846793005 &+ 1442695040888963407
            _ = cache.cachedResponse(for: request(Int((s >> 33) % UInt64(entries))))
            if n % 10 == 0 { progress(Double(entries + n) / Double(entries + gets)) }
        }
        let get = Double(gets) / Date().timeIntervalSince(t1)
        return (put, get)
    }

    // MARK: Running

    public static func run(_ options: Options, progress: Progress) throws -> Report {
        let base = options.directory ?? (NSTemporaryDirectory() + "courier-bench-cache-" + UUID().uuidString)
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { if options.directory == nil { try? FileManager.default.removeItem(atPath: base) } }
        var samples: [String: [Double]] = [:]
        func add(_ key: String, _ value: Double) { samples[key, default: []].append(value) }
        let steps = Double(options.runs * 3 + 1 + options.latencySizes.count)
        var step = 0.0
        func phase(_ what: String) {
            progress(step / steps, what)
            step += 1
        }
        var n = 0
        func fresh() -> String {
            n += 1
            return base + "/s\(n)"
        }
        let fast = Int32(COURIER_CACHE_FAST_VALUE), durable = Int32(COURIER_CACHE_DURABLE_VALUE)
        var errors = 0
        for run in 1...options.runs {
            let rawDir = fresh(), courierDir = fresh(), swiftDir = fresh()
            phase("run \(run): puts side by side, no-sync (raw, raw scattered, C, Swift)")
            let scattered = options.scatteredPuts ? fresh() : nil
            errors += try putsSideBySide(dirs: [rawDir, courierDir, swiftDir], scatteredDir: scattered, count: options.entries,
                                         chunks: options.chunks, durability: fast, swiftDurability: .fast, suffix: "",
                                         add: add)
            if let scattered { try? FileManager.default.removeItem(atPath: scattered) }
            phase("run \(run): puts side by side, durable (raw, C, Swift)")
            let durableDirs = [fresh(), fresh(), fresh()]
            errors += try putsSideBySide(dirs: durableDirs, scatteredDir: nil, count: options.durablePuts,
                                         chunks: options.chunks, durability: durable, swiftDurability: .durable,
                                         suffix: "_durable", add: add)
            for dir in durableDirs { try? FileManager.default.removeItem(atPath: dir) }
            if options.gets > 0 {
                phase("run \(run): gets side by side (raw, C, Swift)")
                errors += try sideBySide(raw: rawDir, courier: courierDir, swift: swiftDir, entries: options.entries,
                                         gets: options.gets, chunks: options.chunks, add: add)
            }
        }
        phase("URLCache, \(options.urlCacheEntries) entries")
        let at = step - 1
        let u = urlCacheRun(dir: fresh(), entries: options.urlCacheEntries, gets: options.urlCacheGets) { f in
            progress((at + f) / steps, "URLCache, \(options.urlCacheEntries) entries")
        }
        add("urlcache_put_ops", u.put)
        add("urlcache_get_ops", u.get)
        var report = Report()
        for size in options.latencySizes {
            phase("latency at \(size) entries")
            var c = cbench_cache_result(), raw = cbench_cache_result()
            _ = cbench_cache_courier(fresh(), size, 0, min(options.gets, 100_000), fast, &c)
            _ = cbench_cache_raw(fresh(), size, 0, min(options.gets, 100_000), fast, &raw)
            errors += c.errors + raw.errors
            report.latency.append((size, c.get_ns_p50, raw.get_ns_p50, c.get_ops))
        }
        progress(1, "done")
        for (k, v) in samples { report.figures[k] = median(v) }
        report.figures["errors"] = Double(errors)
        report.figures["entries"] = Double(options.entries)
        report.figures["runs"] = Double(options.runs)
        return report
    }
}

let COURIER_CACHE_FAST_VALUE = 1
let COURIER_CACHE_DURABLE_VALUE = 0

final class Locked2<Value>: @unchecked Sendable { // guarded by lock
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&value) } }
}
