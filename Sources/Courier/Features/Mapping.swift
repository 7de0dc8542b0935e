// Mapping.swift — the C core's mappings and envelopes as Swift values: a description built by
// chaining, turned into the C objects when it is used. The mapping itself runs in C, once, the same
// for every language.

import Foundation
internal import CCore

// MARK: - Mapping

/// How an object in a response becomes a normalized object (the seeds' RestKit object mapping):
/// attributes taken from key paths under new names, checked and coerced to types; relationships to
/// nested objects and arrays of objects mapped by other mappings. Applied to an array, it maps each
/// element. Members it does not name are left out.
///
/// ```swift
/// let item = Mapping()
///     .attribute("id", .integer, required: true)
///     .attribute("title", to: "name", .string)
///     .attribute("price", .real, coercions: .numberFromString)
/// let list = Mapping().attribute("total", .integer).relationship("items", item, many: true)
/// let response = try await engine.send(.get("/items").keyPath("data").mapping(list))
/// ```
public struct Mapping: Sendable {
    /// The type an attribute must have.
    public enum ValueType: Int32, Sendable {
        /// An object.
        case object = 1
        /// An array.
        case array = 2
        /// A string.
        case string = 3
        /// An integer (a real without fraction is accepted).
        case integer = 4
        /// A real (an integer is accepted and converted).
        case real = 5
        /// true or false.
        case bool = 6
        /// An integer or a real, kept as it is.
        case number = 8
        /// Anything, null included.
        case any = 9
    }

    /// Type coercions.
    public struct Coercions: OptionSet, Sendable {
        /// The raw `COURIER_MAP_*` flags.
        public let rawValue: UInt32
        /// Creates coercions from raw flags.
        /// - Parameter rawValue: `COURIER_MAP_*` coercion flags.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// "42" becomes 42 (integer, real, number).
        public static let numberFromString = Coercions(rawValue: COURIER_MAP_NUMBER_FROM_STRING)
        /// 42 becomes "42" (string).
        public static let stringFromNumber = Coercions(rawValue: COURIER_MAP_STRING_FROM_NUMBER)
        /// 0 and 1 become false and true (bool).
        public static let boolFromNumber = Coercions(rawValue: COURIER_MAP_BOOL_FROM_NUMBER)
        /// null counts as absent: the default applies, or the member is left out.
        public static let nullAsAbsent = Coercions(rawValue: COURIER_MAP_NULL_AS_ABSENT)
        /// All of them.
        public static let all: Coercions = [.numberFromString, .stringFromNumber, .boolFromNumber, .nullAsAbsent]
    }

    enum Entry: Sendable {
        case attribute(source: String, dest: String?, type: ValueType, flags: UInt32, defaultValue: JSON?)
        case relationship(source: String, dest: String?, mapping: Mapping?, many: Bool, flags: UInt32) // nil: itself
    }

    var entries: [Entry] = []
    var coercions: Coercions = []
    /// The C mapping, made once on first use.
    let cache = _MappingCache()

    /// An empty mapping.
    public init() {}

    private func with(_ change: (inout Mapping) -> Void) -> Mapping {
        var copy = Mapping()
        copy.entries = entries
        copy.coercions = coercions
        change(&copy)
        return copy
    }

    /// Adds an attribute.
    /// - Parameters:
    ///   - source: Key path of the value in the mapped object ("id", "profile.age").
    ///   - dest: The output member's name; nil means the last component of `source`.
    ///   - type: What the value must be.
    ///   - required: Whether an absent (or null) value fails the mapping.
    ///   - coercions: Coercions for this attribute.
    ///   - defaultValue: The value used when it is absent.
    /// - Returns: The changed mapping.
    public func attribute(_ source: String, to dest: String? = nil, _ type: ValueType = .any, required: Bool = false,
                          coercions: Coercions = [], default defaultValue: JSON? = nil) -> Mapping {
        with {
            $0.entries.append(.attribute(source: source, dest: dest, type: type,
                                         flags: coercions.rawValue | (required ? COURIER_MAP_REQUIRED : 0),
                                         defaultValue: defaultValue))
        }
    }

