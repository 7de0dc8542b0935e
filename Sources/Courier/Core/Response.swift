// Response.swift — a finished response that owns its bytes, and the id of a send.

import Foundation
internal import CCore

// MARK: - RequestID

/// The id the engine gave one send: unique within an engine, never 0 for a request that was sent.
/// Use it to cancel (``Engine/cancel(_:)``) and to match a response to its request.
public struct RequestID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The C core's id.
    public let rawValue: UInt64

    /// Wraps an id.
    /// - Parameter rawValue: The C core's id.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The id of nothing: returned by a completion-handler send that failed before it was sent.
    public static let invalid = RequestID(rawValue: 0)

    /// Orders ids by value (later sends have larger ids).
    /// - Parameters:
    ///   - lhs: An id.
    ///   - rhs: Another id.
    /// - Returns: Whether `lhs` was given first.
    public static func < (lhs: RequestID, rhs: RequestID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The number, e.g. "42".
    public var description: String { String(rawValue) }
}

// MARK: - Response

/// A finished HTTP response. It owns its bytes and may be used from any thread.
public struct Response: Sendable, Equatable {
    /// The HTTP status code (0 if none).
    public let status: Int
    /// The header lines of the final response (after redirects), in received order.
    public let headers: HTTPHeaders
    /// The body (empty for HEAD, 204 and 304).
    public let body: Data
    /// The URL that answered, after redirects.
    public let url: String
    /// The method that was sent.
    public let method: String
    /// Timing and size of the transfer.
    public let metrics: Metrics
    /// The id of the send that produced it.
    public let requestID: RequestID

    /// The C response behind this value, kept alive for feature extensions (cache flags and the
    /// like) that read more of it; nil for responses made in Swift or seen by a validator.
    let storage: ResponseStorage?

    /// Creates a response (for mocks and tests; the engine makes real ones).
    /// - Parameters:
    ///   - status: The HTTP status.
    ///   - headers: The header lines.
    ///   - body: The body.
    ///   - url: The URL that answered.
    ///   - method: The method sent.
    ///   - metrics: Timing and size.
    ///   - requestID: The id of the send.
    public init(status: Int, headers: HTTPHeaders = [], body: Data = Data(), url: String = "",
                method: String = "GET", metrics: Metrics = Metrics(), requestID: RequestID = .invalid) {
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
        self.method = method
        self.metrics = metrics
        self.requestID = requestID
        self.storage = nil
    }

    /// The value of the first header with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    /// - Returns: The value, or nil.
    public func header(_ name: String) -> String? { headers.first(named: name) }

    /// The body as UTF-8 text, or nil if it is not valid UTF-8.
    public var text: String? { String(data: body, encoding: .utf8) }

    /// Whether the two responses have the same status, headers, body, URL, method, metrics and id.
    /// - Parameters:
    ///   - lhs: A response.
    ///   - rhs: Another response.
    /// - Returns: Whether they are equal.
    public static func == (lhs: Response, rhs: Response) -> Bool {
        lhs.status == rhs.status && lhs.headers == rhs.headers && lhs.body == rhs.body && lhs.url == rhs.url
            && lhs.method == rhs.method && lhs.metrics == rhs.metrics && lhs.requestID == rhs.requestID
    }
}

// MARK: - From the C core

/// Owns a `courier_response *` and frees it when the last Swift value using it goes away.
/// `@unchecked Sendable`: a C response is immutable and may be read and freed from any thread.
final class ResponseStorage: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { courier_response_free(pointer) }
}

extension Response {
    /// A response that takes ownership of a C response. The body is not copied: the `Data`
    /// points into the C response, which is freed when neither the body nor the response is used.
    /// - Parameter pointer: A new `courier_response *`; the response now owns it.
    init(taking pointer: OpaquePointer) {
        let storage = ResponseStorage(pointer)
        var length = 0
        let bytes = courier_response_body(pointer, &length)
        let body: Data
        if let bytes, length > 0 {
            body = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: bytes), count: length,
                        deallocator: .custom { _, _ in withExtendedLifetime(storage) {} })
        } else {
            body = Data()
        }
        self.init(pointer: pointer, body: body, storage: storage)
    }

    /// A response that copies a borrowed C response (the validator's view).
    /// - Parameter pointer: A `courier_response *` borrowed for the call.
    init(borrowing pointer: OpaquePointer) {
        var length = 0
        let bytes = courier_response_body(pointer, &length)
        let body = bytes.map { Data(bytes: $0, count: length) } ?? Data()
        self.init(pointer: pointer, body: body, storage: nil)
    }

    private init(pointer: OpaquePointer, body: Data, storage: ResponseStorage?) {
        let count = courier_response_header_count(pointer)
        var lines: [HTTPHeaders.Element] = []
        lines.reserveCapacity(count)
        var name: UnsafePointer<CChar>?
        var value: UnsafePointer<CChar>?
        for i in 0..<count where courier_response_header_at(pointer, i, &name, &value) == COURIER_OK.rawValue {
            lines.append((name: String(borrowedCString: name), value: String(borrowedCString: value)))
        }
        self.status = Int(courier_response_status(pointer))
        self.headers = HTTPHeaders(lines)
        self.body = body
        self.url = String(borrowedCString: courier_response_url(pointer))
        self.method = String(borrowedCString: courier_response_method(pointer))
        self.metrics = Metrics(response: pointer)
        self.requestID = RequestID(rawValue: courier_response_request_id(pointer))
        self.storage = storage
    }
}
