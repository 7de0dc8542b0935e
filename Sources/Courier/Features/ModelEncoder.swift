// ModelEncoder.swift — a Swift `Encoder` that builds the C core's JSON values directly, so the text
// a request sends is written by the core's own serializer: the same JSON from every language.

import Foundation
internal import CCore

// MARK: - ModelEncoder

/// Encodes `Encodable` values into JSON built by the C core.
///
/// ```swift
/// let data = try ModelEncoder().encode(user)                  // JSON text
/// let request = Request.post("/users").jsonBody(user)         // a JSON request body
/// ```
public struct ModelEncoder: Sendable {
    /// How dates are written.
    public enum DateEncodingStrategy: Sendable {
        /// `Date`'s own `Encodable` (seconds since 2001-01-01 as a number).
        case deferredToDate
        /// Seconds since 1970 (a number).
        case secondsSince1970
        /// Milliseconds since 1970 (a number).
        case millisecondsSince1970
        /// An ISO 8601 string ("2024-05-01T12:00:00Z").
        case iso8601
        /// A string written by the formatter.
        case formatted(DateFormatter)
        /// Your own writing.
        case custom(@Sendable (Date, any Encoder) throws -> Void)
    }

    /// How `Data` is written.
    public enum DataEncodingStrategy: Sendable {
        /// `Data`'s own `Encodable` (an array of bytes).
        case deferredToData
        /// A base64 string.
        case base64
        /// Your own writing.
        case custom(@Sendable (Data, any Encoder) throws -> Void)
    }

    /// How coding keys become JSON keys.
    public enum KeyEncodingStrategy: Sendable {
        /// The coding key's string.
        case useDefaultKeys
        /// camelCase coding keys become snake_case JSON keys (as JSONEncoder's).
        case convertToSnakeCase
    }

    /// Formatting of the text. Default compact, members in encoding order.
    public var outputFormatting: JSON.OutputFormatting = []
    /// How dates are written. Default ``DateEncodingStrategy/deferredToDate``.
    public var dateEncodingStrategy: DateEncodingStrategy = .deferredToDate
    /// How `Data` is written. Default ``DataEncodingStrategy/base64``.
    public var dataEncodingStrategy: DataEncodingStrategy = .base64
    /// How keys are written. Default ``KeyEncodingStrategy/useDefaultKeys``.
    public var keyEncodingStrategy: KeyEncodingStrategy = .useDefaultKeys
    /// Values for your `encode(to:)`s to read from `encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// An encoder with the default strategies.
    public init() {}

    /// Encodes a value as JSON text.
    /// - Parameter value: The value.
    /// - Returns: UTF-8 JSON text.
    /// - Throws: `EncodingError` (a non-finite number, nothing encoded), ``CourierError``.
    public func encode<T: Encodable>(_ value: T) throws -> Data {
        try encodeJSON(value).data(formatting: outputFormatting)
    }

    /// Encodes a value as a JSON value held by the C core.
    /// - Parameter value: The value.
    /// - Returns: The JSON.
    /// - Throws: As ``encode(_:)``.
    public func encodeJSON<T: Encodable>(_ value: T) throws -> JSON {
        let root = try encodeOwned(value)
        let document = JSONDocument(taking: root)
        return JSON(root, owner: document)
    }

    /// A new `courier_json *` the caller owns.
    func encodeOwned<T: Encodable>(_ value: T) throws -> OpaquePointer {
        let impl = _ModelEncoderImpl(options: _EncoderOptions(self), codingPath: [])
        return try impl.box(value)
    }
}

// MARK: - Options

final class _EncoderOptions {
    let date: ModelEncoder.DateEncodingStrategy
    let data: ModelEncoder.DataEncodingStrategy
    let snakeCase: Bool
    let userInfo: [CodingUserInfoKey: Any]

    init(_ e: ModelEncoder) {
        date = e.dateEncodingStrategy
        data = e.dataEncodingStrategy
        if case .convertToSnakeCase = e.keyEncodingStrategy { snakeCase = true } else { snakeCase = false }
        userInfo = e.userInfo
    }
}

// MARK: - Making C values

@inline(__always)
private func made(_ rc: Int32, _ value: OpaquePointer?, _ path: [any CodingKey], _ what: Any) throws -> OpaquePointer {
    guard rc == COURIER_OK.rawValue, let value else {
        throw EncodingError.invalidValue(what, .init(codingPath: path,
            debugDescription: "The C core refused the value at \(_dottedPath(path)): \(String(cString: courier_strerror(rc)))"))
    }
    return value
}

func _cString(_ s: String, _ path: [any CodingKey]) throws -> OpaquePointer {
    var s = s
    var out: OpaquePointer?
    let rc = s.withUTF8 { courier_json_new_string(&out, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self), $0.count) }
    return try made(rc, out, path, s)
}

