// Stubs.swift — the C core's engine-wide stubs (URLProtocol's and MockWebServer's use) and HAR
// record and replay, in Swift: `Configuration.stubs` and `.stubMode`, `engine.stubs` (add, remove,
// the mode, the record of requests the stubs saw, `replayHAR(from:)`), and `engine.recordHAR(to:)`.
// Matching, sequences, the record and the HAR document are the C core's (CCore/engine/stubs.c,
// har.c); this file only translates. Usable from XCTest and Swift Testing alike: no server.

import Foundation
internal import CCore

// MARK: - Mode

/// What an engine does with stubs (`courier_stub_mode`).
public enum StubMode: Sendable, Hashable {
    /// Stubs are not consulted and nothing is recorded (the default).
    case off
    /// Every request is answered by a stub; one that matches none fails with
    /// ``CourierError/Code/noStub`` and nothing is sent.
    case only
    /// Requests that match no stub go to the network as usual.
    case passThrough

    var cValue: courier_stub_mode {
        switch self {
        case .off: return COURIER_STUBS_OFF
        case .only: return COURIER_STUBS_ONLY
        case .passThrough: return COURIER_STUBS_PASS_THROUGH
        }
    }

    init(_ c: courier_stub_mode) {
        switch c {
        case COURIER_STUBS_ONLY: self = .only
        case COURIER_STUBS_PASS_THROUGH: self = .passThrough
        default: self = .off
        }
    }
}

// MARK: - What a stub matches

/// What a stub matches: a method, a URL pattern, header lines and a predicate (all that are set
/// must hold). A pattern starting with `/` (a regular expression: `^/`) is compared with the URL's
/// path and query, any other with the whole URL.
///
/// ```swift
/// StubMatch.get("/users/1")
/// StubMatch.post("/orders", .prefix).header("X-Tenant", "a")
/// StubMatch.any("^/items/[0-9]+$", .regex).when { $0.body != nil }
/// ```
public struct StubMatch: Sendable {
    /// How the URL pattern is compared (`courier_url_match`).
    public enum URLMatch: Sendable, Hashable {
        /// Byte for byte.
        case exact
        /// The URL starts with the pattern.
        case prefix
        /// fnmatch(3): `*` matches any run (slashes included), `?` one character.
        case glob
        /// A POSIX extended regular expression searched in the URL (anchor it with `^` and `$`).
        case regex

        var cValue: courier_url_match {
            switch self {
            case .exact: return COURIER_URL_EXACT
            case .prefix: return COURIER_URL_PREFIX
            case .glob: return COURIER_URL_GLOB
            case .regex: return COURIER_URL_REGEX
            }
        }
    }

    /// The method matched exactly, or nil for any.
    public var method: String?
    /// The URL pattern, or nil for any URL.
    public var url: String?
    /// How ``url`` is compared.
    public var urlMatch: URLMatch
    /// Header lines the request must carry: a nil value means any value.
    public var headers: [(name: String, value: String?)]
    /// Asked last, on the sending thread inside the send: true when the stub matches.
    public var predicate: (@Sendable (StubbedRequest) -> Bool)?

    /// A match.
    /// - Parameters:
    ///   - method: The method, or nil for any.
    ///   - url: The URL pattern, or nil for any.
    ///   - match: How the pattern is compared. Default ``URLMatch/exact``.
    public init(method: String?, url: String?, _ match: URLMatch = .exact) {
        self.method = method
        self.url = url
        self.urlMatch = match
        self.headers = []
        self.predicate = nil
    }

