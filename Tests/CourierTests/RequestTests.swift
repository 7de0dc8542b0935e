// RequestTests.swift — the chainable builder as the server sees it: parameters (query or body,
// form or JSON), headers, defaults and opting out, raw bodies, authorization, base URLs,
// timeouts, validators and the customize hook.

import Courier
import Foundation
import XCTest

final class RequestTests: LoopbackTestCase {
    override func configuration() -> Configuration {
        var configuration = super.configuration()
        configuration.headers = [("X-Default", "d"), ("X-Shared", "default")]
        configuration.parameters = [(name: "app", value: "courier")]
        return configuration
    }

    // MARK: - Parameters

    func testGetParametersGoInTheQueryAfterTheDefaults() async throws {
        let echo = try Echo(try await engine.send(.get("/echo").parameter("q", "a b&c").parameters(["z": "1", "y": "2"])))
        XCTAssertEqual(echo.queryPairs, ["app=courier", "q=a%20b%26c", "y=2", "z=1"])
    }

    func testDefaultParametersCanBeLeftOut() async throws {
        let echo = try Echo(try await engine.send(.get("/echo").parameter("q", "1").useDefaultParameters(false)))
        XCTAssertEqual(echo.queryPairs, ["q=1"])
    }

    func testPostParametersAreFormEncodedByDefault() async throws {
        let echo = try Echo(try await engine.send(.post("/echo").parameter("a", "1").parameter("b", "é")))
        XCTAssertEqual(echo.query, "")
        XCTAssertEqual(echo.body, "app=courier&a=1&b=%C3%A9")
        XCTAssertEqual(echo.header("Content-Type"), "application/x-www-form-urlencoded")
    }

    func testJSONBodyEncodingPerRequestAndPerEngine() async throws {
        let perRequest = try Echo(try await engine.send(.put("/echo").parameter("a", "1").bodyEncoding(.json)
            .useDefaultParameters(false)))
        XCTAssertEqual(perRequest.header("Content-Type"), "application/json")
        XCTAssertEqual(try jsonObject(perRequest.body), ["a": "1"])

        let jsonEngine = try makeEngine { $0.bodyEncoding = .json }
        defer { jsonEngine.close() }
        let perEngine = try Echo(try await jsonEngine.send(.patch("/echo").parameter("b", "2")))
        XCTAssertEqual(perEngine.header("Content-Type"), "application/json")
        XCTAssertEqual(try jsonObject(perEngine.body), ["app": "courier", "b": "2"])

        let back = try Echo(try await jsonEngine.send(.post("/echo").parameter("c", "3").bodyEncoding(.form)))
        XCTAssertEqual(back.body, "app=courier&c=3")
    }

