// OutgoingRequest.swift — the final request handed to a customize hook: a view of the C core's
// `courier_outgoing`, valid only while the hook runs.

internal import CCore

// MARK: - OutgoingRequest

/// The final request just before it is sent, as a ``Request/customize(_:)`` hook sees it: the
/// URL with parameters applied, and every header line (defaults, the request's, authorization,
/// User-Agent, Content-Type). Valid only during the hook: afterwards reads give empty values and
/// changes throw ``CourierError/Code/invalidArgument``.
public struct OutgoingRequest {
    let handle: OutgoingHandle

    /// The method that will be sent.
    public var method: String {
        guard let pointer = handle.pointer else { return "" }
        return String(borrowedCString: courier_outgoing_method(pointer))
    }

    /// The final URL.
    public var url: String {
        guard let pointer = handle.pointer else { return "" }
        return String(borrowedCString: courier_outgoing_url(pointer))
    }

    /// Every header line, in the order they will be sent.
    public var headers: HTTPHeaders {
        guard let pointer = handle.pointer else { return [] }
        return HTTPHeaders(count: courier_outgoing_header_count(pointer)) {
            courier_outgoing_header_at(&$1, &$2, pointer, $0)
        }
    }

    /// The value of the first header line with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    /// - Returns: The value, or nil.
    public func header(_ name: String) -> String? {
        guard let pointer = handle.pointer, let value = courier_outgoing_header(pointer, name) else { return nil }
        return String(cString: value)
    }

    /// Replaces the URL.
    /// - Parameter url: An absolute http/https URL.
    /// - Throws: ``CourierError`` with ``CourierError/Code/invalidURL``.
    public mutating func setURL(_ url: String) throws {
        try CourierError.check(courier_outgoing_set_url(try live(), url), "URL '\(url)'")
    }

    /// Sets a header, replacing every line of that name; nil removes it.
    /// - Parameters:
    ///   - name: A header name (an HTTP token).
    ///   - value: The value (no CR, LF or NUL), or nil to remove the header.
    /// - Throws: ``CourierError`` with ``CourierError/Code/invalidHeader`` or
    ///   ``CourierError/Code/invalidEncoding``.
    public mutating func setHeader(_ name: String, _ value: String?) throws {
        let pointer = try live()
        try withOptionalCString(value) {
            try CourierError.check(courier_outgoing_set_header(pointer, name, $0), "header '\(name)'")
        }
    }

    /// Removes every line of a header.
    /// - Parameter name: A header name.
    /// - Throws: ``CourierError`` with ``CourierError/Code/invalidHeader`` for a name that is not a token.
    public mutating func removeHeader(_ name: String) throws { try setHeader(name, nil) }

    private func live() throws -> OpaquePointer {
        guard let pointer = handle.pointer else {
            throw CourierError(.invalidArgument, message: "an OutgoingRequest is valid only during its customize hook")
        }
        return pointer
    }
}

/// Holds the borrowed `courier_outgoing *` while a hook runs; cleared after, so a copy that
/// escaped the hook cannot reach freed memory.
final class OutgoingHandle {
    var pointer: OpaquePointer?
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}
