// Model.swift — model conversion helpers in the manner of the seeds' HTHTTPModel / NSObject+HTModel
// (modelWithJSON:, modelToJSONData, ...), on Codable and the C core's JSON. Nested arrays of models
// (the seeds' collectionCustomObjectTypes) come with Codable.

import Foundation

// MARK: - JSONModel

/// A Codable model with conversions to and from JSON, through the C core's parser and serializer.
///
/// ```swift
/// struct User: JSONModel { let id: Int; let name: String }
/// let user = try User(json: data)
/// let users = try User.models(json: "[{\"id\":1,\"name\":\"a\"}]")
/// let text = try user.jsonString()
/// ```
public protocol JSONModel: Codable {
    /// The decoder used by the conversions. Default: ``ModelDecoder`` with default strategies.
    static var modelDecoder: ModelDecoder { get }
    /// The encoder used by the conversions. Default: ``ModelEncoder`` with default strategies.
    static var modelEncoder: ModelEncoder { get }
}

extension JSONModel {
    /// A default ``ModelDecoder``.
    public static var modelDecoder: ModelDecoder { ModelDecoder() }
    /// A default ``ModelEncoder``.
    public static var modelEncoder: ModelEncoder { ModelEncoder() }

    /// A model from JSON text (HTHTTPModel's `modelWithJSON:`).
    /// - Parameters:
    ///   - json: UTF-8 JSON text.
    ///   - keyPath: Where the model is inside the document, or nil for the root.
    /// - Throws: ``CourierError`` (not JSON) or `DecodingError` (does not fit).
    public init(json: Data, keyPath: String? = nil) throws {
        self = try Self.modelDecoder.decode(Self.self, from: json, keyPath: keyPath)
    }

    /// A model from JSON text given as a string.
    /// - Parameters:
    ///   - json: JSON text.
    ///   - keyPath: Where the model is inside the document, or nil for the root.
    /// - Throws: As ``init(json:keyPath:)-(Data,_)``.
    public init(json: String, keyPath: String? = nil) throws {
        try self.init(json: Data(json.utf8), keyPath: keyPath)
    }

    /// A model from a parsed JSON value (a response's ``Response/result``, say).
    /// - Parameter json: The value.
    /// - Throws: `DecodingError`.
    public init(json: JSON) throws {
        self = try Self.modelDecoder.decode(Self.self, from: json)
    }

    /// A model from a dictionary-like value of JSON types (String, numbers, Bool, NSNull, arrays
    /// and dictionaries of them) — HTHTTPModel's `modelWithDictionary:`.
    /// - Parameter object: The value.
    /// - Throws: ``CourierError`` (not representable as JSON) or `DecodingError`.
    public init(jsonObject object: Any) throws {
        self = try Self.modelDecoder.decode(Self.self, from: try JSON(object: object))
    }

    /// Models from a JSON array (HTHTTPModel's `modelSetWithJSON:`).
    /// - Parameters:
    ///   - json: UTF-8 JSON text of an array.
    ///   - keyPath: Where the array is inside the document, or nil for the root.
    /// - Returns: The models.
    /// - Throws: As ``init(json:keyPath:)-(Data,_)``.
    public static func models(json: Data, keyPath: String? = nil) throws -> [Self] {
        try modelDecoder.decode([Self].self, from: json, keyPath: keyPath)
    }

    /// Models from a JSON array given as a string.
    /// - Parameters:
    ///   - json: JSON text of an array.
    ///   - keyPath: Where the array is inside the document, or nil for the root.
    /// - Returns: The models.
    /// - Throws: As ``init(json:keyPath:)-(Data,_)``.
    public static func models(json: String, keyPath: String? = nil) throws -> [Self] {
        try models(json: Data(json.utf8), keyPath: keyPath)
    }

    /// The model as JSON text (HTHTTPModel's `modelToJSONData`).
    /// - Parameter formatting: Formatting of the text.
    /// - Returns: UTF-8 JSON text.
    /// - Throws: `EncodingError`, ``CourierError``.
    public func jsonData(formatting: JSON.OutputFormatting = []) throws -> Data {
        var encoder = Self.modelEncoder
        encoder.outputFormatting = formatting
        return try encoder.encode(self)
    }

