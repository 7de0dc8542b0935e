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

final class ReadmeExampleTests: LoopbackTestCase {
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
