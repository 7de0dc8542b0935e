// MockTests.swift — mock answers through the facade: the engine's switch (configuration and run
// time), a mocked body, file, status and headers, error, delay and closure, and a mocked answer
// judged like a real one (status, validator, key path mapping, cache-first).

import Courier
import Foundation
import XCTest

// The README's example of mocks, interceptors and downloads, word for word (it talks to
// api.example.com, so it is compiled, not run; MockTests runs the same calls locally).
private struct Auth: Interceptor {
    func adapt(_ request: inout OutgoingRequest) throws { try request.setHeader("Authorization", "Bearer t") }
}

private func more() async throws {
    var configuration = Configuration(baseURL: "https://api.example.com/v1")
    configuration.interceptors.append(Auth())
    configuration.mockEnabled = true // HTNetworking's enableMockTest; also engine.mockEnabled at run time
    let engine = try Engine(configuration: configuration)

    let user = try await engine.send(.get("users/1").mockFile("Mocks/GET_users_1.json"))
    let later = try await engine.send(.get("users/2").mock(body: #"{"id":2}"#, contentType: "application/json")
        .mockDelay(0.5))
    print(user.text ?? "", later.status)

    // A download with progress; cancel() pauses it and sending the request again resumes (HTTP Range).
    let download = engine.transfer(.get("https://example.com/big.iso").download(to: "big.iso", resume: true))
    for await progress in download.progress { print(progress.fractionReceived ?? 0) }
    print(try await download.response.file ?? "")
}

final class MockTests: LoopbackTestCase {
    func testTheReadmeExampleCompiles() {
        let example: () async throws -> Void = more
        XCTAssertNotNil(example as Any)
    }

    private struct Refused: Error, Equatable {}

    // MARK: - The switch

    func testMocksAreUsedOnlyWhileTheSwitchIsOn() async throws {
        let request = Request.get("/json").mock(status: 201, body: "mocked", contentType: "text/plain")
        XCTAssertFalse(engine.mockEnabled)
        let real = try await engine.send(request)
        XCTAssertEqual(real.status, 200)
        XCTAssertEqual(server.count("/json"), 1)

        engine.mockEnabled = true
        XCTAssertTrue(engine.mockEnabled)
        let mocked = try await engine.send(request)
        XCTAssertEqual(mocked.status, 201)
        XCTAssertEqual(mocked.text, "mocked")
        XCTAssertEqual(mocked.header("content-type"), "text/plain")
        XCTAssertEqual(mocked.url, server.baseURL + "/json")
        XCTAssertEqual(mocked.method, "GET")
        XCTAssertNotEqual(mocked.requestID, .invalid)
        XCTAssertEqual(server.count("/json"), 1, "a mock never reaches the network")

        engine.mockEnabled = false
        XCTAssertFalse(engine.mockEnabled)
        let again = try await engine.send(request)
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(server.count("/json"), 2)
    }

    func testTheConfigurationTurnsTheSwitchOn() async throws {
        var configuration = configuration()
        XCTAssertFalse(configuration.mockEnabled)
        configuration.mockEnabled = true
        configuration.mockEnabled = true // set twice: one setting
        XCTAssertTrue(configuration.mockEnabled)
        var off = configuration
        off.mockEnabled = false
        XCTAssertFalse(off.mockEnabled)
        let mocking = try Engine(configuration: configuration)
        defer { mocking.close() }
        XCTAssertTrue(mocking.mockEnabled)
        let response = try await mocking.send(.get("/json").mock(body: Data([0, 1, 2])))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.body, Data([0, 1, 2]))
        XCTAssertNil(response.header("Content-Type"))
        XCTAssertEqual(server.count("/json"), 0)
        // Another engine keeps its own switch.
        XCTAssertFalse(engine.mockEnabled)
    }

    // MARK: - Answers

    func testMockFileStatusHeadersAndErrors() async throws {
        engine.mockEnabled = true
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mock-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("GET_users_1.json").path
        try Data(#"{"id":1,"name":"Ada"}"#.utf8).write(to: URL(fileURLWithPath: path))

        let fromFile = try await engine.send(.get("/users/1").mockFile(path, headers: ["X-Mock": "1"]))
        XCTAssertEqual(fromFile.status, 200)
        XCTAssertEqual(fromFile.text, #"{"id":1,"name":"Ada"}"#)
        XCTAssertEqual(fromFile.header("Content-Type"), "application/json")
        XCTAssertEqual(fromFile.header("X-Mock"), "1")
        let created = try await engine.send(.get("/users/1").mockFile(path, status: 201))
        XCTAssertEqual(created.status, 201)

        await assertThrows(.notFound) {
            try await self.engine.send(.get("/users/2").mockFile(directory.appendingPathComponent("missing.json").path))
        }
        // A mocked status >= 400 is an HTTP error like a real one, response attached.
        let notFound = await assertThrows(.httpStatus) {
            try await self.engine.send(.get("/users/3").mock(status: 404, body: #"{"error":"no"}"#,
                                                              contentType: "application/json"))
        }
        XCTAssertEqual(notFound?.response?.status, 404)
        XCTAssertEqual(notFound?.httpStatus, 404)
        // A mocked failure: no response.
        let refused = await assertThrows(.cannotConnect) { try await self.engine.send(.get("/users/4").mockError(.cannotConnect)) }
        XCTAssertNil(refused?.response)
        // Bad mock settings are refused when the request is sent.
        await assertThrows(.invalidHeader) {
            try await self.engine.send(.get("/users/5").mock(body: "x", headers: ["X-Bad": "a\r\nb"]))
        }
        await assertThrows(.invalidArgument) { try await self.engine.send(.get("/users/6").mock(status: 42, body: "x")) }
        await assertThrows(.invalidArgument) { try await self.engine.send(.get("/users/7").mockDelay(-1)) }
        XCTAssertEqual(server.requests, 0)
    }

    func testAMockedErrorIsRetriedLikeARealOne() async throws {
        engine.mockEnabled = true
        let retries = Locked(0)
        try engine.addEventMonitor(kinds: [.retried]) { _ in retries.mutate { $0 += 1 } }
        let error = await assertThrows(.timeout) {
            try await self.engine.send(.get("/t").mockError(.timeout)
                .retry(RetryPolicy(maxRetries: 2, baseDelay: 0.001, maxDelay: 0.002)))
        }
        XCTAssertNil(error?.response)
        XCTAssertEqual(retries.get(), 2)
        XCTAssertEqual(server.requests, 0)
    }

    func testADelayedMockCanBeCancelled() async throws {
        engine.mockEnabled = true
        let engine = self.engine!
        let quick = try await engine.send(.get("/slow").mock(body: "late").mockDelay(0.05))
        XCTAssertEqual(quick.text, "late")

        let task = Task { try await engine.send(.get("/slow2").mock(body: "x").mockDelay(60)) }
        waitUntil("the delayed mock is queued") { engine.pending.queued + engine.pending.active == 1 }
        task.cancel()
        await assertThrows(.cancelled) { try await task.value }
    }

    func testAClosureBuildsTheAnswerFromTheFinalRequest() async throws {
        engine.mockEnabled = true
        let calls = Locked(0)
        let echo = Request.post("/things?x=1").header("X-Who", "me").mock { request in
            calls.mutate { $0 += 1 }
            return Response(status: 200, headers: ["X-Mocked": "yes"],
                            body: Data("\(request.method) \(request.url) \(request.header("x-who") ?? "-")".utf8),
                            url: "ignored", method: "ignored")
        }
        let response = try await engine.send(echo)
        XCTAssertEqual(response.text, "POST \(server.baseURL)/things?x=1 me")
        XCTAssertEqual(response.header("X-Mocked"), "yes")
        XCTAssertEqual(response.url, server.baseURL + "/things?x=1")
        XCTAssertEqual(response.method, "POST")
        XCTAssertEqual(calls.get(), 1)

        await assertThrows(.timeout) {
            try await self.engine.send(.get("/t").mock { _ in throw CourierError(.timeout) })
        }
        do { // another error is rethrown as thrown (COURIER_E_INTERNAL to the C core)
            _ = try await engine.send(.get("/t").mock { _ in throw Refused() })
            XCTFail("expected Refused")
        } catch {
            XCTAssertEqual(error as? Refused, Refused())
        }
        await assertThrows(.invalidArgument) {
            try await self.engine.send(.get("/t").mock { _ in Response(status: 0) })
        }
        // The last mock setting wins.
        let last = try await engine.send(.get("/t").mockError(.timeout).mock(body: "body wins"))
        XCTAssertEqual(last.text, "body wins")
        XCTAssertEqual(server.requests, 0)
    }

    // MARK: - Judged like a real answer

    func testAValidatorRejectsAMockedBody() async throws {
        engine.mockEnabled = true
        let validated = Request.get("/v").validator { $0.text != "bad" }
        let error = await assertThrows(.invalidResult) { try await self.engine.send(validated.mock(body: "bad")) }
        XCTAssertEqual(error?.response?.text, "bad")
        let good = try await engine.send(validated.mock(body: "good"))
        XCTAssertEqual(good.text, "good")

        let judging = try makeEngine {
            $0.mockEnabled = true
            $0.validator = { $0.header("X-Valid") == "1" }
        }
        defer { judging.close() }
        await assertThrows(.invalidResult) { try await judging.send(.get("/v").mock(body: "{}")) }
        _ = try await judging.send(.get("/v").mock(body: "{}", headers: ["X-Valid": "1"]))
    }

    func testAMockedBodyIsMappedByKeyPath() async throws {
        engine.mockEnabled = true
        let body = #"{"data":{"id":7,"name":"Ada"}}"#
        let response = try await engine.send(.get("/users/7").keyPath("data")
            .mock(body: body, contentType: "application/json"))
        XCTAssertEqual(response.result?.value(atKeyPath: "id")?.int, 7)
        await assertThrows(.mapping) {
            try await self.engine.send(.get("/users/7").keyPath("missing").mock(body: body, contentType: "application/json"))
        }
    }

    func testACacheFirstMockedAnswerIsServedFromTheCacheTheSecondTime() async throws {
        engine.mockEnabled = true
        let request = Request.get("/cached").cachePolicy(.cacheFirst).cacheExpiry(300)
        let first = try await engine.send(request.mock(body: "v1"))
        XCTAssertEqual(first.text, "v1")
        XCTAssertFalse(first.fromCache)
        let second = try await engine.send(request.mock(body: "v2"))
        XCTAssertEqual(second.text, "v1")
        XCTAssertTrue(second.fromCache)
        XCTAssertEqual(server.requests, 0)
    }
}
