// Catalog.swift — the API catalogue (HLNetworking's HLAPICenter: APIs declared once, by module,
// used by name as `API.home.feed.parameters([...])`), the API version segment (apiVersion), routes
// (RestKit's RKRoute, HTHttp's object requests), response descriptors (RKResponseDescriptor: error
// bodies mapped into an error model) and a request's accepted statuses (statusCodeValidator).
// The C core keeps the catalogue, fills the patterns and chooses the descriptors (catalog.c,
// route.c); this file only translates.

import Foundation
internal import CCore

// MARK: - The catalogue

/// A declared API, used by name: the namespace of the catalogue (HLNetworking's `HLAPICenter`).
/// Each module extends it with one member holding its APIs, so code reads `API.home.feed`:
///
/// ```swift
/// extension API { static let home = HomeAPIs() }
/// struct HomeAPIs: APIModule {
///     let feed = API("home.feed", .init(path: "/feed", keyPath: "data", cachePolicy: .cacheFirst))
/// }
/// try engine.register(API.home)                                   // once, at start-up
/// let response = try await engine.send(API.home.feed.parameters(["page": "2"]))
/// ```
///
/// An API declared elsewhere (a catalogue file loaded with ``Engine/loadAPIs(contentsOf:)``, shared
/// with C and Python) is used by name alone: `API("home.feed")`.
public struct API: Sendable {
    /// The name the engine knows it by ("home.feed"; dots separate modules).
    public let name: String
    /// The declaration registered by `Engine.register(_:)`; nil for an API the engine
    /// already has.
    public let declaration: Declaration?

    /// An API the engine already has (declared in a loaded catalogue, or registered before).
    /// - Parameter name: Its name.
    public init(_ name: String) {
        self.name = name
        self.declaration = nil
    }

    /// An API with its declaration.
    /// - Parameters:
    ///   - name: Its name ("home.feed").
    ///   - declaration: What its requests are.
    public init(_ name: String, _ declaration: Declaration) {
        self.name = name
        self.declaration = declaration
    }

    /// A request made from the engine's declaration of this API, to which a use adds its own
    /// settings (parameters, an object for a path with parameters, a mapping, ...).
    public var request: Request { Request(origin: .api(name)) }

    /// ``request`` with parameters (HLAPI's `setParams`).
    /// - Parameter parameters: Names and values (sent sorted by name).
    /// - Returns: The request.
    public func parameters(_ parameters: [String: String]) -> Request { request.parameters(parameters) }

    /// ``request`` with an object that fills the declaration's path pattern (":id"); its other
    /// members are sent as parameters or body (``Request/object(_:encoder:)``).
    /// - Parameters:
    ///   - value: An `Encodable` that encodes as an object.
    ///   - encoder: The encoder.
    /// - Returns: The request.
    public func object<T: Encodable & Sendable>(_ value: T, encoder: ModelEncoder = ModelEncoder()) -> Request {
        request.object(value, encoder: encoder)
    }

    /// What a declared API's requests are: the fields of a catalogue declaration
    /// (`courier_engine_add_api`, docs/design/catalog.md lists them), in Swift.
    public struct Declaration: Sendable {
        /// The HTTP method.
        public var method: String
        /// The path (joined to the base URL and API version), which may be a pattern ("/items/:id").
        public var path: String
        /// Parameters every use sends.
        public var parameters: [String: String]
        /// Headers every use sends.
        public var headers: [String: String]
        /// The key path of the business data.
        public var keyPath: String?
        /// The cache policy.
        public var cachePolicy: CachePolicy?
        /// The cache freshness, in seconds.
        public var cacheExpiry: Int?
        /// The statuses accepted as a success (default below 400).
        public var statusCodes: [ClosedRange<Int>]
        /// The API version segment instead of the engine's ("" none).
        public var apiVersion: String?
        /// The timeout, in seconds.
        public var timeout: Double?
        /// How body parameters are encoded.
        public var bodyEncoding: BodyEncoding?