func _cInteger(_ n: Int64, _ path: [any CodingKey]) throws -> OpaquePointer {
    var out: OpaquePointer?
    return try made(courier_json_new_integer(&out, n), out, path, n)
}

func _cReal(_ d: Double, _ path: [any CodingKey]) throws -> OpaquePointer {
    guard d.isFinite else {
        throw EncodingError.invalidValue(d, .init(codingPath: path,
            debugDescription: "Unable to encode \(d) at \(_dottedPath(path)): JSON has no NaN or infinity"))
    }
    var out: OpaquePointer?
    return try made(courier_json_new_real(&out, d), out, path, d)
}

func _cBool(_ b: Bool, _ path: [any CodingKey]) throws -> OpaquePointer {
    var out: OpaquePointer?
    return try made(courier_json_new_bool(&out, b ? 1 : 0), out, path, b)
}

func _cNull(_ path: [any CodingKey]) throws -> OpaquePointer {
    var out: OpaquePointer?
    return try made(courier_json_new_null(&out), out, path, "null")
}

func _cObject(_ path: [any CodingKey]) throws -> OpaquePointer {
    var out: OpaquePointer?
    return try made(courier_json_new_object(&out), out, path, "object")
}

func _cArray(_ path: [any CodingKey]) throws -> OpaquePointer {
    var out: OpaquePointer?
    return try made(courier_json_new_array(&out), out, path, "array")
}

// MARK: - The encoder

/// One value being encoded. Holds the value it produced (owned) until `take()`.
class _ModelEncoderImpl: Encoder, SingleValueEncodingContainer {
    let options: _EncoderOptions
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { options.userInfo }
    /// The value made so far (owned), or nil.
    var storage: OpaquePointer?

    init(options: _EncoderOptions, codingPath: [any CodingKey]) {
        self.options = options
        self.codingPath = codingPath
    }

    deinit { if let storage { courier_json_free(storage) } }

    /// The produced value (owned by the caller now); `{}` when nothing was encoded, as JSONEncoder.
    func take() throws -> OpaquePointer {
        if let storage {
            self.storage = nil
            return storage
        }
        return try _cObject(codingPath)
    }

    /// Encodes any value into a new owned C value.
    func box<T: Encodable>(_ value: T) throws -> OpaquePointer {
        switch value {
        case let v as String: return try _cString(v, codingPath)
        case let v as Int: return try _cInteger(Int64(v), codingPath)
        case let v as Double: return try _cReal(v, codingPath)
        case let v as Bool: return try _cBool(v, codingPath)
        case let v as Date: return try boxDate(v)
        case let v as Data: return try boxData(v)
        case let v as URL: return try _cString(v.absoluteString, codingPath)
        case let v as Decimal: return try _cReal(NSDecimalNumber(decimal: v).doubleValue, codingPath)
        default:
            let sub = _ModelEncoderImpl(options: options, codingPath: codingPath)
            try value.encode(to: sub)
            return try sub.take()
        }
    }

    func boxDate(_ date: Date) throws -> OpaquePointer {
        switch options.date {
        case .deferredToDate:
            let sub = _ModelEncoderImpl(options: options, codingPath: codingPath)
            try date.encode(to: sub)
            return try sub.take()
        case .secondsSince1970: return try _cReal(date.timeIntervalSince1970, codingPath)
        case .millisecondsSince1970: return try _cReal(date.timeIntervalSince1970 * 1000, codingPath)
        case .iso8601: return try _cString(_ISO8601.format(date), codingPath)
        case .formatted(let formatter): return try _cString(formatter.string(from: date), codingPath)
        case .custom(let write):
            let sub = _ModelEncoderImpl(options: options, codingPath: codingPath)
            try write(date, sub)
            return try sub.take()
        }
    }

    func boxData(_ data: Data) throws -> OpaquePointer {
        switch options.data {
        case .deferredToData:
            let sub = _ModelEncoderImpl(options: options, codingPath: codingPath)
            try data.encode(to: sub)
            return try sub.take()
        case .base64: return try _cString(data.base64EncodedString(), codingPath)
        case .custom(let write):
            let sub = _ModelEncoderImpl(options: options, codingPath: codingPath)
            try write(data, sub)
            return try sub.take()
        }
    }

    func keyString(_ key: any CodingKey) -> String {
        options.snakeCase ? _convertToSnakeCase(key.stringValue) : key.stringValue
    }

