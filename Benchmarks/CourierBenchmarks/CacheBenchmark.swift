// CacheBenchmark.swift — `courier bench cache`: 32-byte keys and 1 KiB bodies; puts/s and gets/s
// (hits, 1 and 2 threads) for raw LMDB (the ceiling, same sizes and durability, in the same run),
// the Courier C cache API, the Swift facade and Foundation's URLCache; medians of several runs;
// and how get latency changes from 10,000 to 1,000,000 entries.

import CBench
import Courier
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

public enum CacheBenchmark {
    public struct Options: Sendable {
        /// Entries loaded before the gets (all put one commit at a time, timed, under the fast setting).
        public var entries = 100_000
        /// Single-put commits timed under the cache's default (durable) setting.
        public var durablePuts = 2_000
        /// Gets per thread per measurement.
        public var gets = 200_000
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

    struct SwiftFigures {
        var putOps = 0.0
        var getOps = 0.0
        var getOps2 = 0.0
        var errors = 0
    }

    static func swiftRun(dir: String, entries: Int, gets: Int, durability: CacheDurability) throws -> SwiftFigures {
        var configuration = Configuration()
        configuration.storeDirectory = dir
        let engine = try Engine(configuration: configuration.cacheDurability(durability)
            .cacheMaxBytes(Int64(entries + 1000) * 2048 + (64 << 20)))
        defer { engine.close() }
        let writer = engine.cache
        var figures = SwiftFigures()
        let keys = (0..<entries).map(key)
        let bodies = (0..<26).map(body)
        let headers: HTTPHeaders = [("Content-Type", "application/octet-stream")]
        let t0 = DispatchTime.now().uptimeNanoseconds
        for i in 0..<entries {
            do { try writer.put(key: keys[i], headers: headers, body: bodies[i % 26], expiry: 3600) } catch { figures.errors += 1 }
        }
        figures.putOps = Double(entries) / (Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
        engine.close()
        guard gets > 0 else { return figures }
        // Reads under the cache's default (durable) setting, whatever the puts used.
        let reader = try Engine(configuration: configuration.cacheMaxBytes(Int64(entries + 1000) * 2048 + (64 << 20)))
        defer { reader.close() }
        let cache = reader.cache
        func getLoop(seed: UInt64) -> (Double, Int) {
            var s = seed
            var errors = 0
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<gets {
                s = s &* 6364136223846793005 &+ 1442695040888963407
                let i = Int((s >> 33) % UInt64(entries))
                if (try? cache.get(key: keys[i]))??.body.count != 1024 { errors += 1 }
            }
            return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, errors)
        }
        let (one, e1) = getLoop(seed: 12345)
        figures.getOps = Double(gets) / one
        figures.errors += e1
        let results = Locked2<[(Double, Int)]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { t in
            let r = getLoop(seed: UInt64(777 + t))
            results.mutate { $0.append(r) }
        }
        let wall = results.get().map(\.0).max() ?? 1
        figures.getOps2 = Double(2 * gets) / wall
        figures.errors += results.get().map(\.1).reduce(0, +)
        return figures
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
        let steps = Double(options.runs * 6 + 1 + options.latencySizes.count)
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
            var r = cbench_cache_result()
            phase("run \(run): raw LMDB, \(options.entries) entries")
            _ = cbench_cache_raw(fresh(), options.entries, options.entries, options.gets, fast, &r)
            add("raw_put_nosync_ops", r.put_ops); add("raw_get_ops", r.get_ops); add("raw_get_ops_2t", r.get_ops_2t)
            add("raw_get_ns_p50", r.get_ns_p50); errors += r.errors
            phase("run \(run): raw LMDB, durable puts")
            _ = cbench_cache_raw(fresh(), options.durablePuts, options.durablePuts, 0, durable, &r)
            add("raw_put_ops", r.put_ops); errors += r.errors
            phase("run \(run): Courier C, \(options.entries) entries")
            _ = cbench_cache_courier(fresh(), options.entries, options.entries, options.gets, fast, &r)
            add("courier_put_nosync_ops", r.put_ops); add("courier_get_ops", r.get_ops)
            add("courier_get_ops_2t", r.get_ops_2t); add("courier_get_ns_p50", r.get_ns_p50); errors += r.errors
            phase("run \(run): Courier C, durable puts")
            _ = cbench_cache_courier(fresh(), options.durablePuts, options.durablePuts, 0, durable, &r)
            add("courier_put_ops", r.put_ops); errors += r.errors
            phase("run \(run): Swift, \(options.entries) entries")
            let sw = try swiftRun(dir: fresh(), entries: options.entries, gets: options.gets, durability: .fast)
            add("swift_put_nosync_ops", sw.putOps); add("swift_get_ops", sw.getOps); add("swift_get_ops_2t", sw.getOps2)
            errors += sw.errors
            phase("run \(run): Swift, durable puts")
            let sd = try swiftRun(dir: fresh(), entries: options.durablePuts, gets: 0, durability: .durable)
            add("swift_put_ops", sd.putOps); errors += sd.errors
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
