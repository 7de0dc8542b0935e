// URLRequest+Courier.swift — Foundation's URLRequest in, (Data, HTTPURLResponse) out, as
// URLSession's data(for:) does, so that an app can move one call at a time. It lives here, not in
// product Courier, so that an app using Courier alone does not link FoundationNetworking on Linux
// (docs/design/openapi.md). Foundation only: unlike the rest of the module, it needs no trait.

import Courier
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A Courier request made from Foundation's `URLRequest`.
extension Request {
    /// A Courier request from a `URLRequest`: its URL, method (GET when nil), header fields and
    /// body. Its `timeoutInterval` applies when it is not URLRequest's default of 60 seconds (the
    /// engine's timeout otherwise); its `cachePolicy` is not read: the engine's cache decides.
    /// - Parameter request: The request.
    /// - Throws: `CourierError.invalidURL` for a request without a URL;
    ///   `CourierError.invalidArgument` for a body stream (`httpBodyStream`), which the
    ///   engine cannot read.
    public init(_ request: URLRequest) throws {
        guard let url = request.url else { throw CourierError(.invalidURL, message: "the URLRequest has no URL") }
        if request.httpBodyStream != nil {
            throw CourierError(.invalidArgument, message: "a URLRequest's httpBodyStream is not supported: set httpBody")
        }
        var made = Request.method(request.httpMethod ?? "GET", url.absoluteString)
        var contentType: String?
        let body = request.httpBody
        for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            if body != nil, name.caseInsensitiveCompare("Content-Type") == .orderedSame {
                contentType = value
            } else {
                made = made.header(name, value)
            }
        }
        if let body { made = made.body(body, contentType: contentType) }
        if request.timeoutInterval > 0, request.timeoutInterval != 60 { made = made.timeout(request.timeoutInterval) }
        self = made
    }
}

/// Foundation's `HTTPURLResponse` made from a Courier response.
extension HTTPURLResponse {
    /// Foundation's response for a Courier response: status, header fields (lines of one name
    /// joined with ", ", as URLSession does), the final URL (after redirects). Nil only when the
    /// response has no URL (a stub made without one).
    /// - Parameters:
    ///   - response: The response.
    ///   - url: The URL to report when the response has none.
    public convenience init?(_ response: Response, url: URL? = nil) {
        guard let responseURL = URL(string: response.url) ?? url else { return nil }
        var fields: [String: String] = [:]
        for line in response.headers {
            if let key = fields.keys.first(where: { $0.caseInsensitiveCompare(line.name) == .orderedSame }) {
                fields[key]! += ", " + line.value
            } else {
                fields[line.name] = line.value
            }
        }
        self.init(url: responseURL, statusCode: response.status, httpVersion: "HTTP/1.1", headerFields: fields)
    }
}

/// Sending Foundation's `URLRequest` through the engine.
extension Engine {
    /// Sends a `URLRequest` and returns the body and the response, with any status, as
    /// `URLSession.data(for:)` does (a 404 returns, it does not throw): a call moved from
    /// URLSession keeps its code and gains the engine's cache, cookies, journal and retries.
    ///
    /// ```swift
    /// let (data, response) = try await engine.data(for: URLRequest(url: URL(string: "https://example.com/json")!))
    /// print(response.statusCode, data.count)
    /// ```
    /// - Parameter request: The request (see ``Courier/Request/init(_:)-(URLRequest)``).
    /// - Returns: The body and the response.
    /// - Throws: `CourierError` when no response arrived (`CourierError.timeout`,
    ///   `CourierError.cancelled`, `CourierError.cannotConnect`...), the validator
    ///   refused it, or the request cannot be made (see ``Courier/Request/init(_:)-(URLRequest)``).
    public func data(for request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let response = try await send(Request(request).statusCodes(100...599))
        guard let http = HTTPURLResponse(response, url: request.url) else {
            throw CourierError(.internal, message: "a response without a URL")
        }
        return (response.body, http)
    }
}
