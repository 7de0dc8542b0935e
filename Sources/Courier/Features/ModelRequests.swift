// ModelRequests.swift — requests that name their business data (key paths, mappings, named
// results, envelopes, JSON and form bodies), responses that hand out the C core's parsed JSON, and
// sends that return models: `try await engine.send(GetItem(id: 1))` returns `GetItem.Model`.

import Foundation
internal import CCore

// MARK: - Request options

struct _KeyPathOption: RequestOption {
    let keyPath: String
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_key_path(request, keyPath), "key path '\(keyPath)'")
    }
}

struct _MappingOption: RequestOption {
    let mapping: Mapping
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_mapping(request, try mapping.handle()), "mapping")
    }
}

struct _ResultOption: RequestOption {
    let name: String
    let keyPath: String?
    let mapping: Mapping?
    let optional: Bool
    func apply(to request: OpaquePointer) throws {
        let m = try mapping?.handle()
        try CourierError.check(courier_request_add_result(request, name, keyPath, m, optional ? COURIER_RESULT_OPTIONAL : 0),
                               "result '\(name)'")
    }
}

struct _EnvelopeOption: RequestOption {
    let envelope: Envelope?
    func apply(to request: OpaquePointer) throws {
        guard let envelope else {
            try CourierError.check(courier_request_set_envelope(request, nil), "envelope")
            return
        }
        let e = try envelope.make()
        defer { courier_envelope_free(e) }
        try CourierError.check(courier_request_set_envelope(request, e), "envelope")
    }
}

struct _BodyOption<T: Encodable & Sendable>: RequestOption {
    let value: T
    let encoder: ModelEncoder
    let form: Bool
    func apply(to request: OpaquePointer) throws {
        let json = try encoder.encodeOwned(value)
        defer { courier_json_free(json) }
        if form {
            try CourierError.check(courier_request_set_form_body(request, json), "form body (an object is needed)")
        } else {
            try CourierError.check(courier_request_set_json_body(request, json, encoder.outputFormatting.rawValue), "JSON body")
        }
    }
}

extension Request {
    /// The key path of the business data ("data", "data.items"): the response's ``Response/result``
    /// and what ``Engine/send(_:as:decoder:)`` decodes. A response without a value there fails
    /// with ``CourierError/Code/mapping``.
    /// - Parameter keyPath: Components separated by '.'.
    /// - Returns: The changed request.
    public func keyPath(_ keyPath: String) -> Request { adding(_KeyPathOption(keyPath: keyPath)) }

    /// A mapping applied, in the C core, to the value at the key path before anyone sees it.
    /// - Parameter mapping: The mapping.
    /// - Returns: The changed request.
    public func mapping(_ mapping: Mapping) -> Request { adding(_MappingOption(mapping: mapping)) }

    /// A named result (the seeds' responseDescriptors): read it with ``Response/result(_:)``.
    /// - Parameters:
    ///   - name: The result's name.
    ///   - keyPath: Where it is in the document.
    ///   - mapping: A mapping for it, or nil.
    ///   - optional: Whether an absent value is fine (otherwise the request fails).
    /// - Returns: The changed request.
    public func result(_ name: String, keyPath: String?, mapping: Mapping? = nil, optional: Bool = false) -> Request {
        adding(_ResultOption(name: name, keyPath: keyPath, mapping: mapping, optional: optional))
    }

    /// This request's envelope, replacing the engine's; nil means none for this request.
    /// - Parameter envelope: The envelope, or nil.
    /// - Returns: The changed request.
    public func envelope(_ envelope: Envelope?) -> Request { adding(_EnvelopeOption(envelope: envelope)) }

    /// A JSON body from an `Encodable` value, written by the C core (Content-Type
    /// application/json). Parameters then go in the query string.
    /// - Parameters:
    ///   - value: The value.
    ///   - encoder: The encoder (strategies, formatting).
    /// - Returns: The changed request.
    public func jsonBody<T: Encodable & Sendable>(_ value: T, encoder: ModelEncoder = ModelEncoder()) -> Request {
        adding(_BodyOption(value: value, encoder: encoder, form: false))
    }