        /// A declaration.
        /// - Parameters:
        ///   - method: The HTTP method (default GET).
        ///   - path: The path or pattern.
        ///   - parameters: Parameters every use sends.
        ///   - headers: Headers every use sends.
        ///   - keyPath: The key path of the business data.
        ///   - cachePolicy: The cache policy.
        ///   - cacheExpiry: The cache freshness, in seconds.
        ///   - statusCodes: The accepted statuses.
        ///   - apiVersion: The API version segment instead of the engine's.
        ///   - timeout: The timeout, in seconds.
        ///   - bodyEncoding: How body parameters are encoded.
        public init(method: String = "GET", path: String, parameters: [String: String] = [:],
                    headers: [String: String] = [:], keyPath: String? = nil, cachePolicy: CachePolicy? = nil,
                    cacheExpiry: Int? = nil, statusCodes: [ClosedRange<Int>] = [], apiVersion: String? = nil,
                    timeout: Double? = nil, bodyEncoding: BodyEncoding? = nil) {
            self.method = method
            self.path = path
            self.parameters = parameters
            self.headers = headers
            self.keyPath = keyPath
            self.cachePolicy = cachePolicy
            self.cacheExpiry = cacheExpiry
            self.statusCodes = statusCodes
            self.apiVersion = apiVersion
            self.timeout = timeout
            self.bodyEncoding = bodyEncoding
        }

        /// The declaration as the catalogue's JSON object.
        var jsonObject: [String: Any] {
            var d: [String: Any] = ["method": method, "path": path]
            if !parameters.isEmpty { d["params"] = parameters }
            if !headers.isEmpty { d["headers"] = headers }
            if let keyPath { d["key_path"] = keyPath }
            if let cachePolicy { d["cache_policy"] = Int(cachePolicy.cValue.rawValue) }
            if let cacheExpiry { d["cache_expiry"] = cacheExpiry }
            if !statusCodes.isEmpty { d["status_codes"] = statusCodes.map { [$0.lowerBound, $0.upperBound] } }
            if let apiVersion { d["api_version"] = apiVersion }
            if let timeout { d["timeout_ms"] = Int(Configuration.milliseconds(timeout)) }
            if let bodyEncoding { d["body_encoding"] = Int(bodyEncoding.cValue.rawValue) }
            return d
        }
    }
}

/// A module of the catalogue: a value whose stored ``API`` properties are its APIs
/// (`HLAPICenter+home`). `Engine.register(_:)` registers them all.
public protocol APIModule: Sendable {}

extension APIModule {
    /// The module's APIs: its stored properties of type ``API``.
    public var apis: [API] { Mirror(reflecting: self).children.compactMap { $0.value as? API } }
}

/// Where the engine's C request comes from.
enum RequestOrigin: Sendable {
    case api(String)
    case route(String, object: ObjectEncoding?)
    case object(method: String, type: String, object: ObjectEncoding)

    /// A new `courier_request *` made by the engine.
    func makeCRequest(on engine: Engine?) throws -> OpaquePointer {
        guard let engine else {
            throw CourierError(.invalidArgument, message: "a request of the catalogue or a route is made by the engine that sends it")
        }
        return try engine.withHandle { handle in
            var out: OpaquePointer?
            var error = courier_error()
            let rc: Int32
            switch self {
            case .api(let name):
                rc = courier_request_new_api(&out, handle, name, &error)
            case .route(let name, let object):
                let json = try object?.encode()
                defer { courier_json_free(json) }
                rc = courier_request_new_route(&out, handle, name, json, &error)
            case .object(let method, let type, let object):
                let json = try object.encode()
                defer { courier_json_free(json) }
                rc = courier_request_new_object(&out, handle, method, type, json, &error)
            }
            guard rc == COURIER_OK.rawValue, let out else { throw CourierError(code: rc, detail: &error) }
            return out
        }
    }
}

/// An `Encodable` value and its encoder, encoded into the C core's JSON when the request is made.
struct ObjectEncoding: Sendable {
    let encode: @Sendable () throws -> OpaquePointer

    init<T: Encodable & Sendable>(_ value: T, encoder: ModelEncoder) {
        encode = { try encoder.encodeOwned(value) }
    }
}

extension Request {
    init(origin: RequestOrigin) {
        switch origin {
        case .api(let name), .route(let name, _): self.init(method: "", path: name)
        case .object(let method, let type, _): self.init(method: method, path: type)
        }
        self.origin = origin
    }

