// ReadmeExampleTests.swift — the README's Swift example, word for word, so it always compiles; and
// the same calls run against the loopback server.
import Courier
import XCTest

private struct GetUser: Requestable {
    let id: Int
    var path: String { "users/\(id)" }
}

/// The README's example (it talks to api.example.com, so it is compiled, not run).
private func readmeExample() async throws {
    var configuration = Configuration(baseURL: "https://api.example.com/v1")
    configuration.timeout = 20
    configuration.headers = [(name: "Accept", value: "application/json")]
    configuration.appID = "com.example.notes" // names the durable store (see the tour's frozen requests)
    let engine = try Engine(configuration: configuration)

    // A request type that describes itself (HTNetworking's style) ...
    let user = try await engine.send(GetUser(id: 42))
    print(user.status, user.text ?? "")

    // ... or the chainable builder (HLNetworking's style).
    do {
        let created = try await engine.send(
            .post("likes").parameter("post", "7").header("X-Trace", "abc").timeout(5))
        print(created.status, created.metrics.total)
    } catch CourierError.timeout {
        print("too slow")
    } catch let error as CourierError where error.code == .httpStatus {
        print("server said", error.httpStatus ?? 0)
    }
}

private struct Item: Decodable, Sendable { let id: Int; let title: String }

/// The README's tour, word for word (compiled; its paths are the README's, not the test server's).
private func tour(engine: Engine) async throws {
    // Cache (LMDB): a fresh entry answers without the network, marked fromCache.
    let cached = try await engine.send(.get("items").cachePolicy(.cacheFirst).cacheExpiry(300))
    print(cached.fromCache, try await engine.cache.size().count)

    // JSON mapping in the core: decode the models under a key path, no second parse.
    let items = try await engine.send(.get("items").keyPath("data.items"), as: [Item].self)
    print(items.count)

    // Frozen requests: a like made in a tunnel is kept in a durable journal and sent again
    // (with the same Idempotency-Key) when the network returns or at the next start. The journal
    // is in the engine's store: by default where apps keep data, named by Configuration.appID
    // (~/.local/share/com.example.notes/courier; Application Support on Darwin). Set
    // storeDirectory to choose it; temporaryStore (tests, demos) keeps nothing past close.
    _ = try? await engine.send(.post("likes").parameter("post", "7").freeze(.auto))
    print(engine.storeDirectory, try engine.frozen.count())

    // Scheduling: retry with backoff and Retry-After, priorities, batches and chains.
    let retried = try await engine.send(.get("feed").retry(RetryPolicy(maxRetries: 3)).priority(.high))
    let both = try await engine.batch([.get("a"), .get("b")])
    print(retried.status, both.count)
}

final class ReadmeExampleTests: LoopbackTestCase {
    func testTheTourCompilesAndItsMappingRuns() async throws {
        let run: (Engine) async throws -> Void = tour
        XCTAssertNotNil(run as Any)
        let items = try await engine.send(.get("/json").keyPath("data.items"), as: [Item].self)
        XCTAssertEqual(items.map(\.title), ["one", "two"])
        let cached = try await engine.send(.get("/json").cachePolicy(.cacheFirst).cacheExpiry(300))
        XCTAssertFalse(cached.fromCache)
        let again = try await engine.send(.get("/json").cachePolicy(.cacheFirst).cacheExpiry(300))
        XCTAssertTrue(again.fromCache)
    }

    func testTheExampleCompiles() {
        let example: () async throws -> Void = readmeExample
        XCTAssertNotNil(example as Any)
    }

    func testTheSameCallsAgainstTheLoopbackServer() async throws {
        let user = try await engine.send(.get("/echo/users/42"))
        XCTAssertEqual(user.status, 200)
        do {
            _ = try await engine.send(.post("/delay/2000").parameter("post", "7").header("X-Trace", "abc").timeout(0.2))
            XCTFail("expected a timeout")
        } catch CourierError.timeout {
        }
        do {
            _ = try await engine.send(.get("/status/404"))
            XCTFail("expected an HTTP error")
        } catch let error as CourierError where error.code == .httpStatus {
            XCTAssertEqual(error.httpStatus, 404)
        }
    }
}
