// HTTPTypesTests.swift — product CourierHTTPTypes against the loopback server: HTTPRequest in,
// (Data, HTTPResponse) out; every status an answer. (URLRequest: URLRequestTests.swift.)
#if HTTPTypes

import Courier
import CourierHTTPTypes
import Foundation
import HTTPTypes
import XCTest

final class HTTPTypesTests: LoopbackTestCase {
    private func echo(_ data: Data) throws -> Echo {
        try Echo(Response(status: 200, body: data))
    }

    func testHTTPRequestWithoutAuthorityIsJoinedToTheBaseURL() async throws {
        let (data, response) = try await engine.data(for: HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/json"))
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual(response.headerFields[.contentType], "application/json")
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual(json["message"] as? String, "ok")
    }

    func testHTTPRequestWithAuthorityGoesToThatURL() async throws {
        // The engine's base URL points nowhere: only the request's own authority reaches the server.
        let elsewhere = try makeEngine { $0.baseURL = "http://127.0.0.1:1/unused" }
        defer { elsewhere.close() }
        let request = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/echo/abs?x=1")
        let (data, response) = try await elsewhere.data(for: request)
        XCTAssertEqual(response.status.code, 200)
        let echo = try echo(data)
        XCTAssertEqual(echo.path, "/echo/abs")
        XCTAssertEqual(echo.query, "x=1")
    }

    func testErrorStatusIsReturnedNotThrown() async throws {
        let (data, response) = try await engine.data(for: HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/status/404"))
        XCTAssertEqual(response.status.code, 404)
        XCTAssertEqual(response.status.kind, .clientError)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "{\"status\":404}")
        let (_, server503) = try await engine.data(for: HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/status/503"))
        XCTAssertEqual(server503.status.code, 503)
    }

    func testUploadSendsBodyContentTypeAndEveryFieldInOrder() async throws {
        var fields = HTTPFields()
        fields.append(HTTPField(name: .contentType, value: "text/plain"))
        fields.append(HTTPField(name: HTTPField.Name("X-A")!, value: "1"))
        fields.append(HTTPField(name: HTTPField.Name("X-A")!, value: "2"))
        let request = HTTPRequest(method: .put, scheme: nil, authority: nil, path: "/echo/up", headerFields: fields)
        let (data, response) = try await engine.upload(for: request, from: Data("héllo".utf8))
        XCTAssertEqual(response.status, .ok)
        let echo = try echo(data)
        XCTAssertEqual(echo.method, "PUT")
        XCTAssertEqual(echo.headers("Content-Type"), ["text/plain"])
        XCTAssertEqual(echo.headers("X-A"), ["1", "2"])
        XCTAssertEqual(echo.body, "h\u{00C3}\u{00A9}llo") // the server shows each byte as one character
    }

    func testResponseKeepsRepeatedFields() async throws {
        let path = "/headers?X-Dup=one&X-Dup=two"
        let (_, response) = try await engine.data(for: HTTPRequest(method: .get, scheme: nil, authority: nil, path: path))
        XCTAssertEqual(response.headerFields[values: HTTPField.Name("X-Dup")!], ["one", "two"])
    }

    func testNoResponseThrowsTheEngineCode() async throws {
        server.stop()
        await assertThrows(.cannotConnect) {
            try await self.engine.data(for: HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/json"))
        }
    }
}
#endif