    /// A request from the engine's route `name` (``Engine/addRoute(_:name:objectType:method:)``),
    /// its pattern filled from `object`; the rest of the object is sent as parameters or body.
    /// - Parameters:
    ///   - name: The route's name.
    ///   - object: An `Encodable` that encodes as an object, or nil when the pattern has no parameters.
    ///   - encoder: The encoder.
    /// - Returns: The request (its `path` is the route's name until the engine makes it).
    public static func route<T: Encodable & Sendable>(_ name: String, object: T?,
                                                    encoder: ModelEncoder = ModelEncoder()) -> Request {
        Request(origin: .route(name, object: object.map { ObjectEncoding($0, encoder: encoder) }))
    }

    /// A request from the engine's route for the object's type and `method` (a class route:
    /// ``Engine/addRoute(_:for:method:)``).
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - object: The object (its type names the route).
    ///   - encoder: The encoder.
    /// - Returns: The request.
    public static func object<T: Encodable & Sendable>(_ method: String, _ object: T,
                                                     encoder: ModelEncoder = ModelEncoder()) -> Request {
        Request(origin: .object(method: method, type: String(describing: T.self),
                                object: ObjectEncoding(object, encoder: encoder)))
    }

    /// Fills the path, a pattern ("/users/:id/photos"), from an object: each ":name" becomes the
    /// value at that key path, percent-encoded; the other members go in the query string (GET,
    /// HEAD, DELETE, or with a raw body) or the body (typed in a JSON body).
    /// - Parameters:
    ///   - value: An `Encodable` that encodes as an object.
    ///   - encoder: The encoder.
    /// - Returns: The changed request.
    public func object<T: Encodable & Sendable>(_ value: T, encoder: ModelEncoder = ModelEncoder()) -> Request {
        adding(_ObjectOption(object: ObjectEncoding(value, encoder: encoder)))
    }

    /// The statuses this request accepts as a success (YTKNetwork's statusCodeValidator):
    /// inside one of the ranges succeeds (a 404 can), outside fails with
    /// ``CourierError/Code/httpStatus`` (a 200 can). Without any, a status below 400 succeeds.
    /// - Parameter ranges: Up to 8 ranges within 100...599.
    /// - Returns: The changed request.
    public func statusCodes(_ ranges: ClosedRange<Int>...) -> Request {
        adding(_StatusCodesOption(ranges: ranges))
    }

    /// This request's API version segment instead of the engine's ("" none; nil the engine's).
    /// - Parameter version: The segment ("v6").
    /// - Returns: The changed request.
    public func apiVersion(_ version: String?) -> Request { adding(_APIVersionOption(version: version)) }
}

struct _ObjectOption: RequestOption {
    let object: ObjectEncoding
    func apply(to request: OpaquePointer) throws {
        let json = try object.encode()
        defer { courier_json_free(json) }
        var error = courier_error()
        let rc = courier_request_set_object(request, json, &error)
        if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
    }
}

struct _StatusCodesOption: RequestOption {
    let ranges: [ClosedRange<Int>]
    func apply(to request: OpaquePointer) throws {
        for r in ranges {
            try CourierError.check(courier_request_add_status_codes(request, Int32(clamping: r.lowerBound),
                                                                    Int32(clamping: r.upperBound)),
                                   "statusCodes \(r)")
        }
    }
}

struct _APIVersionOption: RequestOption {
    let version: String?
    func apply(to request: OpaquePointer) throws {
        try withOptionalCString(version) {
            try CourierError.check(courier_request_set_api_version(request, $0), "apiVersion '\(version ?? "nil")'")
        }
    }
}

// MARK: - The engine's catalogue, routes and descriptors

extension Engine {
    /// Registers APIs with their declarations (an API without one is skipped: the engine has it).
    /// - Parameter apis: The APIs.
    /// - Throws: ``CourierError/Code/catalog`` for a declaration the core refuses (the message
    ///   names the field), ``CourierError/Code/invalidArgument`` for a bad name.
    public func register(_ apis: API...) throws { try register(apis) }

    /// Registers every API of a module (its stored ``API`` properties).
    /// - Parameter module: The module (`API.home`).
    /// - Throws: As `register(_:)`.
    public func register(_ module: some APIModule) throws { try register(module.apis) }

