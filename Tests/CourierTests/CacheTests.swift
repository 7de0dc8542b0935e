// CacheTests.swift — the cache through the Swift facade: policies on requests, from-cache
// responses without network traffic, keys, the manager (sync and async), expiry on an injected
// clock, the HTTP policy's revalidation, and a user-defined policy as a Swift protocol.

import Courier
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class CacheTests: LoopbackTestCase {
    let offset = Locked<TimeInterval>(0)

    override func configuration() -> Configuration {
        var configuration = super.configuration()
        configuration.storeDirectory = NSTemporaryDirectory() + "courier-cache-tests-" + UUID().uuidString
        let offset = self.offset
        configuration.clock = { Date().addingTimeInterval(offset.get()) }
        return configuration
    }

    override func tearDown() {
        let dir = engine?.storeDirectory
        super.tearDown()
        if let dir { try? FileManager.default.removeItem(atPath: dir) }
    }

    func testCacheFirstAnswersWithoutTheNetwork() async throws {
        let request = Request.get("/cache").parameter("body", "hello").cachePolicy(.cacheFirst)
        let first = try await engine.send(request)
        XCTAssertFalse(first.fromCache)
        XCTAssertEqual(first.cacheStatus, .network)
        let second = try await engine.send(request)
        XCTAssertTrue(second.fromCache)
        XCTAssertEqual(second.cacheStatus, .hit)
        XCTAssertEqual(second.text, "hello")
        XCTAssertEqual(second.status, 200)
        XCTAssertNotNil(second.cacheExpires)
        XCTAssertEqual(server.count("/cache"), 1)

        let stats = try engine.cache.stats()
        XCTAssertEqual(stats.hits, 1)
        XCTAssertEqual(stats.writes, 1)
        XCTAssertEqual(stats.count, 1)
    }

    func testWriteOnlyRefreshesWhatCacheFirstShows() async throws {
        let path = Request.get("/cache").parameter("body", "v")
        _ = try await engine.send(path.cachePolicy(.writeOnly))
        _ = try await engine.send(path.cachePolicy(.writeOnly))
        XCTAssertEqual(server.count("/cache"), 2)
        let cached = try await engine.send(path.cachePolicy(.cacheFirst))
        XCTAssertTrue(cached.fromCache)
        XCTAssertEqual(server.count("/cache"), 2)
    }

    func testKeysAreCanonicalAndFiltered() throws {
        let a = Request.get("/cache").parameter("b", "2").parameter("a", "1").parameter("ts", "9").cacheKeyFilter("ts")
        let b = Request.get("/cache?a=1").parameter("b", "2").parameter("ts", "10").cacheKeyFilter("ts")
        XCTAssertEqual(try engine.cache.key(for: a), "GET \(server.baseURL)/cache?a=1&b=2")
        XCTAssertEqual(try engine.cache.key(for: a), try engine.cache.key(for: b))
        let alice = Request.get("/cache").cacheSensitiveData("alice")
        let bob = Request.get("/cache").cacheSensitiveData("bob")
        XCTAssertNotEqual(try engine.cache.key(for: alice), try engine.cache.key(for: bob))
        XCTAssertEqual(try engine.cache.key(for: Request.get("/x").cacheKey("mine")), "mine")
    }

    /// One API shape: the manager's calls read the same in an async closure as in synchronous code,
    /// with no `await` (when async overloads stood beside them, the async one was picked there and
    /// this did not compile).
    func testManagerCallsAreOneShapeInAsyncCode() async throws {
        try engine.cache.put(key: "shape", body: Data("x".utf8), expiry: 60)
        let engine: Engine = self.engine
        let inClosure: @Sendable () async throws -> (Int64, Int64, Bool) = {
            let size = try engine.cache.size()
            let stats = try engine.cache.stats()
            let has = try engine.cache.has(.get("/cache"))
            return (size.count, stats.count, has)
        }
        let (count, statsCount, has) = try await inClosure()
        XCTAssertEqual(count, 1)
        XCTAssertEqual(statsCount, 1)
        XCTAssertFalse(has)
        XCTAssertEqual(try engine.cache.removeAll(), 1)
    }

    func testManagerByRequestAndKey() async throws {
        let request = Request.get("/cache").parameter("body", "m").cachePolicy(.cacheFirst)
        _ = try await engine.send(request)
        let hasAsync = try engine.cache.has(request)
        XCTAssertTrue(hasAsync)
        let gotAsync = try engine.cache.get(request)
        let got = try XCTUnwrap(gotAsync)
        XCTAssertEqual(got.text, "m")
        XCTAssertTrue(got.fromCache)

        try engine.cache.put(key: "manual", headers: [("X-A", "1")], body: Data("hand made".utf8), expiry: 60)
        let manual = try XCTUnwrap(try engine.cache.get(key: "manual"))
        XCTAssertEqual(manual.text, "hand made")
        XCTAssertEqual(manual.header("x-a"), "1")
        // Several headers (one value empty, one not ASCII) come back in order, body unchanged.
        let lines: HTTPHeaders = [("X-A", "1"), ("X-Empty", ""), ("X-Text", "größe ✓"), ("X-A", "2")]
        try engine.cache.put(key: "several", headers: lines, body: Data([0, 1, 2, 255]))
        let several = try XCTUnwrap(try engine.cache.get(key: "several"))
        XCTAssertEqual(several.headers, lines)
        XCTAssertEqual(several.body, Data([0, 1, 2, 255]))
        XCTAssertTrue(try engine.cache.remove(key: "several"))

        let entries = try engine.cache.entries()
        XCTAssertEqual(entries.count, 2)
        let requestKey = try engine.cache.key(for: request)
        XCTAssertEqual(Set(entries.map(\.key)), ["manual", requestKey])
        let size = try engine.cache.size()
        XCTAssertEqual(size.count, 2)
        XCTAssertEqual(size.bytes, entries.reduce(0) { $0 + $1.size })

        XCTAssertTrue(try engine.cache.remove(key: "manual"))
        XCTAssertFalse(try engine.cache.remove(key: "manual"))
        let removed = try engine.cache.remove(request)
        XCTAssertTrue(removed)
        let gone = try engine.cache.get(request)
        XCTAssertNil(gone)
    }

    /// A cached response's parts (body, headers, cache marks) read the same through copies of the
    /// response and of its body, for as long as any of them lives, at every body size: empty,
    /// around what a `Data` keeps inline (14 bytes: `Data(bytesNoCopy:)` then copies and calls its
    /// deallocator at once), small, 4 KiB and large.
    func testCachedResponsesReadTheSameAtEveryBodySize() throws {
        let lines: HTTPHeaders = [("Content-Type", "application/json"), ("X-A", "1"), ("X-A", "2")]
        let small = Data(#"{"n":7,"s":"x"}"#.utf8)
        let large = Data((0..<200_000).map { UInt8($0 % 251) })
        try engine.cache.put(key: "empty", status: 204, headers: lines, body: Data(), expiry: 60)
        try engine.cache.put(key: "small", headers: lines, body: small, expiry: 60)
        try engine.cache.put(key: "large", headers: lines, body: large, expiry: 60)
        // Every size around what a Data keeps inline, and past a page: each reads its own bytes and
        // the C response's parts.
        var cases = [("empty", Data()), ("small", small), ("large", large)]
        for size in [1, 13, 14, 15, 16, 31, 32, 33, 100, 1024, 4095, 4096, 4097, 5000] {
            let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) })
            try engine.cache.put(key: "size-\(size)", headers: lines, body: bytes, expiry: 60)
            cases.append(("size-\(size)", bytes))
        }
        for (key, body) in cases {
            var kept: Response?
            var keptBody: Data?
            do {
                let got = try XCTUnwrap(try engine.cache.get(key: key))
                XCTAssertEqual(got.body, body, key)
                XCTAssertEqual(got.headers.filter { $0.name != "Age" }, lines, key)
                XCTAssertEqual(got.header("x-a"), "1", key)
                XCTAssertEqual(got.status, key == "empty" ? 204 : 200, key)
                XCTAssertTrue(got.fromCache, key)
                XCTAssertEqual(got.cacheStatus, .hit, key)
                XCTAssertEqual(got.cacheKey, key, key)
                XCTAssertNotNil(got.cacheExpires, key)
                XCTAssertEqual(got, got, key)
                kept = got
                keptBody = got.body
            }
            // The response's copy and the body's copy each keep the C response.
            let response = try XCTUnwrap(kept)
            kept = nil
            XCTAssertEqual(response.cacheKey, key, key)
            XCTAssertEqual(response.headers.filter { $0.name != "Age" }, lines, key)
            XCTAssertEqual(response.body, body, key)
            XCTAssertEqual(keptBody, body, key)
        }
        // The body alone, after every response value is gone; then a mutated copy (its own bytes).
        var body = try XCTUnwrap(try engine.cache.get(key: "large")).body
        XCTAssertEqual(body, large)
        body.append(1)
        XCTAssertEqual(body.count, large.count + 1)
        XCTAssertEqual(body.prefix(large.count), large)
        // Mutating a copy of the body while the response lives leaves the response's bytes alone.
        let response = try XCTUnwrap(try engine.cache.get(key: "small"))
        var copy = response.body
        copy[0] = UInt8(ascii: "[")
        XCTAssertEqual(response.body, small)
        XCTAssertEqual(response.text, #"{"n":7,"s":"x"}"#)
        // A JSON view into the C response's document outlives the response that made it.
        var json: JSON?
        do { json = try XCTUnwrap(try engine.cache.get(key: "small")).json }
        XCTAssertEqual(json?["n"]?.int, 7)
        XCTAssertEqual(json?["s"]?.string, "x")
        // The interceptor's comparison and equality see one C response behind copies.
        let a = try XCTUnwrap(try engine.cache.get(key: "small"))
        let b = a
        XCTAssertEqual(a, b)
    }

    #if os(Linux)
    /// Every cached response is freed with its last value: 400 gets (200 of a 256 KiB body, 200 of
    /// an empty one), each dropped, leave the resident size about where it was (a leak of the large
    /// ones would keep 50 MiB).
    func testCachedResponsesAreFreedWithTheirLastValue() throws {
        let body = Data(repeating: 7, count: 256 * 1024)
        try engine.cache.put(key: "big", body: body, expiry: 60)
        try engine.cache.put(key: "none", body: Data(), expiry: 60)
        func heap() -> Int { // resident bytes, from /proc/self/statm (pages)
            let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
            let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        }
        for _ in 0..<20 { _ = try engine.cache.get(key: "big")?.body.count } // warm
        let before = heap()
        for i in 0..<400 {
            let response = try XCTUnwrap(try engine.cache.get(key: i % 2 == 0 ? "big" : "none"))
            if i % 4 == 0 {
                let kept = response.body // the body outlives the response, then goes
                XCTAssertEqual(kept.count, body.count)
            }
            _ = response.json // a JSON view's own reference (nil: not JSON) is dropped too
        }
        XCTAssertLessThan(heap() - before, 16 * 1024 * 1024)
    }
    #endif

    func testExpiryAndRemovalOnTheInjectedClock() async throws {
        let request = Request.get("/cache").parameter("body", "e").cachePolicy(.cacheFirst).cacheExpiry(10)
        _ = try await engine.send(request)
        offset.set(11)
        let has = try engine.cache.has(request)
        XCTAssertFalse(has)
        let staleAsync = try engine.cache.get(request, allowStale: true)
        let stale = try XCTUnwrap(staleAsync)
        XCTAssertEqual(stale.cacheStatus, .stale)
        XCTAssertEqual(stale.age, 11)
        let purged = try engine.cache.removeExpired()
        XCTAssertEqual(purged, 1)

        try engine.cache.put(key: "old", body: Data("o".utf8))
        offset.set(100)
        let mark = Date().addingTimeInterval(100)
        try engine.cache.put(key: "new", body: Data("n".utf8))
        let since = try engine.cache.removeSince(mark)
        XCTAssertEqual(since, 1)
        XCTAssertTrue(try engine.cache.has(key: "old"))
        let all = try engine.cache.removeAll()
        XCTAssertEqual(all, 1)
        let size = try engine.cache.size()
        XCTAssertEqual(size.count, 0)
    }

    func testHTTPPolicyRevalidatesWithETag() async throws {
        let request = Request.get("/etag/abc").cachePolicy(.http)
        let first = try await engine.send(request)
        XCTAssertEqual(first.cacheStatus, .network)
        let second = try await engine.send(request)
        XCTAssertEqual(second.cacheStatus, .revalidated)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.body, first.body)
        XCTAssertEqual(server.count("/etag/abc"), 2)
    }

    func testHTTPCacheReasonsAndSharedMode() async throws {
        let request = Request.get("/origin/swift-private").parameter("Cache-Control", "private, max-age=60")
        let first = try await engine.send(request.cachePolicy(.http))
        XCTAssertEqual(first.cacheReason, .miss)
        let second = try await engine.send(request.cachePolicy(.http))
        XCTAssertEqual(second.cacheReason, .fresh)
        XCTAssertEqual(second.cacheReason.name, "fresh")
        XCTAssertEqual(CacheReason.notStoredPrivate.rawValue, 11)
        XCTAssertEqual(server.count("/origin/swift-private"), 1)
        let shared = Request.get("/origin/swift-shared").parameter("Cache-Control", "private, max-age=60")
            .cachePolicy(.httpShared)
        for _ in 0..<2 {
            let response = try await engine.send(shared)
            XCTAssertEqual(response.cacheReason, .notStoredPrivate)
        }
        XCTAssertEqual(server.count("/origin/swift-shared"), 2)
    }

    func testHTTPCachedNotFoundThrowsLikeTheNetwork() async throws {
        let request = Request.get("/origin/swift-404").parameter("_status", "404")
            .parameter("Cache-Control", "max-age=60").cachePolicy(.http)
        for round in 0..<2 {
            do {
                _ = try await engine.send(request)
                XCTFail("a 404 must throw")
            } catch let error as CourierError {
                XCTAssertEqual(error.code, .httpStatus)
                XCTAssertEqual(error.httpStatus, 404)
                XCTAssertEqual(error.response?.status, 404)
                XCTAssertEqual(error.response?.fromCache, round == 1)
                XCTAssertEqual(error.response?.cacheReason, round == 1 ? .fresh : .miss)
            }
        }
        XCTAssertEqual(server.count("/origin/swift-404"), 1)
    }

    struct AlwaysAnswer: CustomCachePolicy {
        let writes: Locked<Int>
        func hasCache(_ cached: Response?, now: Date) -> Bool { cached != nil }
        func shouldWrite(_ response: Response, expires: inout Date) -> Bool {
            writes.mutate { $0 += 1 }
            expires = Date().addingTimeInterval(1)
            return true
        }
    }

    func testCustomPolicyAsAProtocol() async throws {
        let writes = Locked(0)
        try engine.cache.register(AlwaysAnswer(writes: writes), id: 100)
        let request = Request.get("/cache").parameter("body", "c").cachePolicy(.custom(100))
        _ = try await engine.send(request)
        XCTAssertEqual(writes.get(), 1)
        offset.set(3600) // long expired, and the policy still answers from the cache
        let cached = try await engine.send(request)
        XCTAssertTrue(cached.fromCache)
        XCTAssertEqual(server.count("/cache"), 1)
        try engine.cache.unregister(id: 100)
        await assertThrows(.invalidArgument) { try await self.engine.send(request) }
        await assertThrows(.invalidArgument) { try await self.engine.send(request.cachePolicy(.custom(50))) }
    }

    /// Issue 28 bug 9: a cache store that cannot be opened turned caching off silently (a line on
    /// the library's stderr); the engine's open throws the store error. A mistyped Redis URL
    /// ("redis//host", which would be the relative directory "redis/host") is refused.
    func testACacheStoreThatCannotOpenFailsTheOpen() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("courier-bug9-\(UUID())").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        XCTAssertTrue(FileManager.default.createFile(atPath: base + "/a-file", contents: Data()))
        XCTAssertThrowsError(try makeEngine { $0.cacheStore = base + "/a-file/cache" }) {
            XCTAssertEqual(($0 as? CourierError)?.code, .store)
        }
        try FileManager.default.createDirectory(atPath: base + "/store", withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: base + "/store/cache", contents: Data()))
        XCTAssertThrowsError(try makeEngine {
            $0.storeDirectory = base + "/store"
            $0.cachePolicy = .cacheFirst
        }) { XCTAssertEqual(($0 as? CourierError)?.code, .store) }
        XCTAssertThrowsError(try makeEngine { $0.cacheStore = "redis//localhost:6379" }) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
        }
    }
}
