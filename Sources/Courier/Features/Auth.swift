// Auth.swift — cookies, credentials, challenge handlers and proxies through the facade. The jar,
// the schemes, when a handler is asked and the proxies are the C core's (cookies.c, auth.c); this
// file converts values and runs async challenge handlers.

internal import CCore
import Foundation

// MARK: - Schemes and credentials

/// The authentication schemes credentials may answer a challenge with (`courier_auth_scheme`).
public struct AuthSchemes: OptionSet, Sendable, Hashable {
    /// The C bit set (`courier_auth_scheme` values or-ed together).
    public let rawValue: UInt32
    /// - Parameter rawValue: The C bit set.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Basic (RFC 7617): the password in clear; sent with the first request when alone.
    public static let basic = AuthSchemes(rawValue: UInt32(COURIER_AUTH_BASIC.rawValue))
    /// Digest (RFC 7616).
    public static let digest = AuthSchemes(rawValue: UInt32(COURIER_AUTH_DIGEST.rawValue))
    /// Negotiate (SPNEGO), where this libcurl has it.
    public static let negotiate = AuthSchemes(rawValue: UInt32(COURIER_AUTH_NEGOTIATE.rawValue))
    /// NTLM, where this libcurl has it.
    public static let ntlm = AuthSchemes(rawValue: UInt32(COURIER_AUTH_NTLM.rawValue))
    /// Every scheme but Basic: the strongest the server offers.
    public static let anySafe: AuthSchemes = [.digest, .negotiate, .ntlm]
    /// Every scheme: the strongest the server offers.
    public static let any: AuthSchemes = [.basic, .anySafe]
    /// The schemes this build can answer.
    public static var available: AuthSchemes { AuthSchemes(rawValue: courier_auth_available()) }
}

/// A user and password, and the schemes they may answer.
public struct Credentials: Sendable, Hashable {
    /// The user id.
    public var user: String
    /// The password.
    public var password: String
    /// The schemes; default ``AuthSchemes/any``.
    public var schemes: AuthSchemes

    /// - Parameters:
    ///   - user: The user id (no ':' with Basic).
    ///   - password: The password.
    ///   - schemes: The schemes they may answer.
    public init(user: String, password: String, schemes: AuthSchemes = .any) {
        self.user = user
        self.password = password
        self.schemes = schemes
    }
}

/// A 401 from the request's own origin, or a 407 from its proxy, handed to a challenge handler.
public struct AuthChallenge: Sendable {
    /// 401 or 407.
    public let status: Int
    /// The URL that answered (for 407: the request's URL).
    public let url: String
    /// The WWW-Authenticate (or Proxy-Authenticate) values, joined by ", ".
    public let header: String
    /// The request's id.
    public let requestID: UInt64
}

/// Answers a challenge, like URLSession's challenge delegate: credentials to send the request again
/// with them, nil to decline (the request ends with the 401 or 407). Asked at most once per
/// request, never for an origin other than the request's own; the request waits off the wire
/// until it returns.
public typealias ChallengeHandler = @Sendable (AuthChallenge) async -> Credentials?

final class ChallengeBox: @unchecked Sendable { // immutable after init
    let handler: ChallengeHandler
    init(_ handler: @escaping ChallengeHandler) { self.handler = handler }
}

/// The C challenge, handed to the task that answers it (answered exactly once, from any thread).
private struct PendingChallenge: @unchecked Sendable {
    let pointer: OpaquePointer

    func answer(_ credentials: Credentials?) {
        if let credentials {
            courier_challenge_answer(pointer, credentials.user, credentials.password, credentials.schemes.rawValue)
        } else {
            courier_challenge_answer(pointer, nil, nil, 0)
        }
    }
}

/// `courier_challenge_fn`: runs on the worker; the handler runs in a task and answers from there.
private let challengeTrampoline: courier_challenge_fn = { challenge, user in
    guard let challenge else { return }
    let box = Unmanaged<ChallengeBox>.fromOpaque(user!).takeUnretainedValue()
    let value = AuthChallenge(status: Int(courier_challenge_status(challenge)),
                              url: String(borrowedCString: courier_challenge_url(challenge)),
                              header: String(borrowedCString: courier_challenge_header(challenge)),
                              requestID: courier_challenge_request_id(challenge))
    let pending = PendingChallenge(pointer: challenge)
    Task.detached { pending.answer(await box.handler(value)) }
}

// MARK: - Configuration and requests

enum _AuthOption: ConfigurationOption {
    case cookies(Bool)
    case credentials(Credentials?)
    case proxyCredentials(Credentials?)
    case proxy(String?, noProxy: String?)
    case challenge(ChallengeBox)