    private func register(_ apis: [API]) throws {
        for api in apis {
            guard let declaration = api.declaration else { continue }
            let data = try JSONSerialization.data(withJSONObject: declaration.jsonObject)
            try withHandle { handle in
                let json = try Self.parse(data)
                defer { courier_json_free(json) }
                var error = courier_error()
                let rc = courier_engine_add_api(handle, api.name, json, &error)
                if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            }
        }
    }

    private static func parse(_ data: Data) throws -> OpaquePointer {
        var out: OpaquePointer?
        var error = courier_error()
        let rc = data.withUnsafeBytes { courier_json_parse(&out, $0.baseAddress, $0.count, nil, &error) }
        guard rc == COURIER_OK.rawValue, let out else { throw CourierError(code: rc, detail: &error) }
        return out
    }

    /// Loads a catalogue document (`{"apis": {"home": {"feed": {...}}}, "routes": [...]}`), the
    /// same file C and Python load; all or nothing.
    /// - Parameter json: The document.
    /// - Returns: The number of APIs declared.
    /// - Throws: ``CourierError/Code/json`` (not JSON), ``CourierError/Code/catalog`` (its shape).
    @discardableResult
    public func loadAPIs(json: Data) throws -> Int {
        try withHandle { handle in
            var count = 0
            var error = courier_error()
            let rc = json.withUnsafeBytes { courier_engine_load_apis(&count, handle, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), $0.count, &error) }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return count
        }
    }

    /// Loads a catalogue file.
    /// - Parameter url: A file URL.
    /// - Returns: The number of APIs declared.
    /// - Throws: As ``loadAPIs(json:)``, and ``CourierError/Code/notFound`` for a missing file.
    @discardableResult
    public func loadAPIs(contentsOf url: URL) throws -> Int {
        try withHandle { handle in
            var count = 0
            var error = courier_error()
            let rc = courier_engine_load_api_file(&count, handle, url.path, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return count
        }
    }

    /// The declared API names, sorted.
    public var apiNames: [String] {
        (try? withHandle { handle -> [String] in
            var out: UnsafeMutablePointer<CChar>?
            try CourierError.check(courier_engine_api_names(&out, nil, handle), "apiNames")
            defer { courier_free(out) }
            let data = Data(String(borrowedCString: out).utf8)
            return (try JSONSerialization.jsonObject(with: data) as? [String]) ?? []
        }) ?? []
    }

    /// Sends a declared API as it is declared.
    /// - Parameter api: The API (`API.home.feed`).
    /// - Returns: The response.
    /// - Throws: ``CourierError/Code/unknownName`` when the engine does not know it,
    ///   ``CourierError/Code/routeParameter`` when its path has a parameter (":id") and no object
    ///   fills it (use ``API/object(_:encoder:)``; nothing is sent), and as ``send(_:)-(Request)``.
    public func send(_ api: API) async throws -> Response { try await send(api.request) }

    /// A named route (RestKit's `routeWithName:pathPattern:method:`), or a class route for an
    /// object type name and method (nil: any method).
    /// - Parameters:
    ///   - pathPattern: "/users/:id/photos".
    ///   - name: The route's name.
    ///   - objectType: The object type's name (``Request/object(_:_:encoder:)`` uses the Swift type's).
    ///   - method: The method (nil: GET for a named route, any for a class route).
    /// - Throws: ``CourierError/Code/invalidArgument``.
    public func addRoute(_ pathPattern: String, name: String? = nil, objectType: String? = nil,
                         method: String? = nil) throws {
        try withHandle { handle in
            var error = courier_error()
            let rc = withOptionalCString(name) { n in
                withOptionalCString(objectType) { t in
                    withOptionalCString(method) { m in courier_engine_add_route(handle, n, t, m, pathPattern, &error) }
                }
            }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
        }
    }

    /// A class route for a Swift type (RestKit's `routeWithClass:pathPattern:method:`).
    /// - Parameters:
    ///   - pathPattern: "/users/:id".
    ///   - type: The type whose values ``Request/object(_:_:encoder:)`` sends.
    ///   - method: The method (nil: any).
    /// - Throws: ``CourierError/Code/invalidArgument``.
    public func addRoute<T>(_ pathPattern: String, for type: T.Type, method: String? = nil) throws {
        try addRoute(pathPattern, objectType: String(describing: type), method: method)
    }

    /// A response descriptor (RKResponseDescriptor): for requests of `method` (nil: any) whose
    /// path matches `pathPattern` (nil: any), a response within `statusCodes` gets `keyPath` and
    /// `mapping`: a success as its ``Response/result`` (when the request has no key path or
    /// mapping of its own), an error body as the error model, the ``Response/result`` of the
    /// response attached to the ``CourierError/Code/httpStatus`` error.
    /// - Parameters:
    ///   - pathPattern: "/users/:id", or nil.
    ///   - method: The method, or nil.
    ///   - statusCodes: The statuses; nil (the default): the C core's default, 200...299.
    ///   - keyPath: The key path, or nil for the root.
    ///   - mapping: The mapping, or nil.
    /// - Throws: ``CourierError/Code/invalidArgument``.
    public func addResponseDescriptor(pathPattern: String?, method: String? = nil,
                                      statusCodes: ClosedRange<Int>? = nil, keyPath: String? = nil,
                                      mapping: Mapping? = nil) throws {
        let m = try mapping?.handle() // borrowed from `mapping`; the engine retains it
        try withExtendedLifetime(mapping) { try withHandle { handle in
            var error = courier_error()
            let rc = withOptionalCString(method) { me in
                withOptionalCString(pathPattern) { p in
                    withOptionalCString(keyPath) { k in
                        // 0, 0: the core's default statuses (not restated here).
                        courier_engine_add_response_descriptor(handle, me, p, Int32(clamping: statusCodes?.lowerBound ?? 0),
                                                               Int32(clamping: statusCodes?.upperBound ?? 0), k, m, &error)
                    }
                }
            }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
        } }
    }
}