    /// The model as JSON text (`modelToJSONString`).
    /// - Parameter formatting: Formatting of the text.
    /// - Returns: The text.
    /// - Throws: As ``jsonData(formatting:)``.
    public func jsonString(formatting: JSON.OutputFormatting = []) throws -> String {
        String(decoding: try jsonData(formatting: formatting), as: UTF8.self)
    }

    /// The model as a JSON value held by the C core.
    /// - Returns: The value.
    /// - Throws: As ``jsonData(formatting:)``.
    public func json() throws -> JSON { try Self.modelEncoder.encodeJSON(self) }

    /// The model as Foundation values (`modelToJSONObject`): dictionaries, arrays, String,
    /// Int64, Double, Bool and NSNull.
    /// - Returns: The value.
    /// - Throws: As ``jsonData(formatting:)``.
    public func jsonObject() throws -> Any { try json().foundationValue }
}

// MARK: - Foundation values

extension JSON {
    /// A JSON value made from Foundation values: String, Bool, integers, floating point numbers,
    /// NSNull, arrays and `[String: Any]` dictionaries of them (NSNumber booleans become bools).
    /// - Parameter object: The value.
    /// - Throws: ``CourierError`` with ``CourierError/Code/invalidArgument`` for anything else.
    public init(object: Any) throws {
        let root = try _JSONFromFoundation.make(object, depth: 0)
        let document = JSONDocument(taking: root)
        self.init(root, owner: document)
    }

    /// This value as Foundation values: `[String: Any]`, `[Any]`, String, Int64, Double, Bool, NSNull.
    public var foundationValue: Any {
        switch kind {
        case .object:
            var out: [String: Any] = [:]
            for (key, value) in members { out[key] = value.foundationValue }
            return out
        case .array: return elements.map(\.foundationValue)
        case .string: return string ?? ""
        case .integer: return int ?? 0
        case .real: return double ?? 0
        case .bool: return bool ?? false
        case .null: return NSNull()
        }
    }
}

enum _JSONFromFoundation {
    static func make(_ object: Any, depth: Int) throws -> OpaquePointer {
        let path: [any CodingKey] = []
        guard depth < 512 else { throw CourierError(.invalidArgument, message: "value nested too deeply") }
        switch object {
        case let v as String: return try _cString(v, path)
        case is NSNull: return try _cNull(path)
        case let v as Bool where !(object is NSNumber) || CFGetTypeIDIfBool(object): return try _cBool(v, path)
        case let v as Int: return try _cInteger(Int64(v), path)
        case let v as Int64: return try _cInteger(v, path)
        case let v as Int32: return try _cInteger(Int64(v), path)
        case let v as UInt: return try boxUnsigned(UInt64(v), path)
        case let v as UInt64: return try boxUnsigned(v, path)
        case let v as Double: return try _cReal(v, path)
        case let v as Float: return try _cReal(Double(v), path)
        case let v as [Any]:
            let array = try _cArray(path)
            for element in v {
                let e: OpaquePointer
                do { e = try make(element, depth: depth + 1) } catch { _courierJSONFree(array); throw error }
                if _courierJSONAppend(array, e) != 0 { _courierJSONFree(array); throw CourierError(.noMemory) }
            }
            return array
        case let v as [String: Any]:
            let object = try _cObject(path)
            for (key, element) in v.sorted(by: { $0.key < $1.key }) {
                let e: OpaquePointer
                do { e = try make(element, depth: depth + 1) } catch { _courierJSONFree(object); throw error }
                if _courierJSONSet(object, key, e) != 0 { _courierJSONFree(object); throw CourierError(.invalidEncoding) }
            }
            return object
        default:
            throw CourierError(.invalidArgument, message: "\(type(of: object)) is not a JSON value")
        }
    }

    /// On Linux an NSNumber made from a Bool casts to both Bool and Int: keep it a bool only when it was one.
    private static func CFGetTypeIDIfBool(_ object: Any) -> Bool {
        guard let n = object as? NSNumber else { return true }
        return String(cString: n.objCType) == "c" || type(of: n) == type(of: NSNumber(value: true))
    }
}
