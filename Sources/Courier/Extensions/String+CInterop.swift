// String+CInterop.swift — how Swift strings cross into the C core: as NUL-terminated C strings
// for the setters that take them, and as (bytes, count) pairs for the `_n` setters, so an embedded
// NUL reaches C (which refuses it) instead of silently cutting the string short.

internal import CCore

// MARK: - Passing strings to C

extension String {
    /// Calls `body` with the string's UTF-8 bytes (not NUL-terminated) and their count.
    ///
    /// The pointer is never NULL, even for an empty string, because the C core reads NULL as
    /// "argument missing".
    /// - Parameter body: Receives the bytes, borrowed for the duration of the call, and the count.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    @inline(__always)
    func withUTF8Bytes<R>(_ body: (UnsafePointer<CChar>, Int) throws -> R) rethrows -> R {
        if let result = try utf8.withContiguousStorageIfAvailable({ (buffer: UnsafeBufferPointer<UInt8>) -> R in
            guard let base = buffer.baseAddress, buffer.count > 0 else {
                return try "".withCString { try body($0, 0) }
            }
            return try base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { try body($0, buffer.count) }
        }) {
            return result
        }
        var copy = self
        return try copy.withUTF8 { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else {
                return try "".withCString { try body($0, 0) }
            }
            return try base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { try body($0, buffer.count) }
        }
    }
}

/// Calls `body` with a C string for `string`, or with NULL when `string` is nil.
/// - Parameters:
///   - string: The string, or nil.
///   - body: Receives the C string, borrowed for the duration of the call.
/// - Returns: What `body` returns.
/// - Throws: What `body` throws.
@inline(__always)
func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) throws -> R) rethrows -> R {
    guard let string else { return try body(nil) }
    return try string.withCString { try body($0) }
}

// MARK: - Reading strings from C

extension String {
    /// A string from a borrowed C string; "" for NULL.
    /// - Parameter pointer: A NUL-terminated UTF-8 string, or NULL.
    init(borrowedCString pointer: UnsafePointer<CChar>?) {
        if let pointer { self.init(cString: pointer) } else { self = "" }
    }
}