    /// GET requests whose URL matches.
    /// - Parameters:
    ///   - url: The URL pattern.
    ///   - match: How it is compared. Default ``URLMatch/exact``.
    /// - Returns: The match.
    public static func get(_ url: String, _ match: URLMatch = .exact) -> StubMatch { StubMatch(method: "GET", url: url, match) }
    /// POST requests whose URL matches.
    /// - Parameters:
    ///   - url: The URL pattern.
    ///   - match: How it is compared. Default ``URLMatch/exact``.
    /// - Returns: The match.
    public static func post(_ url: String, _ match: URLMatch = .exact) -> StubMatch { StubMatch(method: "POST", url: url, match) }
    /// PUT requests whose URL matches.
    /// - Parameters:
    ///   - url: The URL pattern.
    ///   - match: How it is compared. Default ``URLMatch/exact``.
    /// - Returns: The match.
    public static func put(_ url: String, _ match: URLMatch = .exact) -> StubMatch { StubMatch(method: "PUT", url: url, match) }
    /// DELETE requests whose URL matches.
    /// - Parameters:
    ///   - url: The URL pattern.
    ///   - match: How it is compared. Default ``URLMatch/exact``.
    /// - Returns: The match.
    public static func delete(_ url: String, _ match: URLMatch = .exact) -> StubMatch {
        StubMatch(method: "DELETE", url: url, match)
    }
    /// Requests of any method whose URL matches.
    /// - Parameters:
    ///   - url: The URL pattern.
    ///   - match: How it is compared. Default ``URLMatch/exact``.
    /// - Returns: The match.
    public static func any(_ url: String, _ match: URLMatch = .exact) -> StubMatch { StubMatch(method: nil, url: url, match) }

    /// The request must also carry this header line.
    /// - Parameters:
    ///   - name: The header name (case-insensitive).
    ///   - value: The value exactly, or nil for any value.
    /// - Returns: The changed match.
    public func header(_ name: String, _ value: String? = nil) -> StubMatch {
        var copy = self
        copy.headers.append((name: name, value: value))
        return copy
    }

    /// The request must also satisfy a predicate, asked on the sending thread inside the send
    /// (keep it quick; it may not close the engine).
    /// - Parameter predicate: True when the stub matches.
    /// - Returns: The changed match.
    public func when(_ predicate: @escaping @Sendable (StubbedRequest) -> Bool) -> StubMatch {
        var copy = self
        copy.predicate = predicate
        return copy
    }
}

// MARK: - What a stub answers

/// One answer of a stub: a response (status, headers, body as bytes or from a file) or a failure,
/// optionally after a delay. A stub's answers are given one per attempt (a retry takes the next);
/// after the last, the last answers again. Answers are judged like real ones (status, validator,
/// mapping, cache, events).
public struct StubAnswer: Sendable {
    enum Kind: Sendable {
        case response(status: Int, body: Data, contentType: String?)
        case file(path: String, status: Int)
        case error(CourierError.Code)
    }

    let kind: Kind
    /// Header lines of the answer.
    public var headers: HTTPHeaders
    /// The delay before it is given, in seconds.
    public var delay: Double

    init(_ kind: Kind, headers: HTTPHeaders = []) {
        self.kind = kind
        self.headers = headers
        self.delay = 0
    }

    /// A response with a body.
    /// - Parameters:
    ///   - status: The HTTP status (100...999). Default 200.
    ///   - body: The body.
    ///   - contentType: The Content-Type, or nil for none.
    ///   - headers: More header lines.
    /// - Returns: The answer.
    public static func status(_ status: Int = 200, body: Data = Data(), contentType: String? = nil,
                              headers: HTTPHeaders = []) -> StubAnswer {
        StubAnswer(.response(status: status, body: body, contentType: contentType), headers: headers)
    }

    /// A response with a text body (UTF-8, `text/plain; charset=utf-8`).
    /// - Parameters:
    ///   - text: The body.
    ///   - status: The HTTP status. Default 200.
    ///   - headers: More header lines.
    /// - Returns: The answer.
    public static func text(_ text: String, status: Int = 200, headers: HTTPHeaders = []) -> StubAnswer {
        .status(status, body: Data(text.utf8), contentType: "text/plain; charset=utf-8", headers: headers)
    }

    /// A response with a JSON body (`application/json`).
    /// - Parameters:
    ///   - json: The JSON text.
    ///   - status: The HTTP status. Default 200.
    ///   - headers: More header lines.
    /// - Returns: The answer.
    public static func json(_ json: String, status: Int = 200, headers: HTTPHeaders = []) -> StubAnswer {
        .status(status, body: Data(json.utf8), contentType: "application/json", headers: headers)
    }