    /// Adds a relationship: the value at `source` is an object (or, with `many`, an array of
    /// objects) mapped by `mapping`.
    /// - Parameters:
    ///   - source: Key path of the value.
    ///   - dest: The output member's name; nil means the last component of `source`.
    ///   - mapping: The mapping of the nested objects.
    ///   - many: Whether the value is an array of objects.
    ///   - required: Whether an absent value fails the mapping.
    /// - Returns: The changed mapping.
    public func relationship(_ source: String, to dest: String? = nil, _ mapping: Mapping, many: Bool = false,
                             required: Bool = false) -> Mapping {
        with {
            $0.entries.append(.relationship(source: source, dest: dest, mapping: mapping, many: many,
                                            flags: required ? COURIER_MAP_REQUIRED : 0))
        }
    }

    /// Adds a relationship to this same mapping (trees: a node with child nodes).
    /// - Parameters:
    ///   - source: Key path of the value.
    ///   - dest: The output member's name; nil means the last component of `source`.
    ///   - many: Whether the value is an array of objects.
    /// - Returns: The changed mapping.
    public func recursive(_ source: String, to dest: String? = nil, many: Bool = true) -> Mapping {
        with { $0.entries.append(.relationship(source: source, dest: dest, mapping: nil, many: many, flags: 0)) }
    }

    /// Coercions applied to every attribute of this mapping.
    /// - Parameter coercions: The coercions.
    /// - Returns: The changed mapping.
    public func coercions(_ coercions: Coercions) -> Mapping { with { $0.coercions = coercions } }

    /// The C mapping (`courier_mapping *`), borrowed: valid as long as this value.
    func handle() throws -> OpaquePointer { try cache.get { try build() } }

    private func build() throws -> OpaquePointer {
        var created: OpaquePointer?
        try CourierError.check(courier_mapping_new(&created), "mapping")
        guard let m = created else { throw CourierError(.noMemory) }
        do {
            try CourierError.check(courier_mapping_set_coercions(m, coercions.rawValue), "mapping coercions")
            for entry in entries {
                switch entry {
                case let .attribute(source, dest, type, flags, defaultValue):
                    try CourierError.check(courier_mapping_add_attribute(m, source, dest, courier_json_type(rawValue: numericCast(type.rawValue)), flags),
                                           "mapping attribute '\(source)'")
                    if let defaultValue {
                        let name = dest ?? String(source.split(separator: ".").last ?? Substring(source))
                        try withExtendedLifetime(defaultValue.owner) {
                            try CourierError.check(courier_mapping_set_default(m, name, defaultValue.pointer),
                                                   "mapping default of '\(name)'")
                        }
                    }
                case let .relationship(source, dest, mapping, many, flags):
                    let child = try mapping?.handle() ?? m
                    try CourierError.check(courier_mapping_add_relationship(m, source, dest, child, many ? 1 : 0, flags),
                                           "mapping relationship '\(source)'")
                }
            }
        } catch {
            courier_mapping_free(m)
            throw error
        }
        return m
    }

    /// Applies the mapping to a JSON value, in the C core.
    /// - Parameter json: The input.
    /// - Returns: The normalized value.
    /// - Throws: ``CourierError`` with ``CourierError/Code/mapping`` (its message names the path and
    ///   the expected and found types).
    public func apply(to json: JSON) throws -> JSON {
        let m = try handle()
        var out: OpaquePointer?
        var error = courier_error()
        let rc = withExtendedLifetime(json.owner) { courier_mapping_apply(&out, nil, m, json.pointer, &error) }
        guard rc == COURIER_OK.rawValue, let out else { throw CourierError(code: rc, detail: &error) }
        return JSON(out, owner: JSONDocument(taking: out))
    }
}

/// Holds a C mapping made once; frees it at deinit.
/// `@unchecked Sendable`: creation is under a lock, and a made mapping is sealed (immutable).
final class _MappingCache: @unchecked Sendable {
    private let lock = NSLock()
    private var made: OpaquePointer?

    func get(_ make: () throws -> OpaquePointer) throws -> OpaquePointer {
        lock.lock()
        defer { lock.unlock() }
        if let made { return made }
        let m = try make()
        made = m
        return m
    }

    deinit { if let made { courier_mapping_free(made) } }
}

// MARK: - Envelope

/// The frame every JSON response of an engine shares, such as
/// `{"code": 200, "message": "...", "data": ...}` (the seeds' global error descriptor and
/// `validResultBlock`). A response whose code is not a success fails with
/// ``CourierError/Code/api``; ``Response/envelopeCode`` and ``Response/envelopeMessage`` tell why.
///
/// ```swift
/// let envelope = Envelope(code: "code", message: "message", data: "data").success(codes: [0, 200])
/// var configuration = Configuration(baseURL: url)
/// configuration.envelope = envelope
/// let engine = try Engine(configuration: configuration)
/// ```
public struct Envelope: Sendable {
    var codePath: String?
    var codeRequired = false
    var messagePath: String?
    var dataPath: String?
    var codes: [Int64] = []
    var range: ClosedRange<Int64>?
    var shape: Mapping?
    var check: (@Sendable (_ document: JSON, _ code: Int64?, _ message: String?) -> Bool)?