    /// A form body (application/x-www-form-urlencoded) from an `Encodable` value that encodes as
    /// an object: nested objects as `name[key]`, arrays as `name[]`.
    /// - Parameters:
    ///   - value: The value.
    ///   - encoder: The encoder (strategies).
    /// - Returns: The changed request.
    public func formBody<T: Encodable & Sendable>(_ value: T, encoder: ModelEncoder = ModelEncoder()) -> Request {
        adding(_BodyOption(value: value, encoder: encoder, form: true))
    }

    /// The key path this request names, if any (the last one set).
    var modelKeyPath: String? {
        for option in options.reversed() { if let k = option as? _KeyPathOption { return k.keyPath } }
        return nil
    }
}

// MARK: - Configuration options

struct _ConfigEnvelopeOption: ConfigurationOption {
    let envelope: Envelope
    func apply(to config: OpaquePointer) throws {
        let e = try envelope.make()
        defer { courier_envelope_free(e) }
        try CourierError.check(courier_config_set_envelope(config, e), "envelope")
    }
}

struct _JSONTypeOption: ConfigurationOption {
    let mimeType: String
    func apply(to config: OpaquePointer) throws {
        try CourierError.check(courier_config_add_json_type(config, mimeType), "JSON MIME type '\(mimeType)'")
    }
}

struct _JSONLimitsOption: ConfigurationOption {
    let maxDepth: Int
    let maxBytes: Int64?
    func apply(to config: OpaquePointer) throws {
        var o = courier_json_options()
        o.size = MemoryLayout<courier_json_options>.size
        courier_json_options_init(&o)
        o.max_depth = Int32(clamping: maxDepth)
        if let maxBytes { o.max_bytes = maxBytes }
        try CourierError.check(courier_config_set_json_options(config, &o), "JSON limits")
    }
}

/// Limits for parsing response bodies (`courier_config_set_json_options`).
public struct JSONOptions: Sendable, Hashable {
    /// The deepest nesting accepted (1...2048). Default 512.
    public var maxDepth: Int
    /// The largest body parsed, in bytes, or nil for the default (64 MiB).
    public var maxBytes: Int64?

    /// The C core's default deepest nesting (512; `COURIER_SETTING_JSON_MAX_DEPTH`).
    public static var defaultMaxDepth: Int { Int(CoreDefaults.value(COURIER_SETTING_JSON_MAX_DEPTH)) }

    /// Parse limits.
    /// - Parameters:
    ///   - maxDepth: The deepest nesting accepted (1...2048; default ``defaultMaxDepth``, the C core's).
    ///   - maxBytes: The largest body parsed, or nil for the default (64 MiB).
    public init(maxDepth: Int = JSONOptions.defaultMaxDepth, maxBytes: Int64? = nil) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }
}

extension Configuration {
    /// The decoder of models sent with ``Engine/send(_:as:decoder:)`` (and ``ModelRequestable``s)
    /// that name none; default ``ModelDecoder/init()``. To reuse an app's `JSONDecoder` settings:
    /// `configuration.modelDecoder = ModelDecoder(jsonDecoder)`.
    public var modelDecoder: ModelDecoder {
        get { setting("modelDecoder") ?? ModelDecoder() }
        set { setSetting("modelDecoder", newValue) { _, _ in } } // Swift's own: nothing for the C core
    }

    /// The envelope of every response (the seeds' global response descriptor), or nil (the
    /// default) for none.
    public var envelope: Envelope? {
        get { setting("envelope") }
        set { setSetting("envelope", newValue) { try _ConfigEnvelopeOption(envelope: $1).apply(to: $0) } }
    }

    /// MIME types whose responses are decoded as JSON besides JSON's own ("text/html",
    /// "text/plain", "text/*"). Default none.
    public var jsonTypes: [String] {
        get { options.compactMap { ($0 as? _JSONTypeOption)?.mimeType } }
        set {
            options.removeAll { $0 is _JSONTypeOption }
            options.append(contentsOf: newValue.map { _JSONTypeOption(mimeType: $0) as any ConfigurationOption })
        }
    }

    /// Limits for parsing response bodies. Default ``JSONOptions/init(maxDepth:maxBytes:)``'s.
    public var jsonOptions: JSONOptions {
        get { setting("jsonOptions") ?? JSONOptions() }
        set {
            setSetting("jsonOptions", newValue) {
                try _JSONLimitsOption(maxDepth: $1.maxDepth, maxBytes: $1.maxBytes).apply(to: $0)
            }
        }
    }

