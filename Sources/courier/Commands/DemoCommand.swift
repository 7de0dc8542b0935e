// DemoCommand.swift — `courier demo` (and `courier` alone): starts the embedded test server on a
// free port of 127.0.0.1, opens an engine on it, and shows a few requests with their results and
// metrics, honestly: what was sent, what came back, how long it took, whether a connection was
// reused.
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

        let total = server.counts
        print("")
        print("done: the server saw \(total.requests) requests on \(total.connections) connections"
            + (failures == 0 ? "; every step behaved as expected." : "; \(failures) step(s) did NOT behave as expected."))
        if failures > 0 { throw ExitCode.failure }
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