    /// An envelope.
    /// - Parameters:
    ///   - code: Key path of the code (an integer or a string of digits), or nil.
    ///   - message: Key path of the message, or nil.
    ///   - data: Key path of the business data (a request's default result), or nil.
    ///   - codeRequired: Whether a body without a code fails (with ``CourierError/Code/mapping``).
    public init(code: String? = "code", message: String? = "message", data: String? = "data", codeRequired: Bool = false) {
        codePath = code
        messagePath = message
        dataPath = data
        self.codeRequired = codeRequired
    }

    /// Success codes (without any, 200...299 are success).
    /// - Parameter codes: The codes.
    /// - Returns: The changed envelope.
    public func success(codes: [Int64]) -> Envelope {
        var copy = self
        copy.codes += codes
        return copy
    }

    /// A range of success codes.
    /// - Parameter range: The codes.
    /// - Returns: The changed envelope.
    public func success(range: ClosedRange<Int64>) -> Envelope {
        var copy = self
        copy.range = range
        return copy
    }

    /// A mapping the whole body must satisfy (its output is not kept).
    /// - Parameter mapping: The mapping.
    /// - Returns: The changed envelope.
    public func shape(_ mapping: Mapping) -> Envelope {
        var copy = self
        copy.shape = mapping
        return copy
    }

    /// Decides success with your own rule instead of codes. Runs on the engine's worker thread;
    /// the document is valid only during the call.
    /// - Parameter check: Returns true for success.
    /// - Returns: The changed envelope.
    public func check(_ check: @escaping @Sendable (_ document: JSON, _ code: Int64?, _ message: String?) -> Bool) -> Envelope {
        var copy = self
        copy.check = check
        return copy
    }

    /// A new `courier_envelope *` (the caller frees it).
    func make() throws -> OpaquePointer {
        var created: OpaquePointer?
        try CourierError.check(courier_envelope_new(&created), "envelope")
        guard let e = created else { throw CourierError(.noMemory) }
        do {
            if let codePath { try CourierError.check(courier_envelope_set_code_path(e, codePath, codeRequired ? 1 : 0), "envelope code '\(codePath)'") }
            if let messagePath { try CourierError.check(courier_envelope_set_message_path(e, messagePath), "envelope message '\(messagePath)'") }
            if let dataPath { try CourierError.check(courier_envelope_set_data_path(e, dataPath), "envelope data '\(dataPath)'") }
            for code in codes { try CourierError.check(courier_envelope_add_success_code(e, code), "envelope code") }
            if let range {
                try CourierError.check(courier_envelope_set_success_range(e, range.lowerBound, range.upperBound), "envelope range")
            }
            if let shape { try CourierError.check(courier_envelope_set_mapping(e, try shape.handle()), "envelope shape") }
            if let check {
                let box = Unmanaged.passRetained(_EnvelopeCheckBox(check)).toOpaque()
                try CourierError.check(courier_envelope_set_check(e, _envelopeCheck, box, _envelopeCheckFree), "envelope check")
            }
        } catch {
            courier_envelope_free(e)
            throw error
        }
        return e
    }
}

/// A document borrowed for the duration of a C callback.
final class _BorrowedDocument: @unchecked Sendable {}

final class _EnvelopeCheckBox {
    let check: @Sendable (JSON, Int64?, String?) -> Bool
    init(_ check: @escaping @Sendable (JSON, Int64?, String?) -> Bool) { self.check = check }
}

private let _envelopeCheck: courier_envelope_check_fn = { document, hasCode, code, message, user in
    guard let user, let document else { return 0 }
    let box = Unmanaged<_EnvelopeCheckBox>.fromOpaque(user).takeUnretainedValue()
    let json = JSON(document, owner: _BorrowedDocument())
    return box.check(json, hasCode != 0 ? code : nil, message.map { String(cString: $0) }) ? 1 : 0
}

private let _envelopeCheckFree: courier_user_free_fn = { user in
    if let user { Unmanaged<_EnvelopeCheckBox>.fromOpaque(user).release() }
}
