// JSON.swift — a read-only view of a JSON value held by the C core (a parsed response body, a
// document parsed or built in Swift), with typed accessors and key paths. Reading never copies the
// document and never parses twice.

import Foundation
internal import CCore

// MARK: - JSON

/// A JSON value inside a document the C core holds: a response's parsed body
/// (``Response/json``), a mapped result (``Response/result``), or a document parsed with
/// ``JSON/parse(_:maxDepth:)``. The value keeps its document alive; it is immutable and may be read
/// from any thread.
///
/// ```swift
/// let json = try JSON.parse(data)
/// let title = json["data.items.0.title"]?.string   // a key path
/// let count = json["data"]?["items"]?.count
/// ```
public struct JSON: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: the C value is never changed once a JSON wraps it (documents from
    // responses are immutable; documents the facade builds are handed over complete), and the
    // C core's reads and reference counts are thread-safe.

    /// The `courier_json *`, borrowed from `owner`.
    let pointer: OpaquePointer
    /// Whatever keeps the document alive: a response's storage or a ``JSONDocument``.
    let owner: AnyObject

    init(_ pointer: OpaquePointer, owner: AnyObject) {
        self.pointer = pointer
        self.owner = owner
    }

    /// The kinds of JSON values.
    public enum Kind: Int32, Sendable {
        /// `{...}`
        case object = 1
        /// `[...]`
        case array = 2
        /// `"..."`
        case string = 3
        /// A number without fraction or exponent that fits `Int64`.
        case integer = 4
        /// Any other number: a `Double`, or, for a number beyond `Int64` and `Double`
        /// (`18446744073709551615`, `1e400`), its exact text (``JSON/numberText``).
        case real = 5
        /// `true` or `false`.
        case bool = 6
        /// `null`.
        case null = 7
    }

    /// The kind of this value.
    public var kind: Kind { Kind(rawValue: courier_json_typeof(pointer)) ?? .null }

    /// The member with this name, or, when the name contains '.', the value at that key path
    /// (`"data.items.0.title"`: object keys and decimal array indexes). nil when absent.
    /// - Parameter key: A member name or key path.
    public subscript(key: String) -> JSON? {
        var key = key
        let found: OpaquePointer? = key.withUTF8 { utf8 in
            if utf8.contains(UInt8(ascii: ".")) { return nil }
            return courier_json_getn(pointer, UnsafeRawPointer(utf8.baseAddress)?.assumingMemoryBound(to: CChar.self), utf8.count)
        }
        if let found { return JSON(found, owner: owner) }
        if key.utf8.contains(UInt8(ascii: ".")) { return value(atKeyPath: key) }
        return nil
    }

    /// The element at this index of an array, or nil.
    /// - Parameter index: A zero-based index.
    public subscript(index: Int) -> JSON? {
        guard index >= 0, let found = courier_json_at(pointer, index) else { return nil }
        return JSON(found, owner: owner)
    }

    /// The value at a key path ("data", "data.items.0.name"); nil when any component is absent.
    /// - Parameter keyPath: Components separated by '.'.
    /// - Returns: The value, or nil.
    public func value(atKeyPath keyPath: String) -> JSON? {
        guard let found = courier_json_path(pointer, keyPath) else { return nil }
        return JSON(found, owner: owner)
    }

    /// The string, or nil when this is not a string.
    public var string: String? {
        var length = 0
        guard let bytes = courier_json_string(pointer, &length) else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: bytes, count: length), as: UTF8.self)
    }

    /// The integer, or nil when this is not an integer that fits `Int64` (a real without fraction
    /// counts).
    public var int: Int64? {
        var n: Int64 = 0
        return courier_json_read_int64(&n, pointer) == COURIER_OK.rawValue ? n : nil
    }

    /// The number as a `UInt64`, exactly (`18446744073709551615` too), or nil when this is not a
    /// number without fraction that fits `UInt64`.
    public var uint64: UInt64? {
        var n: UInt64 = 0
        return courier_json_read_uint64(&n, pointer) == COURIER_OK.rawValue ? n : nil
    }

    /// The number as a `Double` (the nearest one), or nil when this is not a number or is beyond
    /// `Double`'s range (`1e400`).
    public var double: Double? {
        var d = 0.0
        return courier_json_read_double(&d, pointer) == COURIER_OK.rawValue ? d : nil
    }

    /// The exact text of a number beyond `Int64` and `Double` (`"18446744073709551615"`,
    /// `"1e400"`), as the document wrote it; nil for any other value (numbers that fit read as
    /// ``int`` and ``double``). `Decimal(string:)` of it is exact.
    public var numberText: String? {
        var length = 0
        guard let bytes = courier_json_number_text(pointer, &length) else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: bytes, count: length), as: UTF8.self)
    }

    /// The boolean, or nil when this is not `true` or `false`.
    public var bool: Bool? { kind == .bool ? courier_json_bool(pointer) != 0 : nil }

    /// Whether this is `null`.
    public var isNull: Bool { kind == .null }

    /// The number of elements of an array or members of an object; 0 otherwise.
    public var count: Int { courier_json_size(pointer) }

    /// The elements of an array (empty otherwise).
    public var elements: [JSON] {
        guard kind == .array else { return [] }
        return (0..<count).compactMap { self[$0] }
    }

    /// The members of an object in document order (empty otherwise).
    public var members: [(key: String, value: JSON)] {
        var out: [(key: String, value: JSON)] = []
        var it = courier_json_iter_first(pointer)
        while let i = it {
            var length = 0
            let key = courier_json_iter_key(i, &length)
            let name = key.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: length), as: UTF8.self) } ?? ""
            if let v = courier_json_iter_value(i) { out.append((key: name, value: JSON(v, owner: owner))) }
            it = courier_json_iter_next(pointer, i)
        }
        return out
    }

    /// The keys of an object in document order (empty otherwise).
    public var keys: [String] { members.map(\.key) }

    /// Whether both values are equal JSON (objects regardless of member order).
    /// - Parameter other: Another value.
    /// - Returns: Whether they are equal.
    public func isEqual(to other: JSON) -> Bool { courier_json_equal(pointer, other.pointer) != 0 }

    /// Compact JSON text, for logs.
    public var description: String { (try? text()) ?? "<json>" }

    // MARK: Text

    /// Formatting of JSON text.
    public struct OutputFormatting: OptionSet, Sendable {
        /// The raw `COURIER_JSON_DUMP_*` flags.
        public let rawValue: UInt32
        /// Creates formatting from raw flags.
        /// - Parameter rawValue: `COURIER_JSON_DUMP_*` flags.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Two-space indentation and newlines.
        public static let prettyPrinted = OutputFormatting(rawValue: COURIER_JSON_DUMP_INDENT)
        /// Object members sorted by key.
        public static let sortedKeys = OutputFormatting(rawValue: COURIER_JSON_DUMP_SORT_KEYS)
        /// `\uXXXX` for every non-ASCII character.
        public static let asciiOnly = OutputFormatting(rawValue: COURIER_JSON_DUMP_ASCII)
        /// `\/` for every slash.
        public static let escapingSlashes = OutputFormatting(rawValue: COURIER_JSON_DUMP_ESCAPE_SLASH)
    }

    /// The value as JSON text (UTF-8), as the C core writes it.
    /// - Parameter formatting: Formatting options.
    /// - Returns: The text's bytes.
    /// - Throws: ``CourierError`` (no memory).
    public func data(formatting: OutputFormatting = []) throws -> Data {
        var text: UnsafeMutablePointer<CChar>?
        var length = 0
        var error = courier_error()
        let rc = courier_json_dump(&text, &length, pointer, formatting.rawValue, &error)
        guard rc == COURIER_OK.rawValue, let text else { throw CourierError(code: rc, detail: &error) }
        defer { courier_free(text) }
        return Data(bytes: text, count: length)
    }

    /// The value as JSON text.
    /// - Parameter formatting: Formatting options.
    /// - Returns: The text.
    /// - Throws: ``CourierError`` (no memory).
    public func text(formatting: OutputFormatting = []) throws -> String {
        String(decoding: try data(formatting: formatting), as: UTF8.self)
    }

    // MARK: Parsing

    /// Parses JSON text with the C core (jansson): any value at the top, UTF-8, no duplicate keys.
    /// Every number RFC 8259 allows is accepted: one beyond `Int64` and `Double` keeps its text
    /// (``numberText``, ``uint64``); a UTF-8 byte order mark before the text is ignored.
    /// - Parameters:
    ///   - data: The text.
    ///   - maxDepth: The deepest nesting accepted (1...2048).
    /// - Returns: The document's root.
    /// - Throws: ``CourierError`` with ``CourierError/Code/json`` (malformed, too deep, invalid UTF-8,
    ///   duplicate key; the message names line, column and byte offset) or
    ///   ``CourierError/Code/tooLarge``.
    public static func parse(_ data: Data, maxDepth: Int = JSONOptions.defaultMaxDepth) throws -> JSON {
        let document = try JSONDocument(parsing: data, maxDepth: maxDepth)
        return JSON(document.root, owner: document)
    }

    /// Parses JSON text given as a string.
    /// - Parameter text: The text.
    /// - Returns: The document's root.
    /// - Throws: As ``parse(_:maxDepth:)``.
    public static func parse(_ text: String) throws -> JSON { try parse(Data(text.utf8)) }

    /// A deep copy owned by Swift alone (for keeping one value of a large response).
    /// - Returns: The copy.
    /// - Throws: ``CourierError`` (no memory).
    public func copy() throws -> JSON {
        var out: OpaquePointer?
        try CourierError.check(courier_json_copy(&out, pointer), "copying JSON")
        guard let out else { throw CourierError(.noMemory) }
        let document = JSONDocument(taking: out)
        return JSON(out, owner: document)
    }
}

