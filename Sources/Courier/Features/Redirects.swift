// Redirects.swift — redirects and the connect and idle timeouts, as configuration and request
// settings, the redirect hook, the chain a response went through, and which timeout fired. The C
// core follows redirects hop by hop and decides every rule (RFC 9110 15.4); this file only hands the
// settings over and translates.

internal import CCore

// MARK: - The hook's answer

/// What a redirect hook decides for one redirect.
public enum RedirectDecision: Sendable, Hashable {
    /// Send the next hop (as the hook left it).
    case follow
    /// Follow no further: the 3xx is the response (a success).
    case stop
    /// Refuse: the request fails with ``CourierError/Code/redirectRefused`` (the 3xx attached).
    case refuse
}

/// A redirect hook: sees the 3xx and the next hop the engine made by the rules (method, URL,
/// headers), may change the hop, and decides. Runs on the engine's worker thread: keep it quick,
/// never wait for another send or close the engine. Throwing refuses the redirect.
public typealias RedirectHook = @Sendable (_ response: Response, _ next: inout OutgoingRequest) throws -> RedirectDecision

/// One redirect of a chain: the URL that answered with a redirect, and its status.
public struct Redirect: Sendable, Hashable {
    /// The URL that answered with the redirect.
    public let url: String
    /// Its status (301, 302, 303, 307 or 308).
    public let status: Int

    /// A hop (for comparisons in tests and mocks; the engine makes the real ones).
    /// - Parameters:
    ///   - url: The URL that answered with the redirect.
    ///   - status: Its status.
    public init(url: String, status: Int) {
        self.url = url
        self.status = status
    }
}

/// Which timeout ended a request with ``CourierError/Code/timeout``.
public enum TimeoutKind: Sendable, Hashable {
    /// No connection (TCP and TLS) within the connect timeout: nothing was sent.
    case connect
    /// Connected, and no byte received (nor request body byte sent) for the idle timeout.
    case idle
    /// The whole transfer took longer than the (total) timeout.
    case total

    init?(_ raw: Int32) {
        switch raw {
        case Int32(COURIER_TIMEOUT_CONNECT.rawValue): self = .connect
        case Int32(COURIER_TIMEOUT_IDLE.rawValue): self = .idle
        case Int32(COURIER_TIMEOUT_TOTAL.rawValue): self = .total
        default: return nil
        }
    }
}

// MARK: - Configuration settings

extension Configuration {
    /// Whether redirects are followed. Default true. Not following delivers the 3xx, Location
    /// included, as the response: a success.
    public var followRedirects: Bool {
        get { setting("followRedirects") ?? true }
        set {
            setSetting("followRedirects", newValue) {
                try CourierError.check(courier_config_set_follow_redirects($0, $1 ? 1 : 0), "followRedirects")
            }
        }
    }

    /// The most redirects one request follows (>= 0). Default 20; one more fails with
    /// ``CourierError/Code/tooManyRedirects``.
    public var maxRedirects: Int {
        get { setting("maxRedirects") ?? 20 }
        set {
            setSetting("maxRedirects", newValue) {
                try CourierError.check(courier_config_set_max_redirects($0, Int32(clamping: $1)), "maxRedirects \($1)")
            }
        }
    }

    /// Whether a redirect from HTTPS to HTTP is followed. Default false: it fails with
    /// ``CourierError/Code/redirectRefused``.
    public var allowRedirectDowngrade: Bool {
        get { setting("allowRedirectDowngrade") ?? false }
        set {
            setSetting("allowRedirectDowngrade", newValue) {
                try CourierError.check(courier_config_set_allow_redirect_downgrade($0, $1 ? 1 : 0), "allowRedirectDowngrade")
            }
        }
    }

    /// The redirect hook of every request that sets none (see ``RedirectHook``). Default nil.
    public var redirectHook: RedirectHook? {
        get { setting("redirectHook", as: RedirectHookBox.self)?.hook }
        set {
            setSetting("redirectHook", newValue.map(RedirectHookBox.init)) { config, box in
                let user = Unmanaged.passRetained(box).toOpaque()
                // On failure the C core has already released the box through user_free.
                try CourierError.check(courier_config_set_redirect_hook(config, redirectTrampoline, user, releaseBox),
                                       "redirectHook")
            }
        }
    }

