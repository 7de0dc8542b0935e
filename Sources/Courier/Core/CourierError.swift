// CourierError.swift — the one error type of the facade. Its code mirrors the C core's
// `courier_code`, so `catch CourierError.timeout` works the way `catch URLError.timedOut` does.

internal import CCore

// MARK: - CourierError

/// An error from Courier: what failed (``code``), a human-readable detail (``message``), the
/// underlying codes the C core reported, and the response when one was received.
///
/// Match it by code in a `catch` clause:
/// ```swift
/// do { _ = try await engine.send(.get("/slow").timeout(1)) }
/// catch CourierError.timeout { ... }
/// catch let error as CourierError where error.code == .httpStatus { print(error.response?.status ?? 0) }
/// ```
/// Tests and programs should look at ``code`` and the numeric fields, never at ``message``, whose
/// wording may change.
public struct CourierError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed. Mirrors the C core's `courier_code`; codes are append-only there, so a code
    /// this version does not name is still represented (``Code/isKnown`` is then false).
    public let code: Code
    /// English detail from the C core (or the facade). Not stable: do not match on it.
    public let message: String
    /// The HTTP status when one was received (also when ``code`` is not ``Code/httpStatus``).
    public let httpStatus: Int?
    /// The underlying libcurl `CURLcode`, when the failure came from the transfer.
    public let curlCode: Int?
    /// The underlying `errno`, when the failure came from the operating system.
    public let osError: Int?
    /// The underlying storage (LMDB) error, when the failure came from the store.
    public let storeError: Int?
    /// The response, attached for ``Code/httpStatus`` and ``Code/invalidResult`` (and the 3xx for
    /// the redirect codes).
    public let response: Response?
    /// Which timeout fired, for ``Code/timeout`` (nil for other codes).
    public let timeoutKind: TimeoutKind?

    /// Creates an error.
    /// - Parameters:
    ///   - code: What failed.
    ///   - message: A detail; empty means the code's standard text.
    ///   - httpStatus: The HTTP status, if any.
    ///   - curlCode: The libcurl code, if any.
    ///   - osError: The `errno`, if any.
    ///   - storeError: The storage error, if any.
    ///   - response: The response, if any.
    public init(_ code: Code, message: String = "", httpStatus: Int? = nil, curlCode: Int? = nil,
                osError: Int? = nil, storeError: Int? = nil, response: Response? = nil) {
        self.code = code
        self.message = message.isEmpty ? code.description : message
        self.httpStatus = httpStatus
        self.curlCode = curlCode
        self.osError = osError
        self.storeError = storeError
        self.response = response
        self.timeoutKind = nil
    }

    /// The same error with the timeout kind the C core reported.
    private init(_ base: CourierError, timeoutKind: TimeoutKind?) {
        self.code = base.code
        self.message = base.message
        self.httpStatus = base.httpStatus
        self.curlCode = base.curlCode
        self.osError = base.osError
        self.storeError = base.storeError
        self.response = base.response
        self.timeoutKind = timeoutKind
    }

    /// "timeout (-5): Operation timed out after 100 milliseconds", for logs.
    public var description: String {
        var text = "\(code.name) (\(code.rawValue)): \(message)"
        if let httpStatus { text += " [HTTP \(httpStatus)]" }
        return text
    }
}

// MARK: - Codes

extension CourierError {
    /// What failed: one value per C `courier_code`. A struct rather than an enum, so codes the C
    /// core adds later are representable without breaking exhaustive `switch`es.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The C core's code (negative; 0 is success and is never an error's code).
        public let rawValue: Int32

        /// Wraps a C code. Any value is accepted: one this version does not name is "unknown".
        /// - Parameter rawValue: The `courier_code`.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        init(_ code: courier_code) { self.rawValue = code.rawValue }

