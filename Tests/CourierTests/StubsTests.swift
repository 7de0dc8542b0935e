// StubsTests.swift — engine-wide stubs through the facade, from XCTest: matching, sequences over
// retries, errors, unmatched requests failing or passing through to the loopback server, the
// record, configuration stubs judged like real answers, and a HAR recorded from loopback traffic
// and replayed with no network.

import Courier
import Foundation
import XCTest

final class StubsTests: LoopbackTestCase {
    func testStubsAnswerInsteadOfTheNetwork() async throws {
        engine.stubs.mode = .only
        XCTAssertEqual(engine.stubs.mode, .only)
        try engine.stubs.add(.get("/users/1"), .json(#"{"id":1}"#))
        try engine.stubs.add(.any("/files/*", .glob), .text("file"))
        try engine.stubs.add(.post("/login").when { $0.text == "secret" }, .status(204))
        try engine.stubs.add(.get("/h").header("X-Token", "abc"), .text("with header"))

        let user = try await engine.send(.get("/users/1"))
        XCTAssertEqual(user.text, #"{"id":1}"#)
        XCTAssertEqual(user.header("content-type"), "application/json")
        let file = try await engine.send(.delete("/files/a/b"))
        XCTAssertEqual(file.text, "file")
        let login = try await engine.send(.post("/login").body(Data("secret".utf8), contentType: "text/plain"))
        XCTAssertEqual(login.status, 204)
        let header = try await engine.send(.get("/h").header("X-Token", "abc"))
        XCTAssertEqual(header.text, "with header")
        do {
            _ = try await engine.send(.get("/users/2"))
            XCTFail("an unmatched request must fail")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .noStub)
        }
        XCTAssertEqual(server.count("/users/1"), 0, "nothing went on the wire")

        let seen = engine.stubs.requests
        XCTAssertEqual(seen.map(\.method), ["GET", "DELETE", "POST", "GET", "GET"])
        XCTAssertEqual(seen[0].url, server.baseURL + "/users/1")
        XCTAssertEqual(seen[2].text, "secret")
        XCTAssertEqual(seen[3].header("x-token"), "abc")
        XCTAssertNotNil(seen[0].stubID)
        XCTAssertNil(seen[4].stubID)
        engine.stubs.clearRequests()
        XCTAssertTrue(engine.stubs.requests.isEmpty)
    }

    func testASequenceGivesOneAnswerPerAttempt() async throws {
        let engine = try makeEngine {
            $0.stubMode = .only
            $0.retry = RetryPolicy(maxRetries: 3, baseDelay: 0.001, maxDelay: 0.002)
            $0.stubs = [Stub(.get("/flaky"), .status(503), .error(.cannotConnect), .text("ok"))]
        }
        let response = try await engine.send(.get("/flaky"))
        XCTAssertEqual(response.text, "ok")
        XCTAssertEqual(response.attempts, 3)
        XCTAssertEqual(engine.stubs.requests.count, 3)
        let again = try await engine.send(.get("/flaky"))
        XCTAssertEqual(again.text, "ok", "the last answer repeats")
    }

    func testStubbedAnswersAreJudgedAndErrorsAreCodes() async throws {
        engine.stubs.mode = .only
        try engine.stubs.add(.get("/missing"), .json(#"{"error":"none"}"#, status: 404, headers: ["X-Why": "gone"]))
        try engine.stubs.add(.get("/down"), .error(.timeout))
        do {
            _ = try await engine.send(.get("/missing"))
            XCTFail("a 404 must fail")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .httpStatus)
            XCTAssertEqual(error.httpStatus, 404)
            XCTAssertEqual(error.response?.header("X-Why"), "gone")
        }
        do {
            _ = try await engine.send(.get("/down"))
            XCTFail("the stub fails the request")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .timeout)
        }
    }

    func testUnmatchedRequestsPassThroughToTheNetwork() async throws {
        engine.stubs.mode = .passThrough
        let id = try engine.stubs.add(.get("/json"), .text("stubbed"))
        let stubbed = try await engine.send(.get("/json"))
        XCTAssertEqual(stubbed.text, "stubbed")
        XCTAssertTrue(engine.stubs.remove(id))
        XCTAssertFalse(engine.stubs.remove(id))
        let real = try await engine.send(.get("/json"))
        XCTAssertEqual(real.status, 200)
        XCTAssertEqual(server.count("/json"), 1)
    }

    func testAHARRecordedFromTheNetworkIsReplayedWithout() async throws {
        let har = NSTemporaryDirectory() + "courier-stubs-\(UUID()).har"
        defer { try? FileManager.default.removeItem(atPath: har) }
        try engine.recordHAR(to: har)
        let json = try await engine.send(.get("/json"))
        let posted = try await engine.send(.post("/echo/post").body(Data("hello".utf8), contentType: "text/plain"))
        try engine.recordHAR(to: nil)

        let document = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: har)))
            as? [String: Any])
        let log = try XCTUnwrap(document["log"] as? [String: Any])
        XCTAssertEqual(log["version"] as? String, "1.2")
        XCTAssertEqual((log["entries"] as? [Any])?.count, 2)

        let replaying = try makeEngine { $0.stubMode = .only }
        XCTAssertEqual(try replaying.stubs.replayHAR(from: har), 2)
        let replayedJSON = try await replaying.send(.get("/json"))
        XCTAssertEqual(replayedJSON.text, json.text)
        let replayedPost = try await replaying.send(.post("/echo/post").body(Data("hello".utf8), contentType: "text/plain"))
        XCTAssertEqual(replayedPost.body, posted.body)
        XCTAssertEqual(server.count("/json"), 1, "the replay never reached the network")
        do {
            _ = try replaying.stubs.replayHAR(from: har + ".none")
            XCTFail("no such file")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .notFound)
        }
    }
}