    func apply(to config: OpaquePointer) throws {
        switch self {
        case .cookies(let on):
            try CourierError.check(courier_config_set_cookies(config, on ? 1 : 0), "cookies")
        case .credentials(let c):
            try CourierError.check(courier_config_set_credentials(config, c?.user, c?.password, c?.schemes.rawValue ?? 0),
                                   "credentials")
        case .proxyCredentials(let c):
            try CourierError.check(courier_config_set_proxy_credentials(config, c?.user, c?.password,
                                                                        c?.schemes.rawValue ?? 0), "proxyCredentials")
        case .proxy(let url, let noProxy):
            try CourierError.check(courier_config_set_proxy(config, url, noProxy), "proxy '\(url ?? "")'")
        case .challenge(let box):
            let user = Unmanaged.passRetained(box).toOpaque()
            try CourierError.check(courier_config_set_challenge_handler(config, challengeTrampoline, user, releaseBox),
                                   "challengeHandler")
        }
    }

    func apply(toRequest request: OpaquePointer) throws {
        switch self {
        case .cookies:
            break // an engine setting
        case .credentials(let c):
            try CourierError.check(courier_request_set_credentials(request, c?.user, c?.password, c?.schemes.rawValue ?? 0),
                                   "credentials")
        case .proxyCredentials(let c):
            try CourierError.check(courier_request_set_proxy_credentials(request, c?.user, c?.password,
                                                                         c?.schemes.rawValue ?? 0), "proxyCredentials")
        case .proxy(let url, let noProxy):
            try CourierError.check(courier_request_set_proxy(request, url, noProxy), "proxy '\(url ?? "")'")
        case .challenge(let box):
            let user = Unmanaged.passRetained(box).toOpaque()
            try CourierError.check(courier_request_set_challenge_handler(request, challengeTrampoline, user, releaseBox),
                                   "challengeHandler")
        }
    }
}

/// A request setting (the RequestOption side of ``_AuthOption``).
struct _AuthRequestOption: RequestOption {
    let option: _AuthOption
    func apply(to request: OpaquePointer) throws { try option.apply(toRequest: request) }
}

extension Configuration {
    /// Turns the cookie jar on (the default) or off. The jar is kept in the store, shared with the
    /// other engines and processes on it, re-read before a request when one of them changed it.
    /// - Parameter enabled: false: no Cookie header is added and Set-Cookie is ignored.
    /// - Returns: The changed configuration.
    public func cookies(_ enabled: Bool) -> Configuration { adding(_AuthOption.cookies(enabled)) }

    /// Credentials for every request without its own; sent to the request's own origin only.
    /// - Parameter credentials: The credentials, or nil for none.
    /// - Returns: The changed configuration.
    public func credentials(_ credentials: Credentials?) -> Configuration { adding(_AuthOption.credentials(credentials)) }

    /// The handler asked once per request for a 401 from its origin or a 407 from its proxy.
    /// - Parameter handler: See ``ChallengeHandler``.
    /// - Returns: The changed configuration.
    public func challengeHandler(_ handler: @escaping ChallengeHandler) -> Configuration {
        adding(_AuthOption.challenge(ChallengeBox(handler)))
    }

    /// The proxy of every request: "http://", "https://", "socks5://" or "socks5h://host:port", ""
    /// for none (direct). Without one the environment's (http_proxy, ...) is used.
    /// - Parameters:
    ///   - url: The proxy URL.
    ///   - noProxy: Hosts, addresses and CIDR ranges that go direct, comma-separated.
    /// - Returns: The changed configuration.
    public func proxy(_ url: String, noProxy: String? = nil) -> Configuration {
        adding(_AuthOption.proxy(url, noProxy: noProxy))
    }

    /// Credentials for the proxy.
    /// - Parameter credentials: The credentials, or nil for none.
    /// - Returns: The changed configuration.
    public func proxyCredentials(_ credentials: Credentials?) -> Configuration {
        adding(_AuthOption.proxyCredentials(credentials))
    }
}

extension Request {
    /// Credentials for this request, replacing the engine's.
    /// - Parameter credentials: The credentials.
    /// - Returns: The changed request.
    public func credentials(_ credentials: Credentials) -> Request {
        adding(_AuthRequestOption(option: .credentials(credentials)))
    }

    /// A challenge handler for this request, replacing the engine's.
    /// - Parameter handler: See ``ChallengeHandler``.
    /// - Returns: The changed request.
    public func challengeHandler(_ handler: @escaping ChallengeHandler) -> Request {
        adding(_AuthRequestOption(option: .challenge(ChallengeBox(handler))))
    }

    /// The proxy of this request, replacing the engine's ("" goes direct).
    /// - Parameters:
    ///   - url: The proxy URL.
    ///   - noProxy: Hosts that go direct.
    /// - Returns: The changed request.
    public func proxy(_ url: String, noProxy: String? = nil) -> Request {
        adding(_AuthRequestOption(option: .proxy(url, noProxy: noProxy)))
    }

    /// Credentials for this request's proxy.
    /// - Parameter credentials: The credentials.
    /// - Returns: The changed request.
    public func proxyCredentials(_ credentials: Credentials) -> Request {
        adding(_AuthRequestOption(option: .proxyCredentials(credentials)))
    }
}

// MARK: - Errors

extension CourierError.Code {
    /// The proxy failed: its name did not resolve, it refused the tunnel (``CourierError/httpStatus-property``
    /// tells), or its SOCKS handshake failed.
    public static let proxy = CourierError.Code(COURIER_E_PROXY)
}