        /// A NULL handle, an out-of-range value, a misuse.
        public static let invalidArgument = Code(COURIER_E_INVALID_ARGUMENT)
        /// A URL that does not parse, is not http/https, or a relative path without a base URL.
        public static let invalidURL = Code(COURIER_E_INVALID_URL)
        /// The host name did not resolve.
        public static let cannotResolve = Code(COURIER_E_CANNOT_RESOLVE)
        /// The TCP connection was refused or the host unreachable.
        public static let cannotConnect = Code(COURIER_E_CANNOT_CONNECT)
        /// The request's timeout passed.
        public static let timeout = Code(COURIER_E_TIMEOUT)
        /// The TLS handshake or certificate verification failed.
        public static let tls = Code(COURIER_E_TLS)
        /// The server's public key did not match the pinned key.
        public static let pinning = Code(COURIER_E_PINNING)
        /// Cancelled by the caller (by id, `cancelAll`, task cancellation) or by the engine closing.
        public static let cancelled = Code(COURIER_E_CANCELLED)
        /// The server answered with a status >= 400; the response is attached.
        public static let httpStatus = Code(COURIER_E_HTTP_STATUS)
        /// A validator rejected the response; the response is attached.
        public static let invalidResult = Code(COURIER_E_INVALID_RESULT)
        /// The response body exceeded the maximum size.
        public static let tooLarge = Code(COURIER_E_TOO_LARGE)
        /// A bug, or an unexpected failure of a dependency.
        public static let `internal` = Code(COURIER_E_INTERNAL)
        /// An allocation failed.
        public static let noMemory = Code(COURIER_E_NO_MEMORY)
        /// A header name that is not a token, or CR, LF or NUL in a header.
        public static let invalidHeader = Code(COURIER_E_INVALID_HEADER)
        /// A parameter or header that is not valid UTF-8 (or holds a NUL byte).
        public static let invalidEncoding = Code(COURIER_E_INVALID_ENCODING)
        /// The server closed the connection in the middle of the body.
        public static let partialResponse = Code(COURIER_E_PARTIAL_RESPONSE)
        /// Another network failure: reset, send or receive error.
        public static let network = Code(COURIER_E_NETWORK)
        /// The engine is closing or closed.
        public static let closed = Code(COURIER_E_CLOSED)
        /// The store directory cannot be created or used.
        public static let store = Code(COURIER_E_STORE)
        /// No such item (request id, entry).
        public static let notFound = Code(COURIER_E_NOT_FOUND)
        /// An identical request was sent within the engine's frequent-request guard window;
        /// nothing was sent.
        public static let tooFrequent = Code(COURIER_E_TOO_FREQUENT)
        /// More redirects than the maximum; the last 3xx is attached.
        public static let tooManyRedirects = Code(COURIER_E_TOO_MANY_REDIRECTS)
        /// A redirect was refused (HTTPS to HTTP without permission, a scheme other than http(s),
        /// or the redirect hook); the 3xx is attached.
        public static let redirectRefused = Code(COURIER_E_REDIRECT_REFUSED)
        /// A redirect must send the body again and it was streamed from a file; the 3xx is attached.
        public static let bodyNotReplayable = Code(COURIER_E_BODY_NOT_REPLAYABLE)
        /// The server broke HTTP: a garbage status line, conflicting Content-Length fields, bad
        /// framing or content coding, an unusable Location.
        public static let protocolError = Code(COURIER_E_PROTOCOL)
        /// A response header line, or the header block, is over the limit.
        public static let headersTooLarge = Code(COURIER_E_HEADERS_TOO_LARGE)
        /// User code (a closure the engine called) threw; `send` and `sendSync` rethrow that error itself.
        public static let user = Code(COURIER_E_USER)
        /// A Redis store failed: the server is unreachable or did not answer within the engine's
        /// timeout, refused the password or the database, or answered with an error.
        public static let redis = Code(COURIER_E_REDIS)
        /// A `redis://` store in a library built without Redis, or `rediss://` (TLS) with a hiredis
        /// that has no TLS.
        public static let redisUnsupported = Code(COURIER_E_REDIS_UNSUPPORTED)
        /// A JSON number read as a type that cannot hold it (beyond `Int64`, `UInt64` or `Double`,
        /// or a fraction read as an integer). Swift's decoders report it as a `DecodingError`.
        public static let numberRange = Code(COURIER_E_NUMBER_RANGE)
        /// Nothing to read yet from a stream (the C core's non-waiting reads); the Swift streams
        /// wait instead, so it reaches no Swift caller.
        public static let again = Code(COURIER_E_AGAIN)
        /// A WebSocket's opening handshake failed: no 101 (`httpStatus` tells), or no `Upgrade:
        /// websocket`, `Connection: upgrade` or right `Sec-WebSocket-Accept`, or a subprotocol or
        /// extension that was not offered.
        public static let wsHandshake = Code(COURIER_E_WS_HANDSHAKE)
        /// The WebSocket server broke RFC 6455; the connection was failed with the close code the
        /// RFC names (1002 or 1007).
        public static let wsProtocolError = Code(COURIER_E_WS_PROTOCOL)
        /// The WebSocket is closed: its closing handshake ended. Not a failure.
        public static let wsClosed = Code(COURIER_E_WS_CLOSED)
        /// The HTTP version required cannot be had: the server answered over another
        /// (``HTTPVersion/http2Only``), or this libcurl has no HTTP/3.
        public static let httpVersion = Code(COURIER_E_HTTP_VERSION)
        /// The engine answers from stubs (``StubMode/only``) and no stub matched the request;
        /// nothing was sent.
        public static let noStub = Code(COURIER_E_NO_STUB)
        /// The authenticator's credential was refused again right after a refresh (the loop
        /// guard); the refusing response (a 401) is attached.
        public static let credentialRefused = Code(COURIER_E_CREDENTIAL_REFUSED)
        /// A freeze was written to the Redis journal's master but fewer replicas than
        /// ``Configuration/frozenReplicas`` asks for confirmed it in time: not acknowledged as
        /// frozen (it may still be replayed).
        public static let replicasUnconfirmed = Code(COURIER_E_REPLICAS_UNCONFIRMED)
        // The JSON features' codes (json, mapping, api) are declared beside them, in Features/.