    /// The connect timeout (TCP and TLS), in seconds (>= 0). Default 0: none beyond the total
    /// (``timeout``).
    public var connectTimeout: Double {
        get { setting("connectTimeout") ?? 0 }
        set { setTimeout("connectTimeout", COURIER_TIMEOUT_CONNECT, newValue) }
    }

    /// The idle timeout: the longest time without a byte received (or a request body byte sent)
    /// once connected, in seconds (>= 0). Default 0: none.
    public var idleTimeout: Double {
        get { setting("idleTimeout") ?? 0 }
        set { setTimeout("idleTimeout", COURIER_TIMEOUT_IDLE, newValue) }
    }

    private mutating func setTimeout(_ name: String, _ kind: courier_timeout_kind, _ seconds: Double) {
        setSetting(name, seconds) {
            try CourierError.check(courier_config_set_timeout($0, kind, Configuration.timeoutMilliseconds($1)),
                                   "\(name) \($1)")
        }
    }

    /// Deprecated: set ``followRedirects`` (`configuration.followRedirects = follow`).
    /// - Parameter follow: false to deliver redirects as they come.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.followRedirects = follow")
    public func followRedirects(_ follow: Bool) -> Configuration { with { $0.followRedirects = follow } }

    /// Deprecated: set ``maxRedirects`` (`configuration.maxRedirects = count`).
    /// - Parameter count: The maximum (>= 0).
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.maxRedirects = count")
    public func maxRedirects(_ count: Int) -> Configuration { with { $0.maxRedirects = count } }

    /// Deprecated: set ``allowRedirectDowngrade`` (`configuration.allowRedirectDowngrade = allow`).
    /// - Parameter allow: true to allow downgrades.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.allowRedirectDowngrade = allow")
    public func allowRedirectDowngrade(_ allow: Bool) -> Configuration { with { $0.allowRedirectDowngrade = allow } }

    /// Deprecated: set ``redirectHook`` (`configuration.redirectHook = { ... }`).
    /// - Parameter hook: The hook.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.redirectHook = hook")
    public func redirectHook(_ hook: @escaping RedirectHook) -> Configuration { with { $0.redirectHook = hook } }

    /// Deprecated: set ``connectTimeout`` (`configuration.connectTimeout = seconds`).
    /// - Parameter seconds: Seconds (>= 0).
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.connectTimeout = seconds")
    public func connectTimeout(_ seconds: Double) -> Configuration { with { $0.connectTimeout = seconds } }

    /// Deprecated: set ``idleTimeout`` (`configuration.idleTimeout = seconds`).
    /// - Parameter seconds: Seconds (>= 0).
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.idleTimeout = seconds")
    public func idleTimeout(_ seconds: Double) -> Configuration { with { $0.idleTimeout = seconds } }

    /// Seconds to whole milliseconds for the connect and idle timeouts, rounded up so a small
    /// positive time never becomes "none"; negative or not-a-number values stay negative (refused).
    static func timeoutMilliseconds(_ seconds: Double) -> Int64 {
        guard seconds >= 0 else { return -1 }
        guard seconds.isFinite else { return Int64.max / 2 }
        return Int64(min((seconds * 1000).rounded(.up), Double(Int64.max / 2)))
    }
}

// MARK: - Request settings

extension Request {
    /// Whether this request follows redirects, replacing the engine's setting.
    /// - Parameter follow: false to receive the 3xx as the response.
    /// - Returns: The changed request.
    public func followRedirects(_ follow: Bool) -> Request { adding(_RedirectRequestOption.follow(follow)) }

    /// The most redirects this request follows, replacing the engine's maximum.
    /// - Parameter count: The maximum (>= 0).
    /// - Returns: The changed request.
    public func maxRedirects(_ count: Int) -> Request { adding(_RedirectRequestOption.max(count)) }