extension CourierError {
    /// See ``Code/proxy``.
    public static let proxy = Code.proxy
}

// MARK: - The cookie jar

/// One cookie of an engine's jar.
public struct Cookie: Sendable, Hashable {
    /// The name.
    public var name: String
    /// The value.
    public var value: String
    /// The host (no leading dot).
    public var domain: String
    /// The path; default "/".
    public var path: String
    /// When it expires; nil for a session cookie (kept until the jar is cleared).
    public var expires: Date?
    /// A Domain cookie (sent to subdomains too); false: host-only.
    public var includeSubdomains: Bool
    /// Sent over https (and to localhost) only.
    public var secure: Bool
    /// HttpOnly was given.
    public var httpOnly: Bool

    /// A cookie to give ``Cookies/set(_:)``.
    /// - Parameters:
    ///   - name: The name.
    ///   - value: The value.
    ///   - domain: The host (no leading dot).
    ///   - path: The path; default "/".
    ///   - expires: When it expires; nil for a session cookie, a past date removes it.
    ///   - includeSubdomains: A Domain cookie (also sent to subdomains).
    ///   - secure: Sent over https (and to localhost) only.
    ///   - httpOnly: Marked HttpOnly.
    public init(name: String, value: String, domain: String, path: String = "/", expires: Date? = nil,
                includeSubdomains: Bool = false, secure: Bool = false, httpOnly: Bool = false) {
        self.name = name
        self.value = value
        self.domain = domain
        self.path = path
        self.expires = expires
        self.includeSubdomains = includeSubdomains
        self.secure = secure
        self.httpOnly = httpOnly
    }
}

extension Engine {
    /// The engine's cookie jar: list, set, remove, clear.
    public var cookies: Cookies { Cookies(engine: self) }
}

/// The manager of an engine's cookie jar. Thread-safe; each call reads or writes the store
/// (synced commits), so it blocks for about a disk sync when it changes the jar.
public struct Cookies: Sendable {
    let engine: Engine

    private func call<R>(_ body: (OpaquePointer, inout courier_error) throws -> R) throws -> R {
        try engine.withHandle { handle in
            var error = courier_error()
            return try body(handle, &error)
        }
    }

    /// Every cookie, as the store has it now, expired ones left out, sorted by domain, path, name.
    /// - Returns: The cookies.
    /// - Throws: ``CourierError`` (``CourierError/Code/invalidArgument`` when the jar is off).
    public func all() throws -> [Cookie] {
        try call { handle, error in
            var list: OpaquePointer?
            let rc = courier_cookies_list(&list, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            defer { courier_cookie_list_free(list) }
            return (0..<courier_cookie_list_count(list)).map { i in
                var c = courier_cookie()
                c.size = MemoryLayout<courier_cookie>.size
                courier_cookie_list_at(&c, list, i)
                return Cookie(name: String(borrowedCString: c.name), value: String(borrowedCString: c.value),
                              domain: String(borrowedCString: c.domain), path: String(borrowedCString: c.path),
                              expires: c.expires == 0 ? nil : Date(timeIntervalSince1970: Double(c.expires)),
                              includeSubdomains: c.include_subdomains != 0, secure: c.secure != 0,
                              httpOnly: c.http_only != 0)
            }
        }
    }

    /// Adds or replaces a cookie (same domain, path and name) and stores it; an expiry in the past
    /// removes it.
    /// - Parameter cookie: The cookie.
    /// - Throws: ``CourierError`` (``CourierError/Code/invalidHeader`` for a field a cookie cannot carry).
    public func set(_ cookie: Cookie) throws {
        try call { handle, error in
            let rc = cookie.domain.withCString { domain in
                cookie.path.withCString { path in
                    cookie.name.withCString { name in
                        cookie.value.withCString { value -> Int32 in
                            var c = courier_cookie()
                            c.size = MemoryLayout<courier_cookie>.size
                            courier_cookie_init(&c)
                            c.domain = domain
                            c.path = path
                            c.name = name
                            c.value = value
                            c.expires = cookie.expires.map { Int64($0.timeIntervalSince1970.rounded(.down)) } ?? 0
                            c.include_subdomains = cookie.includeSubdomains ? 1 : 0
                            c.secure = cookie.secure ? 1 : 0
                            c.http_only = cookie.httpOnly ? 1 : 0
                            return courier_cookies_set(handle, &c, &error)
                        }
                    }
                }
            }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
        }
    }

    /// Removes one cookie.
    /// - Parameters:
    ///   - name: Its name.
    ///   - domain: Its domain.
    ///   - path: Its path; default "/".
    /// - Throws: ``CourierError`` (``CourierError/Code/notFound`` when there is none).
    public func remove(name: String, domain: String, path: String = "/") throws {
        try call { handle, error in
            let rc = courier_cookies_remove(handle, domain, path, name, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
        }
    }

    /// Empties the jar and the store's jar.
    /// - Returns: How many cookies went.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func clear() throws -> Int {
        try call { handle, error in
            var removed: Int64 = 0
            let rc = courier_cookies_clear(&removed, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(removed)
        }
    }
}