        /// Every code this version names, in the C header's order.
        public static let allKnown: [Code] = [
            .invalidArgument, .invalidURL, .cannotResolve, .cannotConnect, .timeout, .tls, .pinning,
            .cancelled, .httpStatus, .invalidResult, .tooLarge, .internal, .noMemory, .invalidHeader,
            .invalidEncoding, .partialResponse, .network, .closed, .store, .notFound, .tooFrequent,
            Code(COURIER_E_JSON), Code(COURIER_E_MAPPING), Code(COURIER_E_API),
            Code(COURIER_E_FROZEN), Code(COURIER_E_OFFLINE), Code(COURIER_E_JOURNAL_CORRUPT),
            .tooManyRedirects, .redirectRefused, .bodyNotReplayable, .protocolError, .headersTooLarge,
            Code(COURIER_E_PROXY),
            Code(COURIER_E_CACHE_INCONSISTENT), .user,
            Code(COURIER_E_RESEND_POLICY_UNKNOWN), Code(COURIER_E_DELETED_BY_POLICY),
            Code(COURIER_E_UNKNOWN_CHARSET), Code(COURIER_E_CHARSET), Code(COURIER_E_CLIENT_CERTIFICATE),
            Code(COURIER_E_CELLULAR),
            Code(COURIER_E_UNKNOWN_NAME), Code(COURIER_E_ROUTE_PARAMETER), Code(COURIER_E_CATALOG),
            .redis, .redisUnsupported, .numberRange, .again, .wsHandshake, .wsProtocolError,
            .wsClosed, .httpVersion, .noStub, .credentialRefused, .replicasUnconfirmed,
        ]

        /// A code with no name in this version: `Code(rawValue:)` of anything else.
        /// - Parameter rawValue: The C code.
        /// - Returns: The code (equal to the named one if the value has a name).
        public static func unknown(_ rawValue: Int32) -> Code { Code(rawValue: rawValue) }

        /// Whether this version names the code.
        public var isKnown: Bool { Code.allKnown.contains(self) }