    /// A response whose body is read from a file when it answers (`.json` gives
    /// `application/json`; a missing file fails the request with ``CourierError/Code/notFound``).
    /// - Parameters:
    ///   - path: The file's path.
    ///   - status: The HTTP status. Default 200.
    ///   - headers: More header lines.
    /// - Returns: The answer.
    public static func file(_ path: String, status: Int = 200, headers: HTTPHeaders = []) -> StubAnswer {
        StubAnswer(.file(path: path, status: status), headers: headers)
    }

    /// A failure with this code and no response (e.g. ``CourierError/Code/timeout``).
    /// - Parameter code: A failure code.
    /// - Returns: The answer.
    public static func error(_ code: CourierError.Code) -> StubAnswer { StubAnswer(.error(code)) }

    /// The same answer, given after a delay (on a timer of the engine: nothing blocks).
    /// - Parameter seconds: The delay (>= 0).
    /// - Returns: The changed answer.
    public func delayed(_ seconds: Double) -> StubAnswer {
        var copy = self
        copy.delay = seconds
        return copy
    }
}

// MARK: - A stub

/// A stub: what it matches and its answers in order.
public struct Stub: Sendable {
    /// What it matches.
    public var match: StubMatch
    /// Its answers, one per attempt; the last repeats.
    public var answers: [StubAnswer]

    /// A stub.
    /// - Parameters:
    ///   - match: What it matches.
    ///   - answers: Its answers (at least one).
    public init(_ match: StubMatch, _ answers: [StubAnswer]) {
        self.match = match
        self.answers = answers
    }

    /// A stub.
    /// - Parameters:
    ///   - match: What it matches.
    ///   - answers: Its answers (at least one).
    public init(_ match: StubMatch, _ answers: StubAnswer...) { self.init(match, answers) }

    /// A new C stub (`courier_stub_free` it).
    func makeCStub() throws -> OpaquePointer {
        guard !answers.isEmpty else { throw CourierError(.invalidArgument, message: "a stub needs an answer") }
        var made: OpaquePointer?
        var error = courier_error()
        let rc = withOptionalCString(match.method) { method in
            withOptionalCString(match.url) { url in courier_stub_new(&made, method, url, match.urlMatch.cValue, &error) }
        }
        guard rc == COURIER_OK.rawValue, let stub = made else { throw CourierError(code: rc, detail: &error) }
        do {
            for line in match.headers {
                try Response.checkNoNUL(line.name, line.value ?? "")
                try CourierError.check(withOptionalCString(line.value) { courier_stub_match_header(stub, line.name, $0) },
                                       "stub header '\(line.name)'")
            }
            if let predicate = match.predicate {
                let box = StubPredicateBox(predicate)
                // On failure the C core has already released the box through user_free.
                try CourierError.check(courier_stub_set_predicate(stub, stubPredicateTrampoline,
                                                                  Unmanaged.passRetained(box).toOpaque(), releaseBox),
                                       "stub predicate")
            }
            for answer in answers {
                switch answer.kind {
                case .response(let status, let body, let contentType):
                    try body.withUnsafeBytes { bytes in
                        try withOptionalCString(contentType) { type in
                            try CourierError.check(courier_stub_add_response(stub, Int32(clamping: status), bytes.baseAddress,
                                                                             bytes.count, type), "stub answer \(status)")
                        }
                    }
                case .file(let path, let status):
                    try CourierError.check(courier_stub_add_file(stub, Int32(clamping: status), path), "stub file '\(path)'")
                case .error(let code):
                    try CourierError.check(courier_stub_add_error(stub, courier_code(rawValue: code.rawValue)),
                                           "stub error \(code.name)")
                }
                for line in answer.headers {
                    try Response.checkNoNUL(line.name, line.value)
                    try CourierError.check(courier_stub_add_header(stub, line.name, line.value), "stub answer header '\(line.name)'")
                }
                if answer.delay > 0 {
                    try CourierError.check(courier_stub_set_delay_ms(stub, RetryPolicy.milliseconds(answer.delay)),
                                           "stub delay \(answer.delay)")
                }
            }
            return stub
        } catch {
            courier_stub_free(stub)
            throw error
        }
    }
}