    /// Deprecated: set ``envelope`` (`configuration.envelope = envelope`).
    /// - Parameter envelope: The envelope.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.envelope = envelope")
    public func envelope(_ envelope: Envelope) -> Configuration { with { $0.envelope = envelope } }

    /// Deprecated: add to ``jsonTypes`` (`configuration.jsonTypes.append(mimeType)`).
    /// - Parameter mimeType: A "type/subtype".
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "add to the property: configuration.jsonTypes.append(mimeType)")
    public func decodingAsJSON(_ mimeType: String) -> Configuration { with { $0.jsonTypes.append(mimeType) } }

    /// Deprecated: set ``jsonOptions`` (`configuration.jsonOptions = JSONOptions(...)`).
    /// - Parameters:
    ///   - maxDepth: The deepest nesting accepted.
    ///   - maxBytes: The largest body parsed, or nil for the default.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.jsonOptions = JSONOptions(...)")
    public func jsonLimits(maxDepth: Int = JSONOptions.defaultMaxDepth, maxBytes: Int64? = nil) -> Configuration {
        with { $0.jsonOptions = JSONOptions(maxDepth: maxDepth, maxBytes: maxBytes) }
    }
}

// MARK: - Responses

/// Where and why a mapping failed.
public struct MappingFailure: Sendable, Equatable {
    /// Key path of the offending value in the document ("data.items.3.price"; "" is the root).
    public let path: String
    /// The type the mapping expected: "integer", "string", "object", "number", "any", ...
    public let expected: String
    /// The type found ("nothing" when absent).
    public let found: String

    /// A failure (for tests and mocks; the engine reports real ones).
    /// - Parameters:
    ///   - path: Key path of the offending value.
    ///   - expected: The type expected.
    ///   - found: The type found.
    public init(path: String, expected: String, found: String) {
        self.path = path
        self.expected = expected
        self.found = found
    }
}

extension Response {
    /// The parsed body (parsed once by the C core, on first use or when the request asked for
    /// JSON), or nil when the body cannot be decoded as JSON.
    public var json: JSON? { try? parseJSON() }

    /// The parsed body.
    /// - Returns: The document's root.
    /// - Throws: ``CourierError`` with ``CourierError/Code/json`` (malformed, or no decoder for the
    ///   content type).
    public func parseJSON() throws -> JSON {
        guard let storage else { return try JSON.parse(body) }
        var out: OpaquePointer?
        var error = courier_error()
        let rc = courier_response_parse_json(&out, storage.pointer, &error)
        guard rc == COURIER_OK.rawValue, let out else { throw CourierError(code: rc, detail: &error) }
        return JSON(out, owner: storage)
    }

    /// The business data: the value at the request's key path after its mapping; without them,
    /// the envelope's data; else the whole document. nil when absent.
    public var result: JSON? {
        guard let storage else { return json }
        return courier_response_data(storage.pointer).map { JSON($0, owner: storage) }
    }

    /// A named result (``Request/result(_:keyPath:mapping:optional:)``), or nil.
    /// - Parameter name: Its name.
    /// - Returns: The value.
    public func result(_ name: String) -> JSON? {
        guard let storage else { return nil }
        return courier_response_result(storage.pointer, name).map { JSON($0, owner: storage) }
    }

    /// A result as JSON text, written from the C core's tape (where the key path, envelope and
    /// mapping were applied when the answer came): no jansson document is made, as ``result`` and
    /// ``result(_:)`` make one.
    /// - Parameters:
    ///   - name: A named result (``Request/result(_:keyPath:mapping:optional:)``); nil for the
    ///     business data, as ``result``.
    ///   - formatting: Formatting options.
    /// - Returns: The text; nil when the result is absent.
    /// - Throws: ``CourierError`` (`.json` when the body is not JSON).
    public func resultText(_ name: String? = nil, formatting: JSON.OutputFormatting = []) throws -> String? {
        guard let storage else { return try result?.text(formatting: formatting) }
        var tape: OpaquePointer?
        var index = 0
        var error = courier_error()
        var rc = courier_response_result_tape(&tape, &index, storage.pointer, name, &error)
        if rc == COURIER_E_NOT_FOUND.rawValue { return nil }
        guard rc == COURIER_OK.rawValue, let tape else { throw CourierError(code: rc, detail: &error) }
        var text: UnsafeMutablePointer<CChar>?
        var length = 0
        rc = withExtendedLifetime(storage) {
            courier_json_tape_dump(&text, &length, tape, index, formatting.rawValue, &error)
        }
        guard rc == COURIER_OK.rawValue, let text else { throw CourierError(code: rc, detail: &error) }
        defer { courier_free(text) }
        return String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
    }

