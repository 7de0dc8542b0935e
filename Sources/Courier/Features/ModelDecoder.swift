// ModelDecoder.swift — a Swift `Decoder` that reads the C core's parsed document directly: no
// second parse, no JSONSerialization, no intermediate Swift dictionaries. Strategies mirror
// Foundation's JSONDecoder; errors are standard `DecodingError`s whose coding path starts at the
// document's root (the request's key path included) and whose description names it as a key path.

import Foundation
internal import CCore

// MARK: - ModelDecoder

/// Decodes `Decodable` values from JSON held by the C core.
///
/// ```swift
/// let items = try ModelDecoder().decode([Item].self, from: data)           // parse included
/// let user = try response.decode(User.self)                                // the response's result
/// let user = try await engine.send(.get("/user").keyPath("data"), as: User.self)
/// ```
public struct ModelDecoder: Sendable {
    /// How dates are read.
    public enum DateDecodingStrategy: Sendable {
        /// `Date`'s own `Decodable` (seconds since 2001-01-01 as a number).
        case deferredToDate
        /// Seconds since 1970 (a number).
        case secondsSince1970
        /// Milliseconds since 1970 (a number).
        case millisecondsSince1970
        /// An ISO 8601 string ("2024-05-01T12:00:00Z", fractional seconds allowed).
        case iso8601
        /// A string read by the formatter.
        case formatted(DateFormatter)
        /// Your own reading.
        case custom(@Sendable (_ decoder: any Decoder) throws -> Date)
    }

    /// How `Data` is read.
    public enum DataDecodingStrategy: Sendable {
        /// `Data`'s own `Decodable` (an array of bytes).
        case deferredToData
        /// A base64 string.
        case base64
        /// Your own reading.
        case custom(@Sendable (_ decoder: any Decoder) throws -> Data)
    }

    /// How JSON keys relate to coding keys.
    public enum KeyDecodingStrategy: Sendable {
        /// The coding key's string is the JSON key.
        case useDefaultKeys
        /// JSON's snake_case keys match camelCase coding keys (as JSONDecoder's).
        case convertFromSnakeCase
        /// Your own conversion: given the coding path with the JSON key last, returns the coding
        /// key it matches (as JSONDecoder's `.custom`).
        case custom(@Sendable (_ codingPath: [any CodingKey]) -> any CodingKey)
    }

    /// How numbers that JSON cannot spell (infinities, NaN) are read.
    public enum NonConformingFloatDecodingStrategy: Sendable {
        /// They are not accepted (the default, as JSONDecoder's).
        case `throw`
        /// These strings stand for them, where a `Double` or `Float` is expected.
        case convertFromString(positiveInfinity: String, negativeInfinity: String, nan: String)
    }

    /// How dates are read. Default ``DateDecodingStrategy/deferredToDate``.
    public var dateDecodingStrategy: DateDecodingStrategy = .deferredToDate
    /// How `Data` is read. Default ``DataDecodingStrategy/base64``.
    public var dataDecodingStrategy: DataDecodingStrategy = .base64
    /// How keys are matched. Default ``KeyDecodingStrategy/useDefaultKeys``.
    public var keyDecodingStrategy: KeyDecodingStrategy = .useDefaultKeys
    /// How infinities and NaN are read. Default ``NonConformingFloatDecodingStrategy/throw``.
    public var nonConformingFloatDecodingStrategy: NonConformingFloatDecodingStrategy = .throw
    /// Whether strings may hold numbers ("42" for an `Int`) and numbers strings, as the core's
    /// mapping coercions allow. Default false, as JSONDecoder.
    public var allowsNumericStrings = false
    /// Values for your `init(from:)`s to read from `decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]
    /// Threads the C core may parse a large (256 KiB and more) top-level array with, when this
    /// decoder parses text itself: 1 (the default) parses on the calling thread with the core's
    /// tape parser (the fastest on one processor); any other value parses with the core's jansson
    /// parser split across that many threads (0: one per processor, at most 4), then copies the
    /// document into a tape. Pays only when processors are idle.
    public var parseThreads = 1
    /// Set on ``ModelRequestable/decoder``'s default: the engine's ``Configuration/modelDecoder``
    /// decodes instead.
    var isEngineDefault = false

    /// A decoder with the default strategies.
    public init() {}

