// ResponseTests.swift — what a response holds: status, headers in order with case-insensitive
// lookup, the body (owned, zero-copied from C), text, URL, method, metrics; HTTPHeaders itself.

import Courier
import Foundation
import XCTest

final class ResponseTests: LoopbackTestCase {
    // MARK: - From the server

    func testHeadersKeepTheirOrderAndAreLookedUpIgnoringCase() async throws {
        let response = try await engine.send(.get("/headers").parameter("X-Multi", "one").parameter("x-other", "o")
            .parameter("X-Multi", "two"))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("x-multi"), "one")
        XCTAssertEqual(response.header("X-MULTI"), "one")
        XCTAssertEqual(response.headers["X-Other"], "o")
        XCTAssertEqual(response.headers.values(named: "x-multi"), ["one", "two"])
        XCTAssertNil(response.header("X-Missing"))
        let names = response.headers.map(\.name)
        XCTAssertEqual(names.filter { $0 == "X-Multi" }.count, 2)
        XCTAssertLessThan(try XCTUnwrap(names.firstIndex(of: "X-Multi")), try XCTUnwrap(names.firstIndex(of: "x-other")))
        XCTAssertNotNil(response.header("content-length"))
    }

    func testBodyAndText() async throws {
        let json = try await engine.send(.get("/json"))
        XCTAssertFalse(json.body.isEmpty)
        XCTAssertNotNil(try JSONSerialization.jsonObject(with: json.body))
        XCTAssertEqual(json.text, String(decoding: json.body, as: UTF8.self))

        let binary = try await engine.send(.get("/bytes/300"))
        XCTAssertEqual(binary.body.count, 300)
        XCTAssertEqual(binary.body, Data((0..<300).map { UInt8($0 % 251) }))
        XCTAssertNil(binary.text, "bytes 0x80... are not UTF-8")

        let empty = try await engine.send(.get("/status/204"))
        XCTAssertEqual(empty.status, 204)
        XCTAssertTrue(empty.body.isEmpty)
        XCTAssertEqual(empty.text, "")
    }

    func testBodyOutlivesTheResponseValue() async throws {
        var body: Data?
        do {
            let response = try await engine.send(.get("/bytes/70000").parameter("chunked", "1"))
            body = response.body
        }
        let bytes = try XCTUnwrap(body)
        XCTAssertEqual(bytes.count, 70000)
        XCTAssertEqual(bytes.last, UInt8(69999 % 251))
        let copy = bytes.subdata(in: 10..<20)
        XCTAssertEqual(Array(copy), (10..<20).map { UInt8($0) })
    }

    func testResponsesAreEquatable() async throws {
        let response = try await engine.send(.get("/json"))
        XCTAssertEqual(response, response)
        let again = try await engine.send(.get("/json"))
        XCTAssertNotEqual(response, again) // another request id and metrics
        XCTAssertEqual(response.body, again.body)
    }

    // MARK: - Read on demand from the C response

    func testEveryPartReadsTheSameAfterTheEngineClosed() async throws {
        let engine = try makeEngine { _ in }
        let response = try await engine.send(.get("/headers").parameter("X-Multi", "one").parameter("X-Multi", "two"))
        let headers = response.headers
        let url = response.url
        let metrics = response.metrics
        engine.close()
        XCTAssertEqual(response.headers, headers)
        XCTAssertEqual(response.headers.values(named: "x-multi"), ["one", "two"])
        XCTAssertEqual(response.header("X-MULTI"), "one")
        XCTAssertEqual(response.url, url)
        XCTAssertTrue(response.url.hasPrefix(server.baseURL + "/headers"))
        XCTAssertEqual(response.method, "GET")
        XCTAssertEqual(response.metrics, metrics)
        XCTAssertGreaterThan(response.metrics.total, 0)
        XCTAssertEqual(response.status, 200)
        XCTAssertNotEqual(response.requestID, .invalid)
    }

    func testAResponseOutlivesItsEngine() async throws {
        var response: Response?
        do {
            let engine = try makeEngine { _ in }
            response = try await engine.send(.get("/headers").parameter("X-Tag", "t"))
        } // the engine is released (and closed) here
        let kept = try XCTUnwrap(response)
        XCTAssertEqual(kept.status, 200)
        XCTAssertEqual(kept.header("x-tag"), "t")
        XCTAssertEqual(kept.headers["X-Tag"], "t")
        XCTAssertEqual(kept.method, "GET")
        let copies = (0..<8).map { _ in kept }
        await withTaskGroup(of: Void.self) { group in
            for copy in copies {
                group.addTask { XCTAssertEqual(copy.header("X-Tag"), "t") }
            }
        }
    }

    func testHeaderLookupOfANameWithNULFindsNothing() async throws {
        let response = try await engine.send(.get("/headers").parameter("X-A", "1"))
        XCTAssertEqual(response.header("X-A"), "1")
        XCTAssertNil(response.header("X-A\u{0}B"))
        XCTAssertNil(Response(status: 200, headers: [("X-A", "1")]).header("X-A\u{0}B"))
    }

    func testAResponseFromTheEngineEqualsOneMadeOfItsParts() async throws {
        let response = try await engine.send(.get("/json"))
        let made = Response(status: response.status, headers: response.headers, body: response.body, url: response.url,
                            method: response.method, metrics: response.metrics, requestID: response.requestID)
        XCTAssertEqual(made, response)
        XCTAssertEqual(response, made)
        let other = Response(status: response.status, headers: response.headers + [("X-More", "1")], body: response.body,
                             url: response.url, method: response.method, metrics: response.metrics,
                             requestID: response.requestID)
        XCTAssertNotEqual(other, response)
    }

    // MARK: - Made in Swift

    func testMadeResponses() {
        let response = Response(status: 201, headers: ["Content-Type": "text/plain"], body: Data("hi".utf8))
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(response.header("content-type"), "text/plain")
        XCTAssertEqual(response.text, "hi")
        XCTAssertEqual(response.method, "GET")
        XCTAssertEqual(response.requestID, .invalid)
        XCTAssertEqual(response.metrics, Metrics())
    }

    // MARK: - HTTPHeaders

    func testHTTPHeadersLiteralsAndEditing() {
        var headers: HTTPHeaders = [("B", "2"), ("a", "1")]
        XCTAssertEqual(headers.count, 2)
        XCTAssertEqual(headers[0].name, "B")
        XCTAssertEqual(headers["A"], "1")
        headers.add(name: "b", value: "3")
        XCTAssertEqual(headers.values(named: "B"), ["2", "3"])
        headers.replace(name: "B", value: "4")
        XCTAssertEqual(headers.values(named: "b"), ["4"])
        XCTAssertEqual(headers.map(\.name), ["a", "B"])
        headers.remove(name: "A")
        XCTAssertEqual(headers.count, 1)
        headers.append((name: "C", value: "5"))
        XCTAssertEqual(headers.last?.value, "5")

        let fromDictionary = HTTPHeaders(["z": "1", "y": "2"])
        XCTAssertEqual(fromDictionary.map(\.name), ["y", "z"])
        let literal: HTTPHeaders = ["X-One": "1", "X-Two": "2"]
        XCTAssertEqual(literal.map(\.name), ["X-One", "X-Two"])
        XCTAssertEqual(literal, HTTPHeaders([(name: "X-One", value: "1"), (name: "X-Two", value: "2")]))
        XCTAssertNotEqual(literal, HTTPHeaders([(name: "x-one", value: "1"), (name: "X-Two", value: "2")]))
        XCTAssertEqual(literal.description, "X-One: 1\nX-Two: 2")
    }

    func testHeaderNamesCompareIgnoringASCIICaseOnly() {
        let headers: HTTPHeaders = [("Content-Type", "a"), ("ÄX", "b"), ("x[", "c")]
        XCTAssertEqual(headers["CONTENT-type"], "a")
        XCTAssertNil(headers["Content-Typ"])
        XCTAssertNil(headers["äx"], "only ASCII letters fold")
        XCTAssertNil(headers["X{"], "'[' and '{' differ only in bit 0x20 but are not letters")
        XCTAssertEqual(headers["x["], "c")
    }
}