    /// The envelope's code, when an envelope applied and the body had one.
    public var envelopeCode: Int64? {
        guard let storage else { return nil }
        var code: Int64 = 0
        return courier_response_envelope(&code, nil, storage.pointer) == COURIER_OK.rawValue ? code : nil
    }

    /// The envelope's message, when an envelope applied and the body had one.
    public var envelopeMessage: String? {
        guard let storage else { return nil }
        var message: UnsafePointer<CChar>?
        _ = courier_response_envelope(nil, &message, storage.pointer)
        return message.map { String(cString: $0) }
    }

    /// Where mapping failed, after ``CourierError/Code/mapping``.
    public var mappingFailure: MappingFailure? {
        guard let storage else { return nil }
        var failure = courier_mapping_error()
        guard courier_response_mapping_error(&failure, storage.pointer) == COURIER_OK.rawValue else { return nil }
        let path = withUnsafeBytes(of: failure.path) { raw in
            String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
        return MappingFailure(path: path, expected: String(cString: courier_json_type_name(failure.expected)),
                              found: String(cString: courier_json_type_name(failure.found)))
    }

    /// Decodes the business data (``result``), or a named result, or the value at a key path
    /// inside it.
    ///
    /// `keyPath` means what it means everywhere else (``JSONModel/init(json:keyPath:)-(Data,_)``,
    /// `ModelDecoder.decode(_:from:keyPath:)`): the path is followed, here inside the
    /// value that would be decoded without it (the result: the whole document when the request
    /// has no key path, mapping or envelope). `try r.decode([Item].self, keyPath: "data.items")`.
    /// - Parameters:
    ///   - type: The model type.
    ///   - name: A named result, or nil for the default one.
    ///   - keyPath: Where the value is inside the result ("data.items"), or nil for the result itself.
    ///   - decoder: The decoder.
    /// - Returns: The model.
    /// - Throws: `DecodingError` naming the key path (`valueNotFound` when nothing is there);
    ///   ``CourierError`` when the body is not JSON.
    public func decode<T: Decodable>(_ type: T.Type, result name: String? = nil, keyPath: String? = nil,
                                     decoder: ModelDecoder = ModelDecoder()) throws -> T {
        try decode(type, result: name, keyPath: keyPath, resultPath: nil, decoder: decoder)
    }

    /// Decodes as ``decode(_:result:keyPath:decoder:)`` with the settings of an app's
    /// `JSONDecoder` (key, date, data and non-conforming float strategies, `userInfo`; see
    /// ``ModelDecoder/init(_:)``), still from the C core's parsed document.
    /// - Parameters:
    ///   - type: The model type.
    ///   - name: A named result, or nil for the default one.
    ///   - keyPath: Where the value is inside the result, or nil for the result itself.
    ///   - decoder: The `JSONDecoder` whose settings apply.
    /// - Returns: The model.
    /// - Throws: As ``decode(_:result:keyPath:decoder:)``.
    public func decode<T: Decodable>(_ type: T.Type, result name: String? = nil, keyPath: String? = nil,
                                     using decoder: JSONDecoder) throws -> T {
        try decode(type, result: name, keyPath: keyPath, resultPath: nil, decoder: ModelDecoder(decoder))
    }

    /// Decodes the result the request's own key path (`resultPath`, already followed by the C
    /// core) selected; `resultPath` only names where it came from in errors.
    func decode<T: Decodable>(_ type: T.Type, result name: String? = nil, keyPath: String? = nil,
                              resultPath: String?, decoder: ModelDecoder) throws -> T {
        let prefix: [any CodingKey] = (resultPath ?? "").split(separator: ".").map { _JSONKey($0) }
        guard let storage else {
            let json = try parseJSON()
            let path = [resultPath, keyPath].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ".")
            return try decoder.decode(type, from: json, keyPath: path.isEmpty ? nil : path)
        }
        // The result as the C core left it on the tape (key path, envelope and mapping applied
        // there when the answer came): decoded in place, no jansson document made.
        var tape: OpaquePointer?
        var index = 0
        var error = courier_error()
        let rc = courier_response_result_tape(&tape, &index, storage.pointer, name, &error)
        if rc == COURIER_E_NOT_FOUND.rawValue {
            throw DecodingError.valueNotFound(type, .init(codingPath: prefix,
                debugDescription: "No value at \(resultPath ?? name ?? "the response's result")"))
        }
        // A body that is not JSON throws its own error.
        guard rc == COURIER_OK.rawValue, let tape else { throw CourierError(code: rc, detail: &error) }
        return try decoder.decode(type, tape: _Tape(borrowing: tape, owner: storage), at: index, keyPath: keyPath,
                                  pathPrefix: prefix)
    }
}

// MARK: - Sending for models

/// A ``Requestable`` whose response is a model: `try await engine.send(GetItem(id: 1))` returns
/// `GetItem.Model`, decoded from ``keyPath`` by the core's parsed document.
///
/// ```swift
/// struct GetItem: ModelRequestable {
///     struct Model: Decodable { let id: Int; let title: String }
///     let id: Int
///     var path: String { "/items/\(id)" }
///     var keyPath: String? { "data" }
/// }
/// ```
public protocol ModelRequestable: Requestable {
    /// The model the business data decodes into.
    associatedtype Model: Decodable
    /// The key path of the business data, or nil for the envelope's data / the whole document.
    var keyPath: String? { get }
    /// A mapping the C core applies before decoding, or nil.
    var mapping: Mapping? { get }
    /// The decoder. Default: the engine's ``Configuration/modelDecoder``.
    var decoder: ModelDecoder { get }
}

extension ModelRequestable {
    /// nil.
    public var keyPath: String? { nil }
    /// nil.
    public var mapping: Mapping? { nil }
    /// The engine's ``Configuration/modelDecoder``.
    public var decoder: ModelDecoder {
        var engines = ModelDecoder()
        engines.isEngineDefault = true
        return engines
    }

    /// The request with the key path and mapping applied.
    /// - Returns: The request.
    func makeModelRequest() -> Request {
        var request = makeRequest()
        if let keyPath { request = request.keyPath(keyPath) }
        if let mapping { request = request.mapping(mapping) }
        return request
    }
}

extension Engine {
    /// Sends a request and decodes its business data (the value at its key path, after its
    /// mapping; else the envelope's data; else the whole body) straight from the C core's parsed
    /// document.
    /// - Parameters:
    ///   - request: The request (with ``Request/keyPath(_:)`` where the data is nested).
    ///   - type: The model type.
    ///   - decoder: The decoder, or nil for the configuration's ``Configuration/modelDecoder``.
    /// - Returns: The model.
    /// - Throws: ``CourierError`` as ``send(_:)-(Request)`` plus ``CourierError/Code/json``,
    ///   ``CourierError/Code/mapping`` and ``CourierError/Code/api``; `DecodingError` naming the
    ///   key path when the data does not fit the type.
    public func send<T: Decodable>(_ request: Request, as type: T.Type,
                                   decoder: ModelDecoder? = nil) async throws -> T {
        let response = try await send(request)
        return try response.decode(type, resultPath: request.modelKeyPath, decoder: modelDecoder(decoder))
    }

    /// The decoder to use: `decoder` unless absent or the engine's default.
    func modelDecoder(_ decoder: ModelDecoder?) -> ModelDecoder {
        guard let decoder, !decoder.isEngineDefault else { return configuration.modelDecoder }
        return decoder
    }

    /// Sends the request a ``ModelRequestable`` describes and returns its model.
    /// - Parameter request: The request description.
    /// - Returns: The model.
    /// - Throws: As ``send(_:as:decoder:)``.
    public func send<R: ModelRequestable>(_ request: R) async throws -> R.Model {
        try await send(request.makeModelRequest(), as: R.Model.self, decoder: request.decoder)
    }

    /// Blocking form of ``send(_:as:decoder:)`` (never from the engine's worker thread).
    /// - Parameters:
    ///   - request: The request.
    ///   - type: The model type.
    ///   - decoder: The decoder.
    /// - Returns: The model.
    /// - Throws: As ``send(_:as:decoder:)``.
    public func sendSync<T: Decodable>(_ request: Request, as type: T.Type,
                                       decoder: ModelDecoder? = nil) throws -> T {
        let response = try sendSync(request)
        return try response.decode(type, resultPath: request.modelKeyPath, decoder: modelDecoder(decoder))
    }
}