    /// Whether this request follows a redirect from HTTPS to HTTP.
    /// - Parameter allow: true to allow downgrades.
    /// - Returns: The changed request.
    public func allowRedirectDowngrade(_ allow: Bool) -> Request { adding(_RedirectRequestOption.downgrade(allow)) }

    /// The redirect hook of this request, replacing the engine's (see ``RedirectHook``).
    /// - Parameter hook: The hook.
    /// - Returns: The changed request.
    public func redirectHook(_ hook: @escaping RedirectHook) -> Request {
        adding(_RedirectRequestOption.hook(RedirectHookBox(hook)))
    }

    /// The connect timeout of this request, in seconds (0: none), replacing the engine's.
    /// - Parameter seconds: Seconds (>= 0).
    /// - Returns: The changed request.
    public func connectTimeout(_ seconds: Double) -> Request {
        adding(_RedirectRequestOption.timeout(COURIER_TIMEOUT_CONNECT, Swift.max(seconds, 0)))
    }

    /// The idle timeout of this request, in seconds (0: none), replacing the engine's.
    /// - Parameter seconds: Seconds (>= 0).
    /// - Returns: The changed request.
    public func idleTimeout(_ seconds: Double) -> Request {
        adding(_RedirectRequestOption.timeout(COURIER_TIMEOUT_IDLE, Swift.max(seconds, 0)))
    }
}

enum _RedirectRequestOption: RequestOption {
    case follow(Bool)
    case max(Int)
    case downgrade(Bool)
    case hook(RedirectHookBox)
    case timeout(courier_timeout_kind, Double)

    func apply(to request: OpaquePointer) throws {
        switch self {
        case .follow(let f):
            try CourierError.check(courier_request_set_follow_redirects(request, f ? 1 : 0), "followRedirects")
        case .max(let n):
            try CourierError.check(courier_request_set_max_redirects(request, Int32(clamping: n)), "maxRedirects \(n)")
        case .downgrade(let a):
            try CourierError.check(courier_request_set_allow_redirect_downgrade(request, a ? 1 : 0),
                                   "allowRedirectDowngrade")
        case .hook(let box):
            let user = Unmanaged.passRetained(box).toOpaque()
            try CourierError.check(courier_request_set_redirect_hook(request, redirectTrampoline, user, releaseBox),
                                   "redirectHook")
        case .timeout(let kind, let s):
            try CourierError.check(courier_request_set_timeout(request, kind, Configuration.timeoutMilliseconds(s)),
                                   "timeout \(s)")
        }
    }
}

// MARK: - The hook's C side

/// A redirect hook registered with `courier_*_set_redirect_hook`. Immutable.
final class RedirectHookBox: @unchecked Sendable {
    let hook: RedirectHook
    init(_ hook: @escaping RedirectHook) { self.hook = hook }
}

/// `courier_redirect_fn`: runs on the worker thread with a borrowed 3xx and the next hop.
private let redirectTrampoline: courier_redirect_fn = { response, next, user in
    guard let response, let next, let user else { return -1 }
    let box = Unmanaged<RedirectHookBox>.fromOpaque(user).takeUnretainedValue()
    let handle = OutgoingHandle(next)
    defer { handle.pointer = nil }
    var outgoing = OutgoingRequest(handle: handle)
    switch (try? box.hook(Response(borrowing: response), &outgoing)) ?? .refuse {
    case .follow: return COURIER_REDIRECT_FOLLOW
    case .stop: return COURIER_REDIRECT_STOP
    case .refuse: return -1
    }
}

// MARK: - Responses and errors

extension Response {
    /// The redirects the request went through, in order (empty when it was not redirected, and
    /// for responses made in Swift). The final URL is ``url``.
    public var redirects: [Redirect] {
        guard let storage else { return [] }
        let count = courier_response_redirect_count(storage.pointer)
        var hops: [Redirect] = []
        hops.reserveCapacity(count)
        var url: UnsafePointer<CChar>?
        var status: Int32 = 0
        for i in 0..<count where courier_response_redirect_at(&url, &status, storage.pointer, i) == COURIER_OK.rawValue {
            hops.append(Redirect(url: String(borrowedCString: url), status: Int(status)))
        }
        return hops
    }
}