    /// A decoder with the settings of an app's `JSONDecoder`: its key, date, data and
    /// non-conforming float strategies and its `userInfo`, so a codebase's decoder configuration
    /// is reused by Courier's model decoding (the C core's tape) rather than restated.
    ///
    /// ```swift
    /// let decoder = JSONDecoder()
    /// decoder.keyDecodingStrategy = .convertFromSnakeCase
    /// decoder.dateDecodingStrategy = .iso8601
    /// let user = try response.decode(User.self, using: decoder)
    /// configuration.modelDecoder = ModelDecoder(decoder) // every engine.send(_:as:)
    /// ```
    /// - Parameter decoder: The decoder whose settings to take (read once, here; its closures
    ///   are called from the thread that decodes).
    public init(_ decoder: JSONDecoder) {
        switch decoder.keyDecodingStrategy {
        case .useDefaultKeys: keyDecodingStrategy = .useDefaultKeys
        case .convertFromSnakeCase: keyDecodingStrategy = .convertFromSnakeCase
        case .custom(let convert):
            let box = _UncheckedSendable(convert)
            keyDecodingStrategy = .custom { box.value($0) }
        @unknown default: keyDecodingStrategy = .useDefaultKeys
        }
        switch decoder.dateDecodingStrategy {
        case .deferredToDate: dateDecodingStrategy = .deferredToDate
        case .secondsSince1970: dateDecodingStrategy = .secondsSince1970
        case .millisecondsSince1970: dateDecodingStrategy = .millisecondsSince1970
        case .iso8601: dateDecodingStrategy = .iso8601
        case .custom(let read):
            let box = _UncheckedSendable(read)
            dateDecodingStrategy = .custom { try box.value($0) }
        #if canImport(Darwin)
        // (Outside Darwin `.formatted` is a `.custom` reader, handled above.)
        case .formatted(let formatter): dateDecodingStrategy = .formatted(formatter)
        @unknown default:
            // Strategies to come: the value is read by the JSONDecoder itself, as a JSON fragment.
            let box = _UncheckedSendable(decoder)
            dateDecodingStrategy = .custom { try Self.dateByJSONDecoder(box.value, from: $0) }
        #endif
        }
        switch decoder.dataDecodingStrategy {
        case .deferredToData: dataDecodingStrategy = .deferredToData
        case .base64: dataDecodingStrategy = .base64
        case .custom(let read):
            let box = _UncheckedSendable(read)
            dataDecodingStrategy = .custom { try box.value($0) }
        @unknown default: dataDecodingStrategy = .base64
        }
        switch decoder.nonConformingFloatDecodingStrategy {
        case .throw: nonConformingFloatDecodingStrategy = .throw
        case .convertFromString(let positive, let negative, let nan):
            nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: positive,
                                                                    negativeInfinity: negative, nan: nan)
        @unknown default: nonConformingFloatDecodingStrategy = .throw
        }
        for (key, value) in decoder.userInfo { userInfo[key] = _UncheckedSendable(value) }
    }

    /// A date read by `decoder` from the single value `from` holds (a string or a number): the
    /// reading of date strategies this decoder does not know (Darwin's `@unknown default`).
    private static func dateByJSONDecoder(_ decoder: JSONDecoder, from reader: any Decoder) throws -> Date {
        let container = try reader.singleValueContainer()
        let fragment: Data
        if let text = try? container.decode(String.self) {
            fragment = try JSONEncoder().encode([text])
        } else {
            fragment = Data("[\(try container.decode(Double.self))]".utf8)
        }
        return try decoder.decode([Date].self, from: fragment)[0]
    }

    /// Decodes a value from JSON text, parsing it with the C core first (into a tape: one flat
    /// array of entries, no objects and no hash tables; see `courier_json_tape_parse`).
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: JSON text.
    ///   - keyPath: The key path of the value to decode inside the document ("data.items"), or nil for the root.
    /// - Returns: The value.
    /// - Throws: ``CourierError`` (``CourierError/Code/json``) when the text is not JSON; a
    ///   `DecodingError` when it does not fit the type.
    public func decode<T: Decodable>(_ type: T.Type, from data: Data, keyPath: String? = nil) throws -> T {
        let tape: _Tape
        if parseThreads == 1 {
            tape = try _Tape(parsing: data)
        } else {
            // A split parse (jansson on several threads), then its tape.
            let document = try JSONDocument(parsing: data, threads: parseThreads)
            tape = try withExtendedLifetime(document) { try _Tape(value: document.root) }
        }
        return try decode(type, tape: tape, keyPath: keyPath, pathPrefix: [])
    }

    /// Decodes a value from a parsed JSON value.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - json: The value.
    ///   - keyPath: A key path inside `json`, or nil for `json` itself.
    /// - Returns: The value.
    /// - Throws: A `DecodingError` naming the path.
    public func decode<T: Decodable>(_ type: T.Type, from json: JSON, keyPath: String? = nil) throws -> T {
        try withExtendedLifetime(json.owner) {
            try decode(type, root: json.pointer, keyPath: keyPath)
        }
    }

    /// Decodes from a borrowed `courier_json *`; `pathPrefix` names where it sits in its document.
    /// The value at the key path is copied into a tape first (one walk, no parse).
    func decode<T: Decodable>(_ type: T.Type, root: OpaquePointer, keyPath: String?,
                              pathPrefix: [any CodingKey] = []) throws -> T {
        var start = root
        var path = pathPrefix
        if let keyPath, !keyPath.isEmpty {
            path += Self.keys(keyPath)
            guard let found = courier_json_path(root, keyPath) else {
                throw DecodingError.valueNotFound(type, DecodingError.Context(
                    codingPath: path, debugDescription: "No value at key path '\(keyPath)'"))
            }
            start = found
        }
        return try decode(type, tape: try _Tape(value: start), keyPath: nil, pathPrefix: path)
    }

    private static func keys(_ keyPath: String) -> [any CodingKey] {
        keyPath.split(separator: ".", omittingEmptySubsequences: false).map { _JSONKey($0) }
    }

    /// Decodes from a tape, at `keyPath` below the value at `index` (the root by default).
    func decode<T: Decodable>(_ type: T.Type, tape: _Tape, at index: Int = 0, keyPath: String?,
                              pathPrefix: [any CodingKey]) throws -> T {
        var start = index
        var path = pathPrefix
        if let keyPath, !keyPath.isEmpty {
            path += Self.keys(keyPath)
            guard courier_json_tape_path(&start, tape.tape, index, keyPath) != 0 else {
                throw DecodingError.valueNotFound(type, DecodingError.Context(
                    codingPath: path, debugDescription: "No value at key path '\(keyPath)'"))
            }
        }
        return try withExtendedLifetime(tape) {
            let impl = _ModelDecoderImpl(tape: tape, value: start, codingPath: path, options: _DecoderOptions(self))
            return try impl.unbox(start, as: T.self)
        }
    }
}