    // MARK: Containers

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if storage == nil || courier_json_typeof(storage) != COURIER_JSON_OBJECT.rawValue {
            if let storage { courier_json_free(storage) }
            storage = try? _cObject(codingPath)
        }
        return KeyedEncodingContainer(_KeyedEncoding<Key>(impl: self, object: storage, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if storage == nil || courier_json_typeof(storage) != COURIER_JSON_ARRAY.rawValue {
            if let storage { courier_json_free(storage) }
            storage = try? _cArray(codingPath)
        }
        return _UnkeyedEncoding(impl: self, array: storage, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    // MARK: SingleValueEncodingContainer

    private func set(_ value: OpaquePointer) {
        if let storage { courier_json_free(storage) }
        storage = value
    }

    func encodeNil() throws { set(try _cNull(codingPath)) }
    func encode(_ value: Bool) throws { set(try _cBool(value, codingPath)) }
    func encode(_ value: String) throws { set(try _cString(value, codingPath)) }
    func encode(_ value: Double) throws { set(try _cReal(value, codingPath)) }
    func encode(_ value: Float) throws { set(try _cReal(Double(value), codingPath)) }
    func encode(_ value: Int) throws { set(try _cInteger(Int64(value), codingPath)) }
    func encode(_ value: Int8) throws { set(try _cInteger(Int64(value), codingPath)) }
    func encode(_ value: Int16) throws { set(try _cInteger(Int64(value), codingPath)) }
    func encode(_ value: Int32) throws { set(try _cInteger(Int64(value), codingPath)) }
    func encode(_ value: Int64) throws { set(try _cInteger(value, codingPath)) }
    func encode(_ value: UInt) throws { set(try boxUnsigned(UInt64(value), codingPath)) }
    func encode(_ value: UInt8) throws { set(try _cInteger(Int64(value), codingPath)) }
    func encode(_ value: UInt16) throws { set(try _cInteger(Int64(value), codingPath)) }
    func encode(_ value: UInt32) throws { set(try _cInteger(Int64(value), codingPath)) }
    func encode(_ value: UInt64) throws { set(try boxUnsigned(value, codingPath)) }
    func encode<T: Encodable>(_ value: T) throws { set(try box(value)) }
}

/// An unsigned value beyond Int64 becomes a real (JSON has one number type; the core's integers are 64-bit signed).
func boxUnsigned(_ v: UInt64, _ path: [any CodingKey]) throws -> OpaquePointer {
    if let n = Int64(exactly: v) { return try _cInteger(n, path) }
    return try _cReal(Double(v), path)
}

/// An encoder for `superEncoder()`: writes its value into the parent container when released.
final class _ReferencingEncoder: _ModelEncoderImpl {
    enum Target {
        case object(OpaquePointer, String)
        case array(OpaquePointer)
    }
    let target: Target

    init(parent: _ModelEncoderImpl, target: Target, codingPath: [any CodingKey]) {
        self.target = target
        super.init(options: parent.options, codingPath: codingPath)
    }

    deinit {
        guard let value = try? take() else { return }
        storage = nil
        switch target {
        case .object(let object, var key):
            _ = key.withUTF8 { courier_json_object_set(object, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self), $0.count, value) }
        case .array(let array): _ = courier_json_array_append(array, value)
        }
    }
}

// MARK: - Keyed

struct _KeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let impl: _ModelEncoderImpl
    let object: OpaquePointer?
    let codingPath: [any CodingKey]

    private func put(_ key: Key, _ make: ([any CodingKey]) throws -> OpaquePointer) throws {
        let path = codingPath + [key]
        guard let object else { throw EncodingError.invalidValue(key.stringValue, .init(codingPath: path, debugDescription: "out of memory")) }
        let value = try make(path)
        var name = impl.keyString(key)
        let rc = name.withUTF8 {
            courier_json_object_set(object, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self), $0.count, value)
        }
        if rc != COURIER_OK.rawValue {
            throw EncodingError.invalidValue(name, .init(codingPath: path,
                debugDescription: "The C core refused the key at \(_dottedPath(path)): \(String(cString: courier_strerror(rc)))"))
        }
    }

