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

/// A finished HTTP response. It owns its bytes and may be used from any thread, and for as long as
/// needed: it does not depend on the engine that produced it, which may be closed.
///
/// A response from the engine keeps the C response and reads from it on demand: ``status``,
/// ``body`` (the C bytes, not copied) and ``requestID`` are taken when it arrives; ``headers``,
/// ``url``, ``method`` and ``metrics`` are made each time they are read, and ``header(_:)`` looks
/// one header up without building the others. So reading only what is needed costs only that
/// (keep ``headers`` in a local to iterate it several times).
public struct Response: Sendable, Equatable {
    /// The HTTP status code (0 if none).
    public let status: Int
    /// The body (empty for HEAD, 204 and 304).
    public let body: Data
    /// The id of the send that produced it.
    public let requestID: RequestID

    /// Where the other parts come from.
    private let source: Source

    /// The C response (read on demand), or the parts a response made in Swift was given.
    private enum Source: Sendable {
        case c(ResponseStorage)
        case swift(Parts)
    }

    /// The parts of a response made in Swift (or copied from a borrowed C response). Immutable.
    private final class Parts: Sendable {
        let headers: HTTPHeaders
        let url: String
        let method: String
        let metrics: Metrics
        init(headers: HTTPHeaders, url: String, method: String, metrics: Metrics) {
            self.headers = headers
            self.url = url
            self.method = method
            self.metrics = metrics
        }
    }

    /// The header lines of the final response (after redirects), in received order. For a
    /// response from the engine, made from the C response on each read.
    public var headers: HTTPHeaders {
        switch source {
        case .c(let storage): return HTTPHeaders(response: storage.pointer)
        case .swift(let parts): return parts.headers
        }
    }

    /// The URL that answered, after redirects.
    public var url: String {
        switch source {
        case .c(let storage): return String(borrowedCString: courier_response_url(storage.pointer))
        case .swift(let parts): return parts.url
        }
    }

    /// The method that was sent.
    public var method: String {
        switch source {
        case .c(let storage): return String(borrowedCString: courier_response_method(storage.pointer))
        case .swift(let parts): return parts.method
        }
    }

    /// Timing and size of the transfer.
    public var metrics: Metrics {
        switch source {
        case .c(let storage): return Metrics(response: storage.pointer)
        case .swift(let parts): return parts.metrics
        }
    }

    /// The C response behind this value, kept alive for feature extensions (cache flags and the
    /// like) that read more of it; nil for responses made in Swift or seen by a validator.
    var storage: ResponseStorage? {
        if case .c(let storage) = source { return storage }
        return nil
    }

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
        self.body = body
        self.requestID = requestID
        self.source = .swift(Parts(headers: headers, url: url, method: method, metrics: metrics))
    }

    /// The value of the first header with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    /// - Returns: The value, or nil.
    public func header(_ name: String) -> String? {
        switch source {
        case .c(let storage):
            // A name with a NUL would be cut short in C and match another header.
            if name.utf8.contains(0) { return nil }
            return courier_response_header(storage.pointer, name).map { String(cString: $0) }
        case .swift(let parts):
            return parts.headers.first(named: name)
        }
    }

    /// The body as text, decoded from the charset its `Content-Type` names (UTF-8 when none is
    /// named), or nil when its bytes are not valid in that charset or the charset is unknown:
    /// ``decodedText(defaultCharset:)`` says why.
    public var text: String? { try? decodedText() }

    /// Whether the two responses have the same status, headers, body, URL, method, metrics and id.
    /// - Parameters:
    ///   - lhs: A response.
    ///   - rhs: Another response.
    /// - Returns: Whether they are equal.
    public static func == (lhs: Response, rhs: Response) -> Bool {
        guard lhs.status == rhs.status, lhs.requestID == rhs.requestID else { return false }
        if let a = lhs.storage, let b = rhs.storage, a === b { return true } // one C response: same parts
        return lhs.body == rhs.body && lhs.url == rhs.url && lhs.method == rhs.method && lhs.metrics == rhs.metrics
            && lhs.headers == rhs.headers
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
    /// A response that takes ownership of a C response. Nothing is copied: the body `Data` points
    /// into the C response, and the other parts are read from it when asked for; the C response
    /// is freed when neither the body nor any copy of the response is used any more.
    /// - Parameter pointer: A new `courier_response *`; the response now owns it.
    init(taking pointer: OpaquePointer) {
        let storage = ResponseStorage(pointer)
        var length = 0
        let bytes = courier_response_body(pointer, &length)
        if let bytes, length > 0 {
            body = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: bytes), count: length,
                        deallocator: .custom { _, _ in withExtendedLifetime(storage) {} })
        } else {
            body = Data()
        }
        status = Int(courier_response_status(pointer))
        requestID = RequestID(rawValue: courier_response_request_id(pointer))
        source = .c(storage)
    }

    /// A response that copies a borrowed C response (the validator's view).
    /// - Parameter pointer: A `courier_response *` borrowed for the call.
    init(borrowing pointer: OpaquePointer) {
        var length = 0
        let bytes = courier_response_body(pointer, &length)
        body = bytes.map { Data(bytes: $0, count: length) } ?? Data()
        status = Int(courier_response_status(pointer))
        requestID = RequestID(rawValue: courier_response_request_id(pointer))
        source = .swift(Parts(headers: HTTPHeaders(response: pointer),
                              url: String(borrowedCString: courier_response_url(pointer)),
                              method: String(borrowedCString: courier_response_method(pointer)),
                              metrics: Metrics(response: pointer)))
    }
}

extension HTTPHeaders {
    /// The header lines of a C response, copied.
    /// - Parameter response: A `courier_response *`, borrowed for the call.
    init(response: OpaquePointer) {
        self.init(count: courier_response_header_count(response)) { courier_response_header_at(&$1, &$2, response, $0) }
    }

    /// The header lines a C object lends by index (its `courier_X_header_count` and
    /// `courier_X_header_at`), copied; a line `at` does not answer COURIER_OK for is skipped.
    /// - Parameters:
    ///   - count: The number of lines.
    ///   - at: Reads line i's name and value (borrowed C strings) into its two arguments.
    init(count: Int, at: (Int, inout UnsafePointer<CChar>?, inout UnsafePointer<CChar>?) -> Int32) {
        var lines: [Element] = []
        lines.reserveCapacity(count)
        var name: UnsafePointer<CChar>?
        var value: UnsafePointer<CChar>?
        for i in 0..<count where at(i, &name, &value) == COURIER_OK.rawValue {
            lines.append((name: String(borrowedCString: name), value: String(borrowedCString: value)))
        }
        self.init(lines: lines)
    }
}