// MARK: - The tape

/// A document as the C core's tape (`courier_json_tape`): entries read in place, strings at offsets
/// in one text.
final class _Tape {
    let tape: OpaquePointer
    let entries: UnsafePointer<courier_json_tape_entry>
    let text: UnsafePointer<UInt8>
    /// For a borrowed tape (a response's result): what keeps it alive. nil: the tape is this object's own.
    private let owner: AnyObject?

    /// A tape another object owns (`courier_response_result_tape`'s, owned by the response), kept
    /// alive by holding `owner`; not freed here.
    init(borrowing tape: OpaquePointer, owner: AnyObject) {
        self.tape = tape
        self.owner = owner
        entries = courier_json_tape_entries(tape, nil)
        text = courier_json_tape_text(tape)
    }

    init(parsing data: Data) throws {
        var out: OpaquePointer?
        var error = courier_error()
        let rc = data.withUnsafeBytes { raw in
            courier_json_tape_parse(&out, raw.baseAddress, raw.count, nil, &error)
        }
        guard rc == COURIER_OK.rawValue, let out else { throw CourierError(code: rc, detail: &error) }
        self.tape = out
        owner = nil
        entries = courier_json_tape_entries(out, nil)
        text = courier_json_tape_text(out)
    }

    init(value: OpaquePointer) throws {
        var out: OpaquePointer?
        var error = courier_error()
        let rc = courier_json_tape_from_value(&out, value, &error)
        guard rc == COURIER_OK.rawValue, let out else { throw CourierError(code: rc, detail: &error) }
        self.tape = out
        owner = nil
        entries = courier_json_tape_entries(out, nil)
        text = courier_json_tape_text(out)
    }

    deinit { if owner == nil { courier_json_tape_free(tape) } }
}

// MARK: - Options

/// The decoder's settings, shared by reference across one decoding.
final class _DecoderOptions {
    let date: ModelDecoder.DateDecodingStrategy
    let data: ModelDecoder.DataDecodingStrategy
    /// Converts a JSON key (last in the path) to the coding key it matches; nil: keys as they are.
    let convertKey: ((_ key: String, _ path: [any CodingKey]) -> String)?
    let numericStrings: Bool
    /// The strings that stand for +inf, -inf and NaN, if any.
    let nonConforming: (positive: String, negative: String, nan: String)?
    let userInfo: [CodingUserInfoKey: Any]

    init(_ d: ModelDecoder) {
        date = d.dateDecodingStrategy
        data = d.dataDecodingStrategy
        switch d.keyDecodingStrategy {
        case .useDefaultKeys: convertKey = nil
        case .convertFromSnakeCase: convertKey = { key, _ in _convertFromSnakeCase(key) }
        case .custom(let convert): convertKey = { key, path in convert(path + [_JSONKey(stringValue: key)]).stringValue }
        }
        numericStrings = d.allowsNumericStrings
        if case .convertFromString(let positive, let negative, let nan) = d.nonConformingFloatDecodingStrategy {
            nonConforming = (positive, negative, nan)
        } else {
            nonConforming = nil
        }
        userInfo = d.userInfo.mapValues { ($0 as? _UncheckedSendable<Any>)?.value ?? $0 }
    }
}

/// A value of a non-Sendable type kept by a Sendable one (JSONDecoder's closures and userInfo,
/// read only, from the thread that decodes).
struct _UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A coding key for key path components, array indexes and super.
struct _JSONKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue; intValue = Int(stringValue) }
    init(intValue: Int) { stringValue = String(intValue); self.intValue = intValue }
    init(_ part: Substring) { self.init(stringValue: String(part)) }
    static let `super` = _JSONKey(stringValue: "super")
}

/// An array index as a coding key: one word, so it is stored inline in `any CodingKey` (no box),
/// and its string is made only when asked for (error messages).
struct _IndexKey: CodingKey {
    let index: Int
    init(_ index: Int) { self.index = index }
    init?(stringValue: String) {
        guard let i = Int(stringValue) else { return nil }
        index = i
    }
    init?(intValue: Int) { index = intValue }
    var stringValue: String { String(index) }
    var intValue: Int? { index }
}