extension Configuration {
    /// The API version segment (HLNetworking's apiVersion): put between the base URL and every
    /// relative path ("v5" sends `<base>/v5/<path>`); nil (the default) none. A request may use
    /// its own (``Request/apiVersion(_:)``).
    public var apiVersion: String? {
        get { setting("apiVersion", as: APIVersionSetting.self)?.version }
        set { setAPIVersion(APIVersionSetting(version: newValue, review: apiReview)) }
    }

    /// Whether this is a review build: the version segment gets an "r" ("v5r").
    public var apiReview: Bool {
        get { setting("apiVersion", as: APIVersionSetting.self)?.review ?? false }
        set { setAPIVersion(APIVersionSetting(version: apiVersion, review: newValue)) }
    }

    private mutating func setAPIVersion(_ value: APIVersionSetting) {
        setSetting("apiVersion", value.version == nil && !value.review ? nil : value) { config, v in
            try withOptionalCString(v.version) {
                try CourierError.check(courier_config_set_api_version(config, $0, v.review ? 1 : 0),
                                       "apiVersion '\(v.version ?? "nil")'")
            }
        }
    }
}

struct APIVersionSetting: Sendable {
    let version: String?
    let review: Bool
}

extension Engine {
    /// Runs `body` with the C engine, or throws ``CourierError/Code/closed``.
    func withHandle<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { leave() }
        return try body(handle)
    }
}

// MARK: - Codes

extension CourierError.Code {
    /// No API is declared under that name, or no route under that name (or for that type and method).
    public static let unknownName = CourierError.Code(COURIER_E_UNKNOWN_NAME)
    /// A path pattern's parameter is missing from the object, or not a string, number or boolean,
    /// or a declared API's path parameter was sent without an object.
    public static let routeParameter = CourierError.Code(COURIER_E_ROUTE_PARAMETER)
    /// An API declaration or catalogue of the wrong shape (the message names the field).
    public static let catalog = CourierError.Code(COURIER_E_CATALOG)
}

extension CourierError {
    /// See ``Code/unknownName``.
    public static let unknownName = Code.unknownName
    /// See ``Code/routeParameter``.
    public static let routeParameter = Code.routeParameter
    /// See ``Code/catalog``.
    public static let catalog = Code.catalog
}