        /// The Swift name of the code ("timeout"), or "unknown(<raw>)".
        public var name: String {
            switch self {
            case .invalidArgument: return "invalidArgument"
            case .invalidURL: return "invalidURL"
            case .cannotResolve: return "cannotResolve"
            case .cannotConnect: return "cannotConnect"
            case .timeout: return "timeout"
            case .tls: return "tls"
            case .pinning: return "pinning"
            case .cancelled: return "cancelled"
            case .httpStatus: return "httpStatus"
            case .invalidResult: return "invalidResult"
            case .tooLarge: return "tooLarge"
            case .internal: return "internal"
            case .noMemory: return "noMemory"
            case .invalidHeader: return "invalidHeader"
            case .invalidEncoding: return "invalidEncoding"
            case .partialResponse: return "partialResponse"
            case .network: return "network"
            case .closed: return "closed"
            case .store: return "store"
            case .notFound: return "notFound"
            case .tooFrequent: return "tooFrequent"
            case Code(COURIER_E_JSON): return "json"
            case Code(COURIER_E_MAPPING): return "mapping"
            case Code(COURIER_E_API): return "api"
            case Code(COURIER_E_FROZEN): return "frozen"
            case Code(COURIER_E_OFFLINE): return "offline"
            case Code(COURIER_E_JOURNAL_CORRUPT): return "journalCorrupt"
            case .tooManyRedirects: return "tooManyRedirects"
            case .redirectRefused: return "redirectRefused"
            case .bodyNotReplayable: return "bodyNotReplayable"
            case .protocolError: return "protocolError"
            case .headersTooLarge: return "headersTooLarge"
            case Code(COURIER_E_PROXY): return "proxy"
            case Code(COURIER_E_CACHE_INCONSISTENT): return "cacheInconsistent"
            case .user: return "user"
            case Code(COURIER_E_RESEND_POLICY_UNKNOWN): return "resendPolicyUnknown"
            case Code(COURIER_E_DELETED_BY_POLICY): return "deletedByPolicy"
            case Code(COURIER_E_UNKNOWN_CHARSET): return "unknownCharset"
            case Code(COURIER_E_CHARSET): return "charset"
            case Code(COURIER_E_CLIENT_CERTIFICATE): return "clientCertificate"
            case Code(COURIER_E_CELLULAR): return "cellular"
            case Code(COURIER_E_UNKNOWN_NAME): return "unknownName"
            case Code(COURIER_E_ROUTE_PARAMETER): return "routeParameter"
            case Code(COURIER_E_CATALOG): return "catalog"
            case .redis: return "redis"
            case .redisUnsupported: return "redisUnsupported"
            case .numberRange: return "numberRange"
            case .again: return "again"
            case .wsHandshake: return "wsHandshake"
            case .wsProtocolError: return "wsProtocolError"
            case .wsClosed: return "wsClosed"
            case .httpVersion: return "httpVersion"
            case .noStub: return "noStub"
            case .credentialRefused: return "credentialRefused"
            case .replicasUnconfirmed: return "replicasUnconfirmed"
            default: return "unknown(\(rawValue))"
            }
        }

        /// The C core's static English text for the code (`courier_strerror`).
        public var description: String { String(cString: courier_strerror(rawValue)) }