/// "data.items.1.id" for a coding path.
func _dottedPath(_ path: [any CodingKey]) -> String {
    path.isEmpty ? "(root)" : path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
}

/// The kind name used in error messages.
func _kindName(_ type: Int32) -> String {
    String(cString: courier_json_type_name(type))
}

let _OBJECT = UInt8(COURIER_JSON_OBJECT.rawValue)
let _ARRAY = UInt8(COURIER_JSON_ARRAY.rawValue)
let _STRING = UInt8(COURIER_JSON_STRING.rawValue)
let _INTEGER = UInt8(COURIER_JSON_INTEGER.rawValue)
let _REAL = UInt8(COURIER_JSON_REAL.rawValue)
let _BOOL = UInt8(COURIER_JSON_BOOL.rawValue)
let _NULL = UInt8(COURIER_JSON_NULL.rawValue)
/// A REAL entry kept as its text (it fits neither Int64 nor Double).
let _NUMBER_TEXT = UInt8(COURIER_JSON_TAPE_NUMBER_TEXT)

// MARK: - The decoder

/// One decoding: walks the tape; a value is its entry's index. It is also the single-value
/// container of the value it is on.
final class _ModelDecoderImpl: Decoder, SingleValueDecodingContainer {
    /// Keeps the tape alive; `handle`, `entries` and `text` are read without touching it (no
    /// reference counting per value).
    let tape: _Tape
    let handle: OpaquePointer
    let entries: UnsafePointer<courier_json_tape_entry>
    let text: UnsafePointer<UInt8>
    var value: Int
    var codingPath: [any CodingKey]
    let options: _DecoderOptions
    var userInfo: [CodingUserInfoKey: Any] { options.userInfo }

    /// Per depth, the object a keyed container reads and the position after its last member
    /// read (courier_json_tape_get's hint): members read in document order cost one comparison.
    let hints: UnsafeMutablePointer<(object: Int, hint: Int)>
    static let hintDepth = 256

    init(tape: _Tape, value: Int, codingPath: [any CodingKey], options: _DecoderOptions) {
        self.tape = tape
        handle = tape.tape
        entries = tape.entries
        text = tape.text
        self.value = value
        self.codingPath = codingPath
        self.options = options
        hints = .allocate(capacity: Self.hintDepth)
        hints.initialize(repeating: (-1, 0), count: Self.hintDepth)
    }

    deinit { hints.deallocate() }

    @inline(__always) func type(_ v: Int) -> UInt8 { entries[v].type }

    /// The entry after the value at `v` (its next sibling).
    @inline(__always) func skip(_ v: Int) -> Int { courier_json_tape_skip(handle, v) }