// MARK: - Documents owned by Swift

/// Owns a `courier_json *` root that Swift parsed, built or copied, and frees it at deinit.
/// `@unchecked Sendable`: the document is not changed once wrapped, and freeing is thread-safe.
final class JSONDocument: @unchecked Sendable {
    let root: OpaquePointer

    init(taking root: OpaquePointer) { self.root = root }

    init(parsing data: Data, maxDepth: Int = JSONOptions.defaultMaxDepth, maxBytes: Int64 = 0, threads: Int = 1) throws {
        var options = courier_json_options()
        options.size = MemoryLayout<courier_json_options>.size
        courier_json_options_init(&options)
        options.max_depth = Int32(clamping: maxDepth)
        options.max_threads = Int32(clamping: max(0, threads))
        if maxBytes > 0 { options.max_bytes = maxBytes }
        var out: OpaquePointer?
        var error = courier_error()
        let rc = data.withUnsafeBytes { raw in
            courier_json_parse(&out, raw.baseAddress, raw.count, &options, &error)
        }
        guard rc == COURIER_OK.rawValue, let out else { throw CourierError(code: rc, detail: &error) }
        root = out
    }

    deinit { courier_json_free(root) }
}

// MARK: - Codes of the JSON features

extension CourierError.Code {
    /// The body or text is not acceptable JSON (malformed, too deep, invalid UTF-8, a duplicate
    /// key), or its content type has no decoder.
    public static let json = CourierError.Code(COURIER_E_JSON)
    /// A document does not fit its mapping or key path; the response is attached, and
    /// ``Response/mappingFailure`` says where.
    public static let mapping = CourierError.Code(COURIER_E_MAPPING)
    /// The envelope's code is not a success; the response is attached, and
    /// ``Response/envelopeCode`` and ``Response/envelopeMessage`` carry the server's code and message.
    public static let api = CourierError.Code(COURIER_E_API)
}

extension CourierError {
    /// See ``Code/json``.
    public static let json = Code.json
    /// See ``Code/mapping``.
    public static let mapping = Code.mapping
    /// See ``Code/api``.
    public static let api = Code.api
}