        /// Lets a `catch` clause match an error by code: `catch CourierError.timeout { ... }`.
        /// - Parameters:
        ///   - code: The code to match.
        ///   - error: The error thrown.
        /// - Returns: Whether `error` is a ``CourierError`` with that code.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? CourierError)?.code == code
        }
    }

    /// See ``Code/invalidArgument``.
    public static let invalidArgument = Code.invalidArgument
    /// See ``Code/invalidURL``.
    public static let invalidURL = Code.invalidURL
    /// See ``Code/cannotResolve``.
    public static let cannotResolve = Code.cannotResolve
    /// See ``Code/cannotConnect``.
    public static let cannotConnect = Code.cannotConnect
    /// See ``Code/timeout``.
    public static let timeout = Code.timeout
    /// See ``Code/tls``.
    public static let tls = Code.tls
    /// See ``Code/pinning``.
    public static let pinning = Code.pinning
    /// See ``Code/cancelled``.
    public static let cancelled = Code.cancelled
    /// See ``Code/httpStatus``.
    public static let httpStatus = Code.httpStatus
    /// See ``Code/invalidResult``.
    public static let invalidResult = Code.invalidResult
    /// See ``Code/tooLarge``.
    public static let tooLarge = Code.tooLarge
    /// See ``Code/internal``.
    public static let `internal` = Code.internal
    /// See ``Code/noMemory``.
    public static let noMemory = Code.noMemory
    /// See ``Code/invalidHeader``.
    public static let invalidHeader = Code.invalidHeader
    /// See ``Code/invalidEncoding``.
    public static let invalidEncoding = Code.invalidEncoding
    /// See ``Code/partialResponse``.
    public static let partialResponse = Code.partialResponse
    /// See ``Code/network``.
    public static let network = Code.network
    /// See ``Code/closed``.
    public static let closed = Code.closed
    /// See ``Code/store``.
    public static let store = Code.store
    /// See ``Code/notFound``.
    public static let notFound = Code.notFound
    /// See ``Code/tooFrequent``.
    public static let tooFrequent = Code.tooFrequent
    /// See ``Code/tooManyRedirects``.
    public static let tooManyRedirects = Code.tooManyRedirects
    /// See ``Code/redirectRefused``.
    public static let redirectRefused = Code.redirectRefused
    /// See ``Code/bodyNotReplayable``.
    public static let bodyNotReplayable = Code.bodyNotReplayable
    /// See ``Code/protocolError``.
    public static let protocolError = Code.protocolError
    /// See ``Code/headersTooLarge``.
    public static let headersTooLarge = Code.headersTooLarge
    /// ``Code/user``.
    public static let user = Code.user
    /// See ``Code/redis``.
    public static let redis = Code.redis
    /// See ``Code/redisUnsupported``.
    public static let redisUnsupported = Code.redisUnsupported
    /// See ``Code/numberRange``.
    public static let numberRange = Code.numberRange
    /// See ``Code/wsHandshake``.
    public static let wsHandshake = Code.wsHandshake
    /// See ``Code/wsProtocolError``.
    public static let wsProtocolError = Code.wsProtocolError
    /// See ``Code/wsClosed``.
    public static let wsClosed = Code.wsClosed
    /// See ``Code/httpVersion``.
    public static let httpVersion = Code.httpVersion
    /// See ``Code/noStub``.
    public static let noStub = Code.noStub
    /// See ``Code/credentialRefused``.
    public static let credentialRefused = Code.credentialRefused
    /// See ``Code/replicasUnconfirmed``.
    public static let replicasUnconfirmed = Code.replicasUnconfirmed
}

// MARK: - From the C core

extension CourierError {
    /// An error from a C call's return code and its optional `courier_error` detail.
    /// - Parameters:
    ///   - code: The negative `courier_code` returned.
    ///   - detail: The filled `courier_error`, if the call took one.
    ///   - context: Prefixed to the message (what the facade was doing), or nil.
    ///   - response: The response to attach.
    init(code: Int32, detail: UnsafePointer<courier_error>?, context: String? = nil, response: Response? = nil) {
        var message = ""
        var http: Int?
        var curl: Int?
        var os: Int?
        var store: Int?
        var kind: TimeoutKind?
        if let detail {
            kind = TimeoutKind(Int32(courier_error_timeout_kind(detail)))
            message = withUnsafeBytes(of: detail.pointee.message) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            let e = detail.pointee
            if e.http_status != 0 { http = Int(e.http_status) }
            if e.curl_code != 0 { curl = Int(e.curl_code) }
            if e.os_error != 0 { os = Int(e.os_error) }
            if e.store_error != 0 { store = Int(e.store_error) }
        }
        if let response, http == nil, response.status != 0 { http = response.status }
        if message.isEmpty { message = String(cString: courier_strerror(code)) }
        if let context { message = "\(context): \(message)" }
        self.init(CourierError(Code(rawValue: code), message: message, httpStatus: http, curlCode: curl, osError: os,
                               storeError: store, response: response),
                  timeoutKind: kind)
    }

    /// Throws unless a C call returned `COURIER_OK`.
    /// - Parameters:
    ///   - rc: The return code.
    ///   - context: What the facade was doing, for the message.
    /// - Throws: ``CourierError`` with the code.
    @inline(__always)
    static func check(_ rc: Int32, _ context: @autoclosure () -> String) throws {
        if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: nil, context: context()) }
    }
}