    mutating func encodeNil(forKey key: Key) throws { try put(key) { try _cNull($0) } }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try put(key) { try _cBool(value, $0) } }
    mutating func encode(_ value: String, forKey key: Key) throws { try put(key) { try _cString(value, $0) } }
    mutating func encode(_ value: Double, forKey key: Key) throws { try put(key) { try _cReal(value, $0) } }
    mutating func encode(_ value: Float, forKey key: Key) throws { try put(key) { try _cReal(Double(value), $0) } }
    mutating func encode(_ value: Int, forKey key: Key) throws { try put(key) { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try put(key) { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try put(key) { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try put(key) { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try put(key) { try _cInteger(value, $0) } }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try put(key) { try boxUnsigned(UInt64(value), $0) } }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try put(key) { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try put(key) { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try put(key) { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try put(key) { try boxUnsigned(value, $0) } }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try put(key) { path in
            impl.codingPath = path
            defer { impl.codingPath = codingPath }
            return try impl.box(value)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                        forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        var nested: OpaquePointer?
        try? put(key) { path in
            let o = try _cObject(path)
            nested = o
            return o
        }
        return KeyedEncodingContainer(_KeyedEncoding<NestedKey>(impl: impl, object: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        var nested: OpaquePointer?
        try? put(key) { path in
            let a = try _cArray(path)
            nested = a
            return a
        }
        return _UnkeyedEncoding(impl: impl, array: nested, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        _ReferencingEncoder(parent: impl, target: .object(object!, "super"), codingPath: codingPath + [_JSONKey.super])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        _ReferencingEncoder(parent: impl, target: .object(object!, impl.keyString(key)), codingPath: codingPath + [key])
    }
}

// MARK: - Unkeyed

struct _UnkeyedEncoding: UnkeyedEncodingContainer {
    let impl: _ModelEncoderImpl
    let array: OpaquePointer?
    let codingPath: [any CodingKey]
    var count: Int { courier_json_size(array) }

    private func add(_ make: ([any CodingKey]) throws -> OpaquePointer) throws {
        let path = codingPath + [_JSONKey(intValue: count)]
        guard let array else { throw EncodingError.invalidValue(count, .init(codingPath: path, debugDescription: "out of memory")) }
        let rc = courier_json_array_append(array, try make(path))
        if rc != COURIER_OK.rawValue {
            throw EncodingError.invalidValue(count, .init(codingPath: path, debugDescription: "out of memory"))
        }
    }

    mutating func encodeNil() throws { try add { try _cNull($0) } }
    mutating func encode(_ value: Bool) throws { try add { try _cBool(value, $0) } }
    mutating func encode(_ value: String) throws { try add { try _cString(value, $0) } }
    mutating func encode(_ value: Double) throws { try add { try _cReal(value, $0) } }
    mutating func encode(_ value: Float) throws { try add { try _cReal(Double(value), $0) } }
    mutating func encode(_ value: Int) throws { try add { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int8) throws { try add { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int16) throws { try add { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int32) throws { try add { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: Int64) throws { try add { try _cInteger(value, $0) } }
    mutating func encode(_ value: UInt) throws { try add { try boxUnsigned(UInt64(value), $0) } }
    mutating func encode(_ value: UInt8) throws { try add { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: UInt16) throws { try add { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: UInt32) throws { try add { try _cInteger(Int64(value), $0) } }
    mutating func encode(_ value: UInt64) throws { try add { try boxUnsigned(value, $0) } }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try add { path in
            impl.codingPath = path
            defer { impl.codingPath = codingPath }
            return try impl.box(value)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = codingPath + [_JSONKey(intValue: count)]
        var nested: OpaquePointer?
        try? add { p in
            let o = try _cObject(p)
            nested = o
            return o
        }
        return KeyedEncodingContainer(_KeyedEncoding<NestedKey>(impl: impl, object: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = codingPath + [_JSONKey(intValue: count)]
        var nested: OpaquePointer?
        try? add { p in
            let a = try _cArray(p)
            nested = a
            return a
        }
        return _UnkeyedEncoding(impl: impl, array: nested, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        _ReferencingEncoder(parent: impl, target: .array(array!), codingPath: codingPath + [_JSONKey(intValue: count)])
    }
}

/// JSONEncoder's camelCase to snake_case conversion: "userName" -> "user_name", "myURLValue" -> "my_url_value".
func _convertToSnakeCase(_ key: String) -> String {
    guard !key.isEmpty else { return key }
    var words: [Range<String.Index>] = []
    var wordStart = key.startIndex
    var searchRange = key.index(after: wordStart)..<key.endIndex
    while let upperCaseRange = key.rangeOfCharacter(from: .uppercaseLetters, options: [], range: searchRange) {
        let untilUpperCase = wordStart..<upperCaseRange.lowerBound
        words.append(untilUpperCase)
        searchRange = upperCaseRange.lowerBound..<searchRange.upperBound
        guard let lowerCaseRange = key.rangeOfCharacter(from: .lowercaseLetters, options: [], range: searchRange) else {
            wordStart = searchRange.lowerBound
            break
        }
        let nextCharacterAfterCapital = key.index(after: upperCaseRange.lowerBound)
        if lowerCaseRange.lowerBound == nextCharacterAfterCapital {
            wordStart = upperCaseRange.lowerBound
        } else {
            let beforeLowerIndex = key.index(before: lowerCaseRange.lowerBound)
            words.append(upperCaseRange.lowerBound..<beforeLowerIndex)
            wordStart = beforeLowerIndex
        }
        searchRange = lowerCaseRange.upperBound..<searchRange.upperBound
    }
    words.append(wordStart..<searchRange.upperBound)
    return words.map { key[$0].lowercased() }.filter { !$0.isEmpty }.joined(separator: "_")
}
