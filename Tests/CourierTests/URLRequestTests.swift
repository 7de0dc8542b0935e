// URLRequestTests.swift — product CourierHTTPTypes' URLRequest interop against the loopback server:
// URLRequest in, (Data, HTTPURLResponse) out, as URLSession's data(for:) does; every status an
// answer. Foundation only: no trait needed.

import Courier
import CourierHTTPTypes
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

final class URLRequestTests: LoopbackTestCase {
    private func echo(_ data: Data) throws -> Echo {
        try Echo(Response(status: 200, body: data))
    }

    func testURLRequestAsURLSessionDataForRequest() async throws {
        var request = URLRequest(url: URL(string: server.baseURL + "/echo/url?q=2")!)
        request.httpMethod = "POST"
        request.httpBody = Data("{\"a\":1}".utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("yes", forHTTPHeaderField: "X-Moved")
        let (data, response) = try await engine.data(for: request)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(response.url?.absoluteString, server.baseURL + "/echo/url?q=2")
        XCTAssertEqual(response.value(forHTTPHeaderField: "content-type"), "application/json")
        let echo = try echo(data)
        XCTAssertEqual(echo.method, "POST")
        XCTAssertEqual(echo.query, "q=2")
        XCTAssertEqual(echo.headers("Content-Type"), ["application/json"])
        XCTAssertEqual(echo.header("X-Moved"), "yes")
        XCTAssertEqual(echo.body, "{\"a\":1}")
    }

    func testURLRequestErrorStatusAndRedirect() async throws {
        let (_, notFound) = try await engine.data(for: URLRequest(url: URL(string: server.baseURL + "/status/404")!))
        XCTAssertEqual(notFound.statusCode, 404)
        // The final URL after a redirect, as URLSession reports it.
        let (data, redirected) = try await engine.data(for: URLRequest(url: URL(string: server.baseURL + "/redirect-chain/2")!))
        XCTAssertEqual(redirected.statusCode, 200)
        XCTAssertEqual(redirected.url?.path, "/redirect-chain/0")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "{\"chain\":0}")
    }

    func testURLRequestBodyStreamIsRefused() async throws {
        var request = URLRequest(url: URL(string: server.baseURL + "/echo")!)
        request.httpMethod = "POST"
        request.httpBodyStream = InputStream(data: Data("x".utf8))
        await assertThrows(.invalidArgument) { try await self.engine.data(for: request) }
        XCTAssertEqual(server.count("/echo"), 0)
    }
}
