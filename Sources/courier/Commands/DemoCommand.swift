// DemoCommand.swift — `courier demo` (and `courier` alone): starts the embedded test server on a
// free port of 127.0.0.1, opens an engine on it, and shows a few requests with their results and
// metrics, honestly: what was sent, what came back, how long it took, whether a connection was
// reused; then the rest of the engine on its temporary store: the cache (a hit without the
// network, a revalidation), a request frozen while its server is away and replayed with its
// idempotency key, a JSON answer mapped into models by key path, a retry and a batch, each line
// from what the engine reports (cache status, request and frozen-request events).
import ArgumentParser
import Courier
import Foundation

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show Courier at work against a local test server (the default command)."
    )

    func run() async throws {
        let server: EmbeddedServer
        do {
            server = try EmbeddedServer()
        } catch {
            printError("error: \(error)")
            throw ExitCode.failure
        }
        defer { server.stop() }
        let engine: Engine
        do {
            var configuration = Configuration(baseURL: server.baseURL)
            configuration.temporaryStore = true // the demo keeps nothing
            // Frozen requests are replayed promptly here (the default backoff starts at 1 s).
            configuration.frozenReplay = FrozenReplay(concurrency: 1, backoffBase: 0.05, backoffMax: 0.2)
            engine = try Engine(configuration: configuration)
        } catch {
            printError("error: cannot open an engine: \(describe(error))")
            throw ExitCode.failure
        }
        defer { engine.close() }

        print("Courier \(libraryVersion) demo")
        print("test server: \(server.baseURL)   store: \(engine.storeDirectory) (temporary)")
        var failures = 0

        // 1. A plain GET.
        step(1, "GET /json")
        do {
            let r = try await engine.send(.get("/json"))
            show(r)
            body(r)
        } catch { failures += 1; unexpected(error) }

        // 2. POST a JSON body; /echo tells what the server received.
        let payload = #"{"name":"Ada","languages":["C","Swift"]}"#
        step(2, "POST /echo with a JSON body \(payload)")
        do {
            let r = try await engine.send(.post("/echo").json(payload))
            show(r)
            let echo = json(r.body)
            let contentType = (echo["headers"] as? [[String]])?.first { $0.first?.lowercased() == "content-type" }?.last
            print("     server got: \(echo["method"] ?? "?") \(echo["path"] ?? "?"), "
                + "Content-Type \(contentType ?? "none"), body \(echo["body"] ?? "?")")
        } catch { failures += 1; unexpected(error) }

        // 3. GET with parameters: Courier builds and percent-encodes the query.
        step(3, #"GET /echo with parameters q="swift & c", page=2, lang=ü"#)
        do {
            let r = try await engine.send(.get("/echo").parameter("q", "swift & c").parameter("page", "2").parameter("lang", "ü"))
            show(r)
            let echo = json(r.body)
            print("     query the server received: \(echo["query"] ?? "?")")
        } catch { failures += 1; unexpected(error) }

        // 4. An HTTP error status: a typed error with the response attached.
        step(4, "GET /status/404")
        do {
            let r = try await engine.send(.get("/status/404"))
            failures += 1
            print("     unexpected success: \(r.status)")
        } catch let error as CourierError {
            print("     threw CourierError.\(error.code.name) (code \(error.code.rawValue)): \(error.message)")
            if let r = error.response {
                print("     attached response: \(r.status), body \(preview(r.body)), \(ms(r.metrics.total))")
            } else {
                failures += 1
                print("     (no response attached)")
            }
        } catch { failures += 1; unexpected(error) }

        // 5. A request that outlives its timeout.
        step(5, "GET /delay/2000 with a 0.25 s timeout")
        let started = Date()
        do {
            let r = try await engine.send(.get("/delay/2000").timeout(0.25))
            failures += 1
            print("     unexpected success: \(r.status)")
        } catch let error as CourierError {
            let elapsed = Date().timeIntervalSince(started)
            print("     threw CourierError.\(error.code.name) after \(ms(elapsed)): \(error.message)")
        } catch { failures += 1; unexpected(error) }

        // 6. Keep-alive: requests one after another reuse one connection.
        step(6, "5 GETs of /count, one after another (keep-alive; the timeout above closed its connection)")
        for i in 1...5 {
            do {
                let r = try await engine.send(.get("/count"))
                let count = json(r.body)
                print("     #\(i) \(r.status)  \(ms(r.metrics.total).leftPadded(8))  reused: \(r.metrics.connectionReused ? "yes" : "no ")"
                    + "  server: request \(count["requests"] ?? "?") on \(count["connections"] ?? "?") connection(s) so far")
            } catch { failures += 1; unexpected(error) }
        }

        // 7. Concurrency: distinct requests at once share the engine's connection pool.
        step(7, "12 concurrent GETs of /delay/50?n=1...12 (at most 5 requests per host by default)")
        var before = server.counts
        var t0 = Date()
        var results = await concurrently(12) { i in try await engine.send(.get("/delay/50").parameter("n", "\(i + 1)")) }
        var wall = Date().timeIntervalSince(t0)
        var ok = results.compactMap { try? $0.get() }
        let reused = ok.filter { $0.metrics.connectionReused }.count
        var after = server.counts
        failures += results.count - ok.count
        print("     \(ok.count)/12 succeeded in \(ms(wall)) wall time (each waits 50 ms on the server)")
        print("     \(reused) on reused connections, \(ok.count - reused) on new ones; the server saw "
            + "\(after.requests - before.requests) requests and accepted \(after.connections - before.connections) new connection(s)")
        printFailures(results)

        // 8. Coalescing: identical GETs in flight at once share one network request.
        step(8, "8 concurrent identical GETs of /delay/50 (coalesced by default)")
        before = server.counts
        t0 = Date()
        results = await concurrently(8) { _ in try await engine.send(.get("/delay/50")) }
        wall = Date().timeIntervalSince(t0)
        ok = results.compactMap { try? $0.get() }
        after = server.counts
        failures += results.count - ok.count
        print("     \(ok.count)/8 succeeded in \(ms(wall)); the server saw \(after.requests - before.requests) request(s) for them")
        printFailures(results)

        failures += await engineSteps(engine: engine, server: server)

        let total = server.counts
        print("")
        print("done: the server saw \(total.requests) requests on \(total.connections) connections"
            + (failures == 0 ? "; every step behaved as expected." : "; \(failures) step(s) did NOT behave as expected."))
        if failures > 0 { throw ExitCode.failure }
    }

    // MARK: - the whole engine: cache, frozen requests, mapping, retry, batch

    /// Steps 9-15. Each line says what happened and why, from what the engine reports: a response's
    /// cache status and cache reason code (courier_response_cache_reason), the request events
    /// (from_cache, retried, finished) and the frozen-request events; the server's own counts show
    /// what reached the network. Returns the failures.
    private func engineSteps(engine: Engine, server: EmbeddedServer) async -> Int {
        var failures = 0
        let events = EventLog()
        let token = try? engine.addEventMonitor(kinds: [.fromCache, .retried, .finished]) { events.add($0) }
        defer { if let token { engine.removeEventMonitor(token) } }

        // 9. The cache: an answer without the network, then a revalidation.
        step(9, "The cache (HTTP policy): GET /cache?max_age=60&etag=v1 twice, then GET /etag/v2 twice")
        do {
            let fresh = Request.get("/cache").parameter("max_age", "60").parameter("etag", "v1").cachePolicy(.http)
            let before = server.path("/cache")
            let first = try await engine.send(fresh)
            print("     #1 \(first.status) \(first.cacheStatus), reason \(first.cacheReason.name): nothing was stored; the "
                  + "server answered (Cache-Control: \(first.header("Cache-Control") ?? "-")) and the engine stored it")
            let second = try await engine.send(fresh)
            let fromCache = events.count(.fromCache)
            print("     #2 \(second.status) \(second.cacheStatus), reason \(second.cacheReason.name): the stored response "
                  + "is fresh, so the engine answered without the network (from_cache events: \(fromCache); requests "
                  + "that reached the server: \(server.path("/cache") - before))")
            if second.cacheStatus != .hit || second.cacheReason != .fresh || server.path("/cache") - before != 1 {
                failures += 1
            }
            let stale = Request.get("/etag/v2").cachePolicy(.http)
            let a = try await engine.send(stale)
            let b = try await engine.send(stale)
            print("     #3 \(a.status) \(a.cacheStatus), reason \(a.cacheReason.name): stored with ETag "
                  + "\(a.header("ETag") ?? "-") and max-age=0 (to be checked with the server before reuse)")
            print("     #4 \(b.status) \(b.cacheStatus), reason \(b.cacheReason.name): the engine sent If-None-Match, "
                  + "the server answered 304 Not Modified, and the stored body (\(b.body.count) bytes) was served "
                  + "with the new headers merged")
            if b.cacheStatus != .revalidated || b.cacheReason != .revalidated { failures += 1 }
        } catch { failures += 1; unexpected(error) }

        // 10. A request frozen while its server is away, replayed with its idempotency key.
        step(10, "A POST frozen while its server is away, replayed when it is back")
        do {
            let away = try EmbeddedServer()
            let port = away.port
            away.stop()
            let frozenEvents = engine.frozen.events([.frozen, .resentSucceeded, .resentFailed])
            let request = Request.post("http://127.0.0.1:\(port)/echo/orders").json(#"{"item":"book","qty":1}"#)
                .freeze(.auto, expiry: 600)
            var freezeID: String?
            do {
                _ = try await engine.send(request)
                failures += 1
                print("     unexpected success with the server stopped")
            } catch let error as CourierError where error.code == .frozen {
                freezeID = error.freezeID
                let kept = freezeID.flatMap { try? engine.frozen.get($0) } ?? nil
                print("     threw CourierError.frozen: nothing listens on port \(port), so the engine wrote the request "
                      + "to its journal (freeze id \(freezeID ?? "?"), Idempotency-Key "
                      + "\(kept?.idempotencyKey.prefix(8) ?? "?")…)")
            }
            let back = try EmbeddedServer(port: port)
            defer { back.stop() }
            try engine.frozen.replay()
            for await event in frozenEvents {
                if event.kind == .frozen { continue }
                if event.kind == .resentSucceeded, let response = event.response {
                    let echo = json(response.body)
                    let key = (echo["headers"] as? [[String]])?.first { $0.first?.lowercased() == "idempotency-key" }?.last
                    print("     the server is back on port \(port): the journal resent it (attempt \(event.attempts)), "
                          + "\(response.status); the server received Idempotency-Key \(key?.prefix(8) ?? "none")…, "
                          + "the same as at freeze time, so it can tell a repeat from a new order")
                    if event.freezeID != freezeID { failures += 1 }
                } else {
                    failures += 1
                    print("     resend failed: \(event.error.map(describe) ?? "?")")
                }
                break
            }
        } catch { failures += 1; unexpected(error) }

        // 11. A JSON answer mapped into models by key path.
        step(11, "GET /json mapped into [Item] at key path \"data.items\"")
        do {
            let items = try await engine.send(.get("/json").keyPath("data.items"), as: [DemoItem].self)
            print("     decoded \(items.count) models from the array under data.items: "
                  + items.map { "Item(id: \($0.id), title: \"\($0.title)\")" }.joined(separator: ", "))
            _ = try await engine.send(.get("/json").keyPath("data.nothing"))
            failures += 1
        } catch let error as CourierError where error.code == .mapping {
            print("     a key path that is not there throws CourierError.mapping: \(error.message)")
        } catch { failures += 1; unexpected(error) }

        // 12. A retry.
        step(12, "GET /status/503 with 2 retries (50 ms backoff, doubling)")
        do {
            _ = try await engine.send(.get("/status/503").retry(RetryPolicy(maxRetries: 2, baseDelay: 0.05)))
            failures += 1
        } catch let error as CourierError {
            for e in events.all(.retried) {
                let delay = e.retryDelay.map { String(format: "%.0f ms", $0 * 1000) } ?? "?"
                let why = e.status.map { "HTTP \($0)" } ?? e.error.map { "CourierError.\($0.code.name)" } ?? "?"
                print("     retried: attempt \(e.attempt ?? 0) after \(delay), because the last attempt failed with \(why)")
            }
            print("     then CourierError.\(error.code.name) (HTTP \(error.httpStatus ?? 0)): the rule allows 2 retries")
            if events.count(.retried) != 2 { failures += 1 }
        } catch { failures += 1; unexpected(error) }

        // 13. A batch.
        step(13, "A batch of 3: GET /json, GET /delay/100, GET /status/404")
        let t0 = Date()
        let results = await engine.batch([.get("/json"), .get("/delay/100"), .get("/status/404")])
        for (path, result) in zip(["/json", "/delay/100", "/status/404"], results) {
            switch result {
            case .success(let r): print("     \(path): \(r.status) in \(ms(r.metrics.total))")
            case .failure(let e): print("     \(path): CourierError.\(e.code.name)\(e.httpStatus.map { " (HTTP \($0))" } ?? "")")
            }
        }
        print("     all three in \(ms(Date().timeIntervalSince(t0))) together: sent at once, each with its own result; "
              + "one failing did not stop the others")
        if results.count != 3 || (try? results[0].get()) == nil { failures += 1 }

        // 14. A streamed body.
        step(14, "GET /bytes/300000?rate=1000000 read as it arrives (a stream)")
        do {
            let t0 = Date()
            let (bytes, head) = try await engine.bytes(for: .get("/bytes/300000").parameter("rate", "1000000"))
            print("     head: \(head.status) after \(ms(Date().timeIntervalSince(t0))), before the body")
            var chunks = 0, received = 0
            var firstAt: TimeInterval?
            for try await chunk in bytes.chunks {
                chunks += 1
                received += chunk.count
                if firstAt == nil { firstAt = Date().timeIntervalSince(t0) }
            }
            print("     \(received) bytes in \(chunks) chunks; the first after \(ms(firstAt ?? 0)), the whole in "
                  + "\(ms(Date().timeIntervalSince(t0))): read as the server paced it, never held whole")
            if received != 300_000 || chunks < 2 { failures += 1 }
        } catch { failures += 1; unexpected(error) }

        // 15. Server-sent events.
        step(15, "Server-sent events from /sse (2 per connection, 4 in all, retry 50 ms)")
        var seen = 0
        do {
            for try await event in try engine.events(for: .get("/sse").parameter("per", "2").parameter("total", "4")
                .parameter("retry", "50")) {
                seen += 1
                print("     event \(event.type) id \(event.lastEventID): \(event.data.replacingOccurrences(of: "\n", with: " / "))")
            }
            failures += 1
        } catch let error as CourierError where error.httpStatus == 204 {
            print("     the connection closed after 2 events and was opened again with Last-Event-ID; "
                  + "then the server said stop (204)")
            if seen != 4 { failures += 1 }
        } catch { failures += 1; unexpected(error) }
        return failures
    }

    /// Runs `count` sends at once and returns their results in completion order.
    private func concurrently(_ count: Int, _ send: @escaping @Sendable (Int) async throws -> Response) async -> [Result<Response, Error>] {
        await withTaskGroup(of: Result<Response, Error>.self) { group in
            for i in 0..<count {
                group.addTask { do { return .success(try await send(i)) } catch { return .failure(error) } }
            }
            var all: [Result<Response, Error>] = []
            for await result in group { all.append(result) }
            return all
        }
    }

    private func printFailures(_ results: [Result<Response, Error>]) {
        let errors = results.compactMap { result -> Error? in
            if case .failure(let error) = result { return error }
            return nil
        }
        for error in errors.prefix(3) { print("     failed: \(describe(error))") }
    }

    // MARK: - printing

    private func step(_ n: Int, _ title: String) {
        print("")
        print("\(n). \(title)")
    }

    private func show(_ r: Response) {
        let m = r.metrics
        var line = "     \(r.status) \(reasonPhrase(r.status))  \(r.header("Content-Type") ?? "-")  \(r.body.count) bytes"
        line += "  total \(ms(m.total))  first byte \(ms(m.firstByte))  "
        line += m.connectionReused ? "reused connection" : "new connection (connect \(ms(m.connect)))"
        print(line)
    }

    private func body(_ r: Response) {
        print("     body: \(preview(r.body))")
    }

    private func unexpected(_ error: Error) {
        print("     UNEXPECTED error: \(describe(error))")
    }

    private func preview(_ data: Data, limit: Int = 90) -> String {
        guard var text = String(data: data, encoding: .utf8) else { return "<\(data.count) bytes of binary>" }
        text = text.replacingOccurrences(of: "\n", with: " ").trimmingCharacters(in: .whitespaces)
        return text.count > limit ? String(text.prefix(limit)) + "…" : text
    }

    private func json(_ data: Data) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// An item of the test server's /json document.
private struct DemoItem: Decodable {
    let id: Int
    let title: String
}

/// The request events the demo saw, from the engine's event monitor (any thread).
private final class EventLog: @unchecked Sendable { // every access holds `lock`
    private let lock = NSLock()
    private var events: [RequestEvent] = []

    func add(_ event: RequestEvent) {
        lock.lock()
        events.append(event)
        lock.unlock()
    }

    func all(_ kind: RequestEvent.Kind) -> [RequestEvent] {
        lock.lock()
        defer { lock.unlock() }
        return events.filter { $0.kind == kind }
    }

    func count(_ kind: RequestEvent.Kind) -> Int { all(kind).count }
}