    /// The string of a STRING entry (a key or a value).
    @inline(__always) func string(_ v: Int) -> String {
        let e = entries[v]
        return String(decoding: UnsafeRawBufferPointer(start: text + Int(e.payload), count: Int(e.length)), as: UTF8.self)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard self.type(value) == _OBJECT else { throw mismatch([String: Any].self, value, codingPath) }
        return KeyedDecodingContainer(_KeyedContainer<Key>(impl: self, object: value, depth: codingPath.count))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard type(value) == _ARRAY else { throw mismatch([Any].self, value, codingPath) }
        return _UnkeyedContainer(impl: self, array: value, depth: codingPath.count)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: Errors

    func mismatch(_ type: Any.Type, _ v: Int?, _ path: [any CodingKey]) -> DecodingError {
        let found = v.map { Int32(self.type($0)) } ?? Int32(COURIER_JSON_NONE.rawValue)
        let description = "Expected \(type) at \(_dottedPath(path)), found \(_kindName(found))"
        if found == COURIER_JSON_NULL.rawValue || found == COURIER_JSON_NONE.rawValue {
            return .valueNotFound(type, .init(codingPath: path, debugDescription: description))
        }
        return .typeMismatch(type, .init(codingPath: path, debugDescription: description))
    }

    func corrupted(_ why: String, _ path: [any CodingKey]) -> DecodingError {
        .dataCorrupted(.init(codingPath: path, debugDescription: "\(why) at \(_dottedPath(path))"))
    }

    // MARK: Scalars (shared by all containers)

    @inline(__always)
    func unboxBool(_ v: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> Bool {
        let e = entries[v]
        guard e.type == _BOOL else { throw mismatch(Bool.self, v, path()) }
        return e.flags & UInt8(COURIER_JSON_TAPE_TRUE) != 0
    }

    @inline(__always)
    func unboxString(_ v: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> String {
        let e = entries[v]
        if e.type == _STRING {
            return String(decoding: UnsafeRawBufferPointer(start: text + Int(e.payload), count: Int(e.length)), as: UTF8.self)
        }
        if options.numericStrings {
            if e.type == _INTEGER { return String(Int64(bitPattern: e.payload)) }
            if let text = numberText(v) { return text }
            if e.type == _REAL { return String(Double(bitPattern: e.payload)) }
        }
        throw mismatch(String.self, v, path())
    }

    @inline(__always)
    func unboxInt64(_ v: Int, _ type: Any.Type, _ path: @autoclosure () -> [any CodingKey]) throws -> Int64 {
        let e = entries[v]
        if e.type == _INTEGER { return Int64(bitPattern: e.payload) }
        return try unboxInt64Slow(v, type, path())
    }

    /// The text of a number kept as text (beyond Int64 and Double), else nil.
    func numberText(_ v: Int) -> String? {
        guard entries[v].flags & _NUMBER_TEXT != 0 else { return nil }
        var length = 0
        guard let bytes = courier_json_tape_number_text(handle, v, &length) else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: bytes, count: length), as: UTF8.self)
    }

    /// The number at `v` as the core reads it (its range rules), for error messages its text.
    func numberDescription(_ v: Int) -> String { numberText(v) ?? "\(Double(bitPattern: entries[v].payload))" }

    func unboxInt64Slow(_ v: Int, _ type: Any.Type, _ path: [any CodingKey]) throws -> Int64 {
        let e = entries[v]
        if e.type == _REAL {
            var n: Int64 = 0
            guard courier_json_tape_read_int64(&n, handle, v) == COURIER_OK.rawValue else {
                throw corrupted("Parsed JSON number <\(numberDescription(v))> does not fit in \(type)", path)
            }
            return n
        }
        if options.numericStrings, e.type == _STRING, let n = Int64(string(v)) {
            return n
        }
        throw mismatch(type, v, path)
    }

    @inline(__always)
    func unboxInteger<I: FixedWidthInteger>(_ v: Int, _ type: I.Type,
                                            _ path: @autoclosure () -> [any CodingKey]) throws -> I {
        let n = try unboxInt64(v, type, path())
        if let exact = I(exactly: n) { return exact }
        throw corrupted("Parsed JSON number <\(n)> does not fit in \(type)", path())
    }

    func unboxUInt64(_ v: Int, _ path: [any CodingKey]) throws -> UInt64 {
        let e = entries[v]
        if e.type == _REAL {
            var n: UInt64 = 0
            guard courier_json_tape_read_uint64(&n, handle, v) == COURIER_OK.rawValue else {
                throw corrupted("Parsed JSON number <\(numberDescription(v))> does not fit in UInt64", path)
            }
            return n
        }
        let n = try unboxInt64(v, UInt64.self, path)
        guard let exact = UInt64(exactly: n) else { throw corrupted("Parsed JSON number <\(n)> does not fit in UInt64", path) }
        return exact
    }

    @inline(__always)
    func unboxDouble(_ v: Int, _ type: Any.Type, _ path: @autoclosure () -> [any CodingKey]) throws -> Double {
        let e = entries[v]
        if e.type == _REAL {
            if e.flags & _NUMBER_TEXT != 0 { return try unboxDoubleText(v, type, path()) }
            return Double(bitPattern: e.payload)
        }
        if e.type == _INTEGER { return Double(Int64(bitPattern: e.payload)) }
        if e.type == _STRING {
            if let nonConforming = options.nonConforming {
                let text = string(v)
                if text == nonConforming.positive { return .infinity }
                if text == nonConforming.negative { return -.infinity }
                if text == nonConforming.nan { return .nan }
            }
            if options.numericStrings, let d = Double(string(v)) { return d }
        }
        throw mismatch(type, v, path())
    }

    /// A number kept as text as a Double: its nearest one, or an error beyond Double's range.
    func unboxDoubleText(_ v: Int, _ type: Any.Type, _ path: [any CodingKey]) throws -> Double {
        var d = 0.0
        guard courier_json_tape_read_double(&d, handle, v) == COURIER_OK.rawValue else {
            throw corrupted("Parsed JSON number <\(numberDescription(v))> does not fit in \(type)", path)
        }
        return d
    }

    /// A Decimal: exactly from the text of a number kept as text, else from its Double.
    func unboxDecimal(_ v: Int, _ path: [any CodingKey]) throws -> Decimal {
        guard let text = numberText(v) else { return Decimal(try unboxDouble(v, Decimal.self, path)) }
        guard let d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")), !d.isNaN else {
            throw corrupted("Parsed JSON number <\(text)> does not fit in Decimal", path)
        }
        return d
    }