/// A stub's predicate (`user` of `courier_stub_set_predicate`). Immutable.
final class StubPredicateBox: @unchecked Sendable {
    let predicate: @Sendable (StubbedRequest) -> Bool
    init(_ predicate: @escaping @Sendable (StubbedRequest) -> Bool) { self.predicate = predicate }
}

/// `courier_stub_predicate_fn`: runs on the sending thread with the borrowed request.
private let stubPredicateTrampoline: courier_stub_predicate_fn = { request, user in
    guard let request, let user else { return 0 }
    let box = Unmanaged<StubPredicateBox>.fromOpaque(user).takeUnretainedValue()
    return box.predicate(StubbedRequest(request)) ? 1 : 0
}

// MARK: - The record

/// A request the stubs saw (`courier_stub_request`): what the engine would have sent. A copy.
public struct StubbedRequest: Sendable {
    /// The method.
    public let method: String
    /// The full URL, query included.
    public let url: String
    /// The header lines the engine set (not the transport's own Host or Content-Length).
    public let headers: HTTPHeaders
    /// The body, or nil (none, or a body streamed from a file or multipart, which is not read).
    public let body: Data?
    /// The id of the stub that answered, or nil when none matched.
    public let stubID: UInt64?

    /// The value of the first header line with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    /// - Returns: The value, or nil.
    public func header(_ name: String) -> String? { headers.first(named: name) }

    /// The body as UTF-8 text, or nil.
    public var text: String? { body.flatMap { String(data: $0, encoding: .utf8) } }

    /// Reads a borrowed `courier_stub_request *`.
    init(_ pointer: OpaquePointer) {
        method = String(borrowedCString: courier_stub_request_method(pointer))
        url = String(borrowedCString: courier_stub_request_url(pointer))
        headers = HTTPHeaders(count: courier_stub_request_header_count(pointer)) {
            courier_stub_request_header_at(&$1, &$2, pointer, $0)
        }
        var len = 0
        body = courier_stub_request_body(pointer, &len).map { Data(bytes: $0, count: len) }
        let id = courier_stub_request_stub_id(pointer)
        stubID = id == 0 ? nil : id
    }
}

// MARK: - Configuration

extension Configuration {
    /// Stubs every engine opened from this configuration starts with (each engine keeps its own
    /// place in their answers). Used while ``stubMode`` is not ``StubMode/off``.
    public var stubs: [Stub] {
        get { options.lazy.compactMap { $0 as? StubsOption }.last?.stubs ?? [] }
        set {
            options.removeAll { $0 is StubsOption }
            options.append(StubsOption(stubs: newValue))
        }
    }

    /// Whether and how the engine answers from stubs. Default ``StubMode/off``;
    /// ``Engine/stubs`` changes it at run time.
    public var stubMode: StubMode {
        get { options.lazy.compactMap { $0 as? StubModeOption }.last?.mode ?? .off }
        set {
            options.removeAll { $0 is StubModeOption }
            options.append(StubModeOption(mode: newValue))
        }
    }
}

struct StubsOption: ConfigurationOption {
    let stubs: [Stub]
    func apply(to config: OpaquePointer) throws {
        for stub in stubs {
            let c = try stub.makeCStub()
            defer { courier_stub_free(c) }
            try CourierError.check(courier_config_add_stub(config, c), "stubs")
        }
    }
}

struct StubModeOption: ConfigurationOption {
    let mode: StubMode
    func apply(to config: OpaquePointer) throws {
        try CourierError.check(courier_config_set_stub_mode(config, mode.cValue), "stubMode")
    }
}

// MARK: - The engine's stubs

/// An engine's stubs (``Engine/stubs``): add and remove them, set the mode, read the record of
/// the requests they saw, replay a HAR file. Any thread.
///
/// ```swift
/// engine.stubs.mode = .only
/// try engine.stubs.add(.get("/users/1"), .json(#"{"id":1}"#))
/// let user = try await engine.send(.get("/users/1"))
/// XCTAssertEqual(engine.stubs.requests.map(\.url), [baseURL + "/users/1"])
/// ```
public struct Stubs: Sendable {
    let engine: Engine