    private func jsonObject(_ text: String) throws -> [String: String] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
    }

    // MARK: - Bodies

    func testRawJSONBodyPutsParametersInTheQuery() async throws {
        let echo = try Echo(try await engine.send(.post("/echo").json(#"{"x":[1,2]}"#).parameter("p", "1")))
        XCTAssertEqual(echo.body, #"{"x":[1,2]}"#)
        XCTAssertEqual(echo.header("Content-Type"), "application/json")
        XCTAssertEqual(echo.queryPairs, ["app=courier", "p=1"])
    }

    func testRawBodiesKeepTheirBytesAndType() async throws {
        let bytes = Data([0x00, 0x01, 0x7F, 0x41])
        let echo = try Echo(try await engine.send(.put("/echo").body(bytes, contentType: "application/x-thing")))
        XCTAssertEqual(echo.body, "\u{00}\u{01}\u{7F}A")
        XCTAssertEqual(echo.header("Content-Type"), "application/x-thing")

        let untyped = try Echo(try await engine.send(.post("/echo").body(Data("raw".utf8), contentType: nil)))
        XCTAssertEqual(untyped.header("Content-Type"), "application/octet-stream")

        let empty = try Echo(try await engine.send(.post("/echo").body(Data(), contentType: "text/plain")))
        XCTAssertEqual(empty.body, "")
        XCTAssertEqual(empty.header("Content-Type"), "text/plain")
        XCTAssertEqual(empty.header("Content-Length"), "0")
    }

    // MARK: - Headers and authorization

    func testHeadersOverrideDefaultsOfTheSameName() async throws {
        let echo = try Echo(try await engine.send(.get("/echo").header("x-shared", "mine").header("X-Extra", "1")
            .headers(["X-B": "b", "X-A": "a"])))
        XCTAssertEqual(echo.header("X-Default"), "d")
        XCTAssertEqual(echo.headers("X-Shared"), ["mine"])
        XCTAssertEqual(echo.header("X-Extra"), "1")
        let names = echo.headers.map(\.name)
        XCTAssertLessThan(try XCTUnwrap(names.firstIndex(of: "X-A")), try XCTUnwrap(names.firstIndex(of: "X-B")))
        XCTAssertEqual(echo.header("User-Agent")?.hasPrefix("Courier/"), true)
    }

    func testUserAgentIsConfigurable() async throws {
        let local = try makeEngine { $0.userAgent = "MyApp/2.0" }
        defer { local.close() }
        let echo = try Echo(try await local.send(.get("/echo")))
        XCTAssertEqual(echo.header("User-Agent"), "MyApp/2.0")
    }

    func testAuthorization() async throws {
        let basic = try Echo(try await engine.send(.get("/echo").basicAuth(user: "user", password: "pass")))
        XCTAssertEqual(basic.headers("Authorization"), ["Basic dXNlcjpwYXNz"])
        let bearer = try Echo(try await engine.send(.get("/echo").header("Authorization", "old").bearer("abc")))
        XCTAssertEqual(bearer.headers("Authorization"), ["Bearer abc"])
        let token = try Echo(try await engine.send(.get("/echo").authToken(scheme: "Token", token: "xyz")))
        XCTAssertEqual(token.headers("Authorization"), ["Token xyz"])
        await assertThrows(.invalidArgument) { try await self.engine.send(.get("/echo").basicAuth(user: "a:b", password: "")) }
    }

    // MARK: - URLs and timeouts

    func testBaseURLPerRequestAndAbsoluteURLs() async throws {
        let other = try LoopbackServer()
        defer { other.stop() }
        let viaBase = try await engine.send(.get("/x/y").baseURL(other.baseURL + "/echo/"))
        XCTAssertEqual(try Echo(viaBase).path, "/echo/x/y")
        let absolute = try await engine.send(.get(other.baseURL + "/echo/abs"))
        XCTAssertEqual(try Echo(absolute).path, "/echo/abs")
        XCTAssertEqual(other.count("/echo/x/y"), 1)
        XCTAssertEqual(other.count("/echo/abs"), 1)
        XCTAssertEqual(server.requests, 0)
    }

    func testRequestTimeoutOverridesTheEngines() async throws {
        do {
            _ = try await engine.send(.get("/delay/5000").timeout(0.2))
            XCTFail("a 5 s delay answered within 0.2 s")
        } catch CourierError.timeout {
            // expected: the pattern `CourierError.timeout` matches in catch clauses
        }
        let slowEngine = try makeEngine { $0.timeout = 0.2 }
        defer { slowEngine.close() }
        await assertThrows(.timeout) { try await slowEngine.send(.get("/delay/5000")) }
        let response = try await slowEngine.send(.get("/delay/10").timeout(20))
        XCTAssertEqual(response.status, 200)
    }

    func testRedirectsAreFollowed() async throws {
        let response = try await engine.send(.get("/redirect").parameter("to", server.baseURL + "/echo/landed")
            .useDefaultParameters(false))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.url, server.baseURL + "/echo/landed")
        XCTAssertEqual(response.metrics.redirects, 1)
    }

    // MARK: - Validators

    func testRequestValidatorRejectsWithTheResponseAttached() async throws {
        let error = await assertThrows(.invalidResult) {
            try await self.engine.send(.get("/json").validator { $0.header("Content-Type") == "text/html" })
        }
        XCTAssertEqual(error?.response?.status, 200)
        XCTAssertEqual(error?.httpStatus, 200)
        XCTAssertFalse(error?.response?.body.isEmpty ?? true)
        let ok = try await engine.send(.get("/json").validator { $0.status == 200 && !$0.body.isEmpty })
        XCTAssertEqual(ok.status, 200)
    }

    func testEngineValidatorAppliesUnlessTheRequestHasItsOwn() async throws {
        let seen = Locked<[String]>([])
        let strict = try makeEngine { configuration in
            configuration.validator = { response in
                seen.mutate { $0.append(response.url) }
                return response.header("X-Valid") == "yes"
            }
        }
        defer { strict.close() }
        await assertThrows(.invalidResult) { try await strict.send(.get("/echo")) }
        let accepted = try await strict.send(.get("/headers").parameter("X-Valid", "yes").useDefaultParameters(false))
        XCTAssertEqual(accepted.header("x-valid"), "yes")
        let own = try await strict.send(.get("/echo").validator { _ in true })
        XCTAssertEqual(own.status, 200)
        XCTAssertEqual(seen.get().count, 2)
    }

    // MARK: - Customize

    func testCustomizeChangesTheFinalURLAndHeaders() async throws {
        let seen = Locked<(url: String, method: String, agent: String?, count: Int)?>(nil)
        let target = server.baseURL + "/echo/changed?by=hook"
        let response = try await engine.send(.post("/echo/original").header("X-Remove", "1").customize { outgoing in
            seen.set((outgoing.url, outgoing.method, outgoing.header("user-agent"), outgoing.headers.count))
            try outgoing.setURL(target)
            try outgoing.setHeader("X-Custom", "yes")
            try outgoing.setHeader("x-default", "replaced")
            try outgoing.removeHeader("X-Remove")
        }.customize { outgoing in
            try outgoing.setHeader("X-Second", outgoing.header("X-Custom") ?? "missing")
        })
        let echo = try Echo(response)
        XCTAssertEqual(seen.get()?.url, server.baseURL + "/echo/original")
        XCTAssertEqual(seen.get()?.method, "POST")
        XCTAssertEqual(seen.get()?.agent?.hasPrefix("Courier/"), true)
        XCTAssertGreaterThanOrEqual(seen.get()?.count ?? 0, 4)
        XCTAssertEqual(echo.path, "/echo/changed")
        XCTAssertEqual(echo.query, "by=hook")
        XCTAssertEqual(echo.header("X-Custom"), "yes")
        XCTAssertEqual(echo.headers("X-Default"), ["replaced"])
        XCTAssertEqual(echo.header("X-Second"), "yes")
        XCTAssertNil(echo.header("X-Remove"))
        XCTAssertEqual(server.count("/echo/original"), 0)
    }

    struct HookError: Error, Equatable { let reason: String }

    func testCustomizeErrorsFailTheSend() async throws {
        await assertThrows(.invalidURL) {
            try await self.engine.send(.get("/echo").customize { try $0.setURL("not a url") })
        }
        await assertThrows(.invalidHeader) {
            try await self.engine.send(.get("/echo").customize { try $0.setHeader("X-Bad", "a\r\nb") })
        }
        do {
            _ = try await engine.send(.get("/echo").customize { _ in throw HookError(reason: "no") })
            XCTFail("the hook's error did not fail the send")
        } catch let error as HookError {
            XCTAssertEqual(error, HookError(reason: "no")) // rethrown as thrown
        }
        XCTAssertThrowsError(try engine.sendSync(.get("/echo").customize { _ in throw HookError(reason: "sync") })) {
            XCTAssertEqual($0 as? HookError, HookError(reason: "sync"))
        }
        let failure = Locked<CourierError?>(nil)
        engine.send(.get("/echo").customize { _ in throw HookError(reason: "cb") }) { outcome in
            if case .failure(let error) = outcome { failure.set(error) }
        }
        XCTAssertEqual(failure.get()?.code, .invalidArgument)
        XCTAssertEqual(server.count("/echo"), 0)
    }

    func testAnOutgoingRequestThatEscapesItsHookIsInert() async throws {
        let escaped = Locked<OutgoingRequestBox?>(nil)
        _ = try await engine.send(.get("/echo").customize { escaped.set(OutgoingRequestBox(request: $0)) })
        var outgoing = try XCTUnwrap(escaped.get()).request
        XCTAssertEqual(outgoing.url, "")
        XCTAssertNil(outgoing.header("User-Agent"))
        XCTAssertTrue(outgoing.headers.isEmpty)
        XCTAssertThrowsError(try outgoing.setURL(server.baseURL)) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
        }
    }

    struct OutgoingRequestBox: @unchecked Sendable { let request: OutgoingRequest }

    // MARK: - One request value, many sends

    func testOneRequestValueSentManyTimesAtOnce() async throws {
        let engine = self.engine!
        let request = Request.get("/echo").header("X-A", "1").parameter("q", "x").coalesce(false)
        let echoes = try await withThrowingTaskGroup(of: (RequestID, [String], [String]).self) { group in
            for _ in 0..<16 {
                group.addTask {
                    var seen: [(RequestID, [String], [String])] = []
                    for _ in 0..<4 {
                        let response = try await engine.send(request)
                        let echo = try Echo(response)
                        seen.append((response.requestID, echo.headers("X-A"), echo.queryPairs))
                    }
                    return seen.last!
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(echoes.count, 16)
        for (_, headers, query) in echoes {
            XCTAssertEqual(headers, ["1"])
            XCTAssertEqual(query, ["app=courier", "q=x"])
        }
        XCTAssertEqual(server.count("/echo"), 64)
        // The same value through the other send styles.
        XCTAssertEqual(try Echo(try engine.sendSync(request)).headers("X-A"), ["1"])
        let done = expectation(description: "completion")
        engine.send(request) { outcome in
            XCTAssertEqual((try? outcome.get()).flatMap { try? Echo($0).headers("X-A") }, ["1"])
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: 20)
    }

    func testChangingASentRequestSendsTheChangeAndLeavesTheOriginal() async throws {
        let original = Request.get("/echo").header("X-A", "1")
        let echo1 = try Echo(try await engine.send(original))
        XCTAssertEqual(echo1.headers("X-A"), ["1"])
        let changed = original.header("X-B", "2").timeout(10)
        var mutated = original
        mutated = mutated.parameter("p", "1")
        let echoChanged = try Echo(try await engine.send(changed))
        XCTAssertEqual(echoChanged.headers("X-A"), ["1"])
        XCTAssertEqual(echoChanged.headers("X-B"), ["2"])
        let echo2 = try Echo(try await engine.send(mutated))
        XCTAssertEqual(echo2.queryPairs, ["app=courier", "p=1"])
        let again = try Echo(try await engine.send(original))
        XCTAssertEqual(again.headers("X-B"), [])
        XCTAssertEqual(again.queryPairs, ["app=courier"])
        // A feature setting added after a send is sent too.
        let fast = original.priority(.high).retry(RetryPolicy(maxRetries: 1, baseDelay: 0.01))
        let echo3 = try Echo(try await engine.send(fast))
        XCTAssertEqual(echo3.headers("X-A"), ["1"])
    }

    func testARefusedRequestValueFailsEverySend() async throws {
        let bad = Request.get("/echo").header("X-A", "1\r\n2")
        for _ in 0..<3 {
            await assertThrows(.invalidHeader) { try await self.engine.send(bad) }
        }
        XCTAssertEqual(server.count("/echo"), 0)
    }

    func testValidatorAndCustomizeRunOnEverySendOfOneValue() async throws {
        let validated = Locked(0)
        let customized = Locked(0)
        let checked = Request.get("/echo").validator { _ in validated.mutate { $0 += 1 }; return true }
        let custom = Request.get("/echo").customize { outgoing in
            let n = customized.mutate { n -> Int in n += 1; return n }
            try outgoing.setHeader("X-Count", "\(n)")
        }
        for i in 1...3 {
            _ = try await engine.send(checked)
            let echo4 = try Echo(try await engine.send(custom))
            XCTAssertEqual(echo4.headers("X-Count"), ["\(i)"])
        }
        XCTAssertEqual(validated.get(), 3)
        XCTAssertEqual(customized.get(), 3)
    }

    func testARequestValueOutlivesTheEngineItWasSentWith() async throws {
        let request = Request.get("/echo").header("X-A", "1")
        do {
            let first = try makeEngine { _ in }
            _ = try await first.send(request)
            first.close()
        }
        let echo5 = try Echo(try await engine.send(request))
        XCTAssertEqual(echo5.headers("X-A"), ["1"])
    }

    /// Issue 28 bug 2: "://" in a relative path's query does not make it absolute (only a scheme at
    /// the start does, RFC 3986 section 3.1); the C core decides it.
    func testRelativePathWithAURLInItsQuery() async throws {
        let response = try await engine.send(.get("/echo?to=http://x"))
        XCTAssertEqual(response.json?["path"]?.string, "/echo")
        XCTAssertEqual(response.json?["query"]?.string, "to=http://x&app=courier") // and the default parameter
        let relative = try await engine.send(.get("echo?next=https://u@h:1/p"))
        XCTAssertEqual(relative.json?["path"]?.string, "/echo")
        XCTAssertEqual(relative.json?["query"]?.string, "next=https://u@h:1/p&app=courier")
    }
}