    func unboxFloat(_ v: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> Float {
        let d = try unboxDouble(v, Float.self, path())
        let f = Float(d)
        if f.isInfinite && d.isFinite { throw corrupted("Parsed JSON number <\(d)> does not fit in Float", path()) }
        return f
    }

    /// The path of a container at `depth` (containers keep no copy of the path: the decoder's
    /// path is a stack that only grows and shrinks at its end while they are in use).
    func path(depth: Int) -> [any CodingKey] { Array(codingPath.prefix(depth)) }

    /// Any Decodable at `v`, with `key` appended to the path (nil: same path).
    @inline(__always)
    func unbox<T: Decodable>(_ v: Int, as type: T.Type, key: (any CodingKey)? = nil) throws -> T {
        // Scalars that need no decoder of their own (the common leaves of arrays).
        if T.self == String.self {
            return unsafeBitCast(try unboxString(v, key.map { codingPath + [$0] } ?? codingPath), to: T.self)
        }
        if T.self == Int.self {
            return unsafeBitCast(try unboxInteger(v, Int.self, key.map { codingPath + [$0] } ?? codingPath), to: T.self)
        }
        if T.self == Double.self {
            return unsafeBitCast(try unboxDouble(v, Double.self, key.map { codingPath + [$0] } ?? codingPath), to: T.self)
        }
        if T.self == Bool.self {
            return unsafeBitCast(try unboxBool(v, key.map { codingPath + [$0] } ?? codingPath), to: T.self)
        }
        if let key { codingPath.append(key) }
        let saved = value
        value = v
        defer {
            value = saved
            if key != nil { codingPath.removeLast() }
        }
        if T.self == Date.self { return try unboxDate() as! T }
        if T.self == Data.self { return try unboxData() as! T }
        if T.self == URL.self { return try unboxURL() as! T }
        if T.self == Decimal.self { return try unboxDecimal(v, codingPath) as! T }
        return try T(from: self)
    }

    func unboxDate() throws -> Date {
        switch options.date {
        case .deferredToDate: return try Date(from: self)
        case .secondsSince1970: return Date(timeIntervalSince1970: try unboxDouble(value, Date.self, codingPath))
        case .millisecondsSince1970:
            return Date(timeIntervalSince1970: try unboxDouble(value, Date.self, codingPath) / 1000)
        case .iso8601:
            let text = try unboxString(value, codingPath)
            if let date = _ISO8601.parse(text) { return date }
            throw corrupted("Expected date string to be ISO8601-formatted, found \"\(text)\"", codingPath)
        case .formatted(let formatter):
            let text = try unboxString(value, codingPath)
            if let date = formatter.date(from: text) { return date }
            throw corrupted("Date string \"\(text)\" does not match the format", codingPath)
        case .custom(let read): return try read(self)
        }
    }

    func unboxData() throws -> Data {
        switch options.data {
        case .deferredToData: return try Data(from: self)
        case .base64:
            let text = try unboxString(value, codingPath)
            if let data = Data(base64Encoded: text) { return data }
            throw corrupted("Encountered Data is not valid Base64", codingPath)
        case .custom(let read): return try read(self)
        }
    }

    func unboxURL() throws -> URL {
        let text = try unboxString(value, codingPath)
        if let url = URL(string: text) { return url }
        throw corrupted("Invalid URL string \"\(text)\"", codingPath)
    }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool { type(value) == _NULL }
    func decode(_ type: Bool.Type) throws -> Bool { try unboxBool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try unboxString(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try unboxDouble(value, Double.self, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try unboxFloat(value, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try unboxInteger(value, Int.self, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try unboxInteger(value, Int8.self, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try unboxInteger(value, Int16.self, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try unboxInteger(value, Int32.self, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try unboxInt64(value, Int64.self, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { UInt(try unboxUInt64(value, codingPath)) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try unboxInteger(value, UInt8.self, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try unboxInteger(value, UInt16.self, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try unboxInteger(value, UInt32.self, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try unboxUInt64(value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try unbox(value, as: type) }
}

// MARK: - Keyed container

struct _KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    /// Unowned: the decoder outlives every container of its decoding (no reference counting per use).
    unowned(unsafe) let impl: _ModelDecoderImpl
    let object: Int
    let depth: Int
    /// The whole path, for containers made by nestedContainer (no scope on the decoder's stack).
    let explicitPath: [any CodingKey]?

    /// JSON key -> member, with keys converted by the key strategy (only when it converts).
    private let converted: [String: Int]?

    /// Whether lookups go through the decoder's hint slot at `depth`.
    private let hinted: Bool

    var codingPath: [any CodingKey] { explicitPath ?? impl.path(depth: depth) }

    init(impl: _ModelDecoderImpl, object: Int, depth: Int, explicitPath: [any CodingKey]? = nil) {
        self.impl = impl
        self.object = object
        self.depth = depth
        self.explicitPath = explicitPath
        hinted = explicitPath == nil && depth < _ModelDecoderImpl.hintDepth && impl.options.convertKey == nil
        if hinted { impl.hints[depth] = (object, 0) }
        if let convert = impl.options.convertKey {
            var map: [String: Int] = [:]
            let path = explicitPath ?? impl.path(depth: depth)
            Self.forEachMember(impl, object) { key, value in map[convert(impl.string(key), path)] = value }
            converted = map
        } else {
            converted = nil
        }
    }

    /// Calls `body` with the key and value entries of each live member, in document order.
    private static func forEachMember(_ impl: _ModelDecoderImpl, _ object: Int, _ body: (Int, Int) -> Void) {
        let end = Int(impl.entries[object].payload)
        var k = object + 1
        while k < end {
            let v = k + 1
            if impl.entries[k].flags & UInt8(COURIER_JSON_TAPE_DEAD) == 0 { body(k, v) }
            k = impl.skip(v)
        }
    }

    /// The member for a key: at the hint (the member after the last one read) when the type reads
    /// members in document order, else a scan of the members; no allocation.
    @inline(__always)
    private func lookup(_ key: Key) -> Int? {
        if let converted { return converted[key.stringValue] }
        var name = key.stringValue
        let found: Int
        if hinted {
            let slot = impl.hints + depth
            if slot.pointee.object != object { slot.pointee = (object, 0) }
            var hint = slot.pointee.hint
            found = name.withUTF8 { utf8 in
                courier_json_tape_get(impl.handle, object,
                                      UnsafeRawPointer(utf8.baseAddress)?.assumingMemoryBound(to: CChar.self), utf8.count, &hint)
            }
            slot.pointee.hint = hint
        } else {
            found = name.withUTF8 { utf8 in
                courier_json_tape_get(impl.handle, object,
                                      UnsafeRawPointer(utf8.baseAddress)?.assumingMemoryBound(to: CChar.self), utf8.count, nil)
            }
        }
        return found == 0 ? nil : found
    }

    @inline(__always)
    private func require(_ key: Key) throws -> Int {
        if let v = lookup(key) { return v }
        throw DecodingError.keyNotFound(key, .init(
            codingPath: codingPath,
            debugDescription: "No value associated with key \"\(key.stringValue)\" at \(_dottedPath(codingPath + [key]))"))
    }

    @inline(__always)
    private func path(_ key: Key) -> [any CodingKey] { codingPath + [key] }

    @inline(__always)
    private func present(_ key: Key) -> Int? {
        guard let v = lookup(key), impl.type(v) != _NULL else { return nil }
        return v
    }

    var allKeys: [Key] {
        if let converted { return converted.keys.compactMap { Key(stringValue: $0) } }
        var keys: [Key] = []
        Self.forEachMember(impl, object) { k, _ in
            if let key = Key(stringValue: impl.string(k)) { keys.append(key) }
        }
        return keys
    }

    func contains(_ key: Key) -> Bool { lookup(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { impl.type(try require(key)) == _NULL }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try impl.unboxBool(try require(key), path(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try impl.unboxString(try require(key), path(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        try impl.unboxDouble(try require(key), Double.self, path(key))
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try impl.unboxFloat(try require(key), path(key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try impl.unboxInteger(try require(key), Int.self, path(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try impl.unboxInteger(try require(key), Int8.self, path(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
        try impl.unboxInteger(try require(key), Int16.self, path(key))
    }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
        try impl.unboxInteger(try require(key), Int32.self, path(key))
    }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try impl.unboxInt64(try require(key), Int64.self, path(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { UInt(try impl.unboxUInt64(try require(key), path(key))) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
        try impl.unboxInteger(try require(key), UInt8.self, path(key))
    }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        try impl.unboxInteger(try require(key), UInt16.self, path(key))
    }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        try impl.unboxInteger(try require(key), UInt32.self, path(key))
    }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try impl.unboxUInt64(try require(key), path(key)) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try _child(impl, explicitPath, try require(key), type, key)
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let v = present(key) else { return nil }
        return try impl.unboxBool(v, path(key))
    }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let v = present(key) else { return nil }
        return try impl.unboxString(v, path(key))
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let v = present(key) else { return nil }
        return try impl.unboxDouble(v, Double.self, path(key))
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let v = present(key) else { return nil }
        return try impl.unboxInteger(v, Int.self, path(key))
    }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        guard let v = present(key) else { return nil }
        return try impl.unboxInt64(v, Int64.self, path(key))
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let v = present(key) else { return nil }
        return try _child(impl, explicitPath, v, type, key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                               forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let v = try require(key)
        guard impl.type(v) == _OBJECT else { throw impl.mismatch([String: Any].self, v, path(key)) }
        return KeyedDecodingContainer(_KeyedContainer<NestedKey>(impl: impl, object: v, depth: depth, explicitPath: path(key)))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let v = try require(key)
        guard impl.type(v) == _ARRAY else { throw impl.mismatch([Any].self, v, path(key)) }
        return _UnkeyedContainer(impl: impl, array: v, depth: depth, explicitPath: path(key))
    }

    func superDecoder() throws -> any Decoder { try decoderFor(_JSONKey.super) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try decoderFor(key) }

    private func decoderFor(_ key: any CodingKey) throws -> any Decoder {
        var name = key.stringValue
        let v = name.withUTF8 {
            courier_json_tape_get(impl.handle, object, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self),
                                  $0.count, nil)
        }
        guard v != 0 else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for super"))
        }
        return _ModelDecoderImpl(tape: impl.tape, value: v, codingPath: codingPath + [key], options: impl.options)
    }
}

// MARK: - Unkeyed container

struct _UnkeyedContainer: UnkeyedDecodingContainer {
    unowned(unsafe) let impl: _ModelDecoderImpl
    let array: Int
    let depth: Int
    let explicitPath: [any CodingKey]?
    let count: Int?
    private(set) var currentIndex = 0
    /// The entry of element `currentIndex`.
    private var cursor: Int

    var codingPath: [any CodingKey] { explicitPath ?? impl.path(depth: depth) }

    init(impl: _ModelDecoderImpl, array: Int, depth: Int, explicitPath: [any CodingKey]? = nil) {
        self.impl = impl
        self.array = array
        self.depth = depth
        self.explicitPath = explicitPath
        self.count = Int(impl.entries[array].length)
        cursor = array + 1
    }

    var isAtEnd: Bool { currentIndex >= count! }

    private var key: _IndexKey { _IndexKey(currentIndex) }
    private var path: [any CodingKey] { codingPath + [key] }

    @inline(__always)
    private func next(_ type: Any.Type) throws -> Int {
        guard currentIndex < count! else {
            throw DecodingError.valueNotFound(type, .init(
                codingPath: path, debugDescription: "Unkeyed container is at end at \(_dottedPath(path))"))
        }
        return cursor
    }

    @inline(__always)
    private mutating func advance() {
        cursor = impl.skip(cursor)
        currentIndex += 1
    }

    mutating func decodeNil() throws -> Bool {
        let v = try next(Never.self)
        if impl.type(v) == _NULL {
            advance()
            return true
        }
        return false
    }

    private mutating func scalar<T>(_ type: T.Type,
                                    _ read: (_ModelDecoderImpl, Int, [any CodingKey]) throws -> T) throws -> T {
        let v = try next(type)
        let result = try read(impl, v, path)
        advance()
        return result
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try scalar(type) { try $0.unboxBool($1, $2) } }
    mutating func decode(_ type: String.Type) throws -> String { try scalar(type) { try $0.unboxString($1, $2) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try scalar(type) { try $0.unboxDouble($1, Double.self, $2) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try scalar(type) { try $0.unboxFloat($1, $2) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try scalar(type) { try $0.unboxInteger($1, Int.self, $2) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try scalar(type) { try $0.unboxInteger($1, Int8.self, $2) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try scalar(type) { try $0.unboxInteger($1, Int16.self, $2) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try scalar(type) { try $0.unboxInteger($1, Int32.self, $2) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try scalar(type) { try $0.unboxInt64($1, Int64.self, $2) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try scalar(type) { UInt(try $0.unboxUInt64($1, $2)) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try scalar(type) { try $0.unboxInteger($1, UInt8.self, $2) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try scalar(type) { try $0.unboxInteger($1, UInt16.self, $2) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try scalar(type) { try $0.unboxInteger($1, UInt32.self, $2) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try scalar(type) { try $0.unboxUInt64($1, $2) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let v = try next(type)
        let result = try _child(impl, explicitPath, v, type, key)
        advance()
        return result
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let v = try next([String: Any].self)
        guard impl.type(v) == _OBJECT else { throw impl.mismatch([String: Any].self, v, path) }
        let container = _KeyedContainer<NestedKey>(impl: impl, object: v, depth: depth, explicitPath: path)
        advance()
        return KeyedDecodingContainer(container)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let v = try next([Any].self)
        guard impl.type(v) == _ARRAY else { throw impl.mismatch([Any].self, v, path) }
        let container = _UnkeyedContainer(impl: impl, array: v, depth: depth, explicitPath: path)
        advance()
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        let v = try next(Any.self)
        let decoder = _ModelDecoderImpl(tape: impl.tape, value: v, codingPath: path, options: impl.options)
        advance()
        return decoder
    }
}

// MARK: - Helpers

/// Decodes a child value of a container: on the decoder's path stack, or, for a container made by
/// nestedContainer, with that container's whole path in place for the duration.
@inline(__always)
func _child<T: Decodable>(_ impl: _ModelDecoderImpl, _ explicitPath: [any CodingKey]?, _ v: Int,
                          _ type: T.Type, _ key: any CodingKey) throws -> T {
    guard let explicitPath else { return try impl.unbox(v, as: type, key: key) }
    let saved = impl.codingPath
    impl.codingPath = explicitPath
    defer { impl.codingPath = saved }
    return try impl.unbox(v, as: type, key: key)
}

/// JSONDecoder's snake_case to camelCase conversion: "user_name" -> "userName"; leading and
/// trailing underscores are kept.
func _convertFromSnakeCase(_ key: String) -> String {
    guard !key.isEmpty, key.contains("_") else { return key }
    guard let first = key.firstIndex(where: { $0 != "_" }) else { return key }
    var last = key.index(before: key.endIndex)
    while last > first && key[last] == "_" { last = key.index(before: last) }
    let core = key[first...last]
    let words = core.split(separator: "_", omittingEmptySubsequences: true)
    guard let head = words.first else { return key }
    let joined = String(head) + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined()
    return String(key[..<first]) + joined + String(key[key.index(after: last)...])
}

/// ISO 8601 with and without fractional seconds. ISO8601DateFormatter is thread-safe.
enum _ISO8601 {
    nonisolated(unsafe) static let plain: ISO8601DateFormatter = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f
    }()
    nonisolated(unsafe) static let fractional: ISO8601DateFormatter = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f
    }()

    static func parse(_ text: String) -> Date? { plain.date(from: text) ?? fractional.date(from: text) }
    static func format(_ date: Date) -> String { plain.string(from: date) }
}