    private func call<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        guard engine.enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { engine.leave() }
        return try body(engine.handle)
    }

    /// The mode: starts as ``Configuration/stubMode``; a change applies to requests sent afterwards.
    public var mode: StubMode {
        get { (try? call { StubMode(courier_engine_stub_mode($0)) }) ?? .off }
        nonmutating set { _ = try? call { courier_engine_set_stub_mode($0, newValue.cValue) } }
    }

    /// Adds a stub; the stub added last that matches answers (a test can override a fixture's).
    /// - Parameter stub: The stub.
    /// - Returns: Its id (for ``remove(_:)``).
    /// - Throws: ``CourierError``: ``CourierError/Code/invalidArgument`` (no answer, a bad
    ///   regular expression, a status outside 100...999), ``CourierError/Code/closed``.
    @discardableResult
    public func add(_ stub: Stub) throws -> UInt64 {
        let c = try stub.makeCStub()
        defer { courier_stub_free(c) }
        return try call { handle in
            var id: UInt64 = 0
            try CourierError.check(courier_engine_add_stub(&id, handle, c), "stub")
            return id
        }
    }

    /// Adds a stub made of a match and its answers. See ``add(_:)``.
    /// - Parameters:
    ///   - match: What it matches.
    ///   - answers: Its answers in order (at least one).
    /// - Returns: Its id.
    /// - Throws: As ``add(_:)``.
    @discardableResult
    public func add(_ match: StubMatch, _ answers: StubAnswer...) throws -> UInt64 { try add(Stub(match, answers)) }

    /// Removes a stub.
    /// - Parameter id: Its id.
    /// - Returns: false when there is no such stub.
    @discardableResult
    public func remove(_ id: UInt64) -> Bool {
        (try? call { courier_engine_remove_stub($0, id) == COURIER_OK.rawValue }) ?? false
    }

    /// Removes every stub (the record stays).
    public func removeAll() { _ = try? call { courier_engine_clear_stubs($0) } }

    /// The requests the stubs saw, in order (matched or not; each retry a stub answered too).
    public var requests: [StubbedRequest] {
        (try? call { handle in
            (0..<courier_engine_stub_request_count(handle)).compactMap { i -> StubbedRequest? in
                var out: OpaquePointer?
                guard courier_engine_stub_request_at(&out, handle, i) == COURIER_OK.rawValue, let out else { return nil }
                defer { courier_stub_request_free(out) }
                return StubbedRequest(out)
            }
        }) ?? []
    }

    /// Empties the record.
    public func clearRequests() { _ = try? call { courier_engine_clear_stub_requests($0) } }

    /// Adds the entries of a HAR 1.2 file as stubs: one per method and URL (matched exactly), its
    /// answers that method and URL's responses in the file's order. The mode is not changed.
    /// - Parameter path: The HAR file.
    /// - Returns: The number of stubs added.
    /// - Throws: ``CourierError``: ``CourierError/Code/notFound`` (no such file),
    ///   ``CourierError/Code/json`` (not a HAR).
    @discardableResult
    public func replayHAR(from path: String) throws -> Int {
        try call { handle in
            var count = 0
            var error = courier_error()
            let rc = courier_engine_replay_har(&count, handle, path, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return count
        }
    }
}

extension Engine {
    /// The engine's stubs: what answers requests instead of the network while the mode is not
    /// ``StubMode/off``.
    public var stubs: Stubs { Stubs(engine: self) }

    /// Records every exchange from now on into a HAR 1.2 file (created or replaced now, complete
    /// after each entry: browsers' developer tools and Charles open it), after each attempt that
    /// received a response (from the network or a stub; not a cache hit). nil stops recording.
    /// - Parameter path: The HAR file, or nil to stop.
    /// - Throws: ``CourierError``: ``CourierError/Code/invalidArgument`` when the file cannot
    ///   be written, ``CourierError/Code/closed``.
    public func recordHAR(to path: String?) throws {
        guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { leave() }
        var error = courier_error()
        let rc = withOptionalCString(path) { courier_engine_record_har(handle, $0, &error) }
        if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
    }
}
