// NameResolution.swift — names, addresses, sockets and HTTP versions: resolve and connect-to
// overrides, DNS over HTTPS, the DNS cache's lifetime, the IP version, the happy-eyeballs delay,
// Unix-domain sockets and the HTTP version, per engine and per request. The C core applies them
// (CCore/http/netopts.c); this file converts.

internal import CCore

// MARK: - Values

/// A resolve override: `host`:`port` answered with `addresses` instead of the DNS (curl's
/// `--resolve`). The URL's host stays the request's (Host field, TLS name, cookies, cache key).
public struct ResolveEntry: Sendable, Hashable {
    /// The host name (an IPv6 address in brackets).
    public var host: String
    /// The port (1...65535).
    public var port: Int
    /// IPv4 or IPv6 addresses (IPv6 without brackets); a request's override uses the first.
    public var addresses: [String]

    /// - Parameters:
    ///   - host: The host name.
    ///   - port: The port.
    ///   - addresses: The addresses it resolves to.
    public init(host: String, port: Int, addresses: [String]) {
        self.host = host
        self.port = port
        self.addresses = addresses
    }
}

/// A connect-to override: connections for `host`:`port` go to `toHost`:`toPort` (curl's
/// `--connect-to`). The URL's host stays the request's.
public struct ConnectToEntry: Sendable, Hashable {
    /// The host name the URL names.
    public var host: String
    /// Its port.
    public var port: Int
    /// Where the connection goes: a name or an address.
    public var toHost: String
    /// The port there.
    public var toPort: Int

    /// - Parameters:
    ///   - host: The host name the URL names.
    ///   - port: Its port.
    ///   - toHost: Where the connection goes.
    ///   - toPort: The port there.
    public init(host: String, port: Int, toHost: String, toPort: Int) {
        self.host = host
        self.port = port
        self.toHost = toHost
        self.toPort = toPort
    }
}

/// Which addresses names are resolved to and connected over (`courier_ip_version`).
public enum IPVersion: Sendable, Hashable {
    /// IPv4 and IPv6 (the default).
    case any
    /// IPv4 only.
    case v4
    /// IPv6 only.
    case v6

    var cValue: courier_ip_version {
        switch self {
        case .any: return COURIER_IP_ANY
        case .v4: return COURIER_IP_V4
        case .v6: return COURIER_IP_V6
        }
    }
}

/// Which HTTP versions requests may use (`courier_http_version`). ``Metrics/httpVersion`` says which
/// one a response used.
public enum HTTPVersion: Sendable, Hashable {
    /// HTTP/2 over https when the server offers it by ALPN, else HTTP/1.1; HTTP/1.1 for http://.
    case automatic
    /// HTTP/1.1 only: HTTP/2 is never offered.
    case http1_1
    /// HTTP/2 preferred (ALPN over https, an `Upgrade: h2c` over http://), HTTP/1.1 otherwise.
    case http2
    /// HTTP/2 required: ALPN over https, prior knowledge (h2c) over http://; a server that cannot
    /// fails the request with ``CourierError/Code/httpVersion``.
    case http2Only
    /// HTTP/3 preferred, where libcurl has it (``HTTPVersion/http3Available``).
    case http3
    /// HTTP/3 only, where libcurl has it.
    case http3Only

    /// Whether the libcurl underneath speaks HTTP/3 (asking for it elsewhere throws
    /// ``CourierError/Code/httpVersion``).
    public static var http3Available: Bool { courier_http3_available() != 0 }

    var cValue: courier_http_version {
        switch self {
        case .automatic: return COURIER_HTTP_DEFAULT
        case .http1_1: return COURIER_HTTP_V1_1
        case .http2: return COURIER_HTTP_V2
        case .http2Only: return COURIER_HTTP_V2_ONLY
        case .http3: return COURIER_HTTP_V3
        case .http3Only: return COURIER_HTTP_V3_ONLY
        }
    }
}

// MARK: - Configuration settings

extension Configuration {
    /// Resolve overrides for every request (later entries for the same host and port win).
    /// Default none.
    public var resolve: [ResolveEntry] {
        get { setting("resolve") ?? [] }
        set {
            setSetting("resolve", newValue) { config, entries in
                for e in entries {
                    try CourierError.check(courier_config_add_resolve(config, e.host, Int32(clamping: e.port),
                                                                      e.addresses.joined(separator: ",")),
                                           "resolve \(e.host):\(e.port)")
                }
            }
        }
    }

    /// Connect-to overrides for every request (the first that matches is used). Default none.
    public var connectTo: [ConnectToEntry] {
        get { setting("connectTo") ?? [] }
        set {
            setSetting("connectTo", newValue) { config, entries in
                for e in entries {
                    try CourierError.check(courier_config_add_connect_to(config, e.host, Int32(clamping: e.port),
                                                                         e.toHost, Int32(clamping: e.toPort)),
                                           "connectTo \(e.host):\(e.port)")
                }
            }
        }
    }

    /// Names resolved over DNS-over-HTTPS at this https:// URL. Default nil: the system's resolver.
    public var dohURL: String? {
        get { setting("dohURL") }
        set {
            setSetting("dohURL", newValue) { config, url in
                try CourierError.check(courier_config_set_doh_url(config, url), "dohURL \(url)")
            }
        }
    }

    /// How long a resolved name is kept, in seconds (rounded up to whole seconds; 0: not kept; -1:
    /// for the engine's life). Default 60.
    public var dnsCacheLifetime: Double {
        get { setting("dnsCacheLifetime") ?? 60 }
        set {
            setSetting("dnsCacheLifetime", newValue) { config, s in
                let ms: Int64 = s < 0 ? (s == -1 ? -1 : -2) : Configuration.timeoutMilliseconds(s)
                try CourierError.check(courier_config_set_dns_cache_lifetime_ms(config, ms), "dnsCacheLifetime \(s)")
            }
        }
    }

    /// Which addresses are used. Default ``IPVersion/any``.
    public var ipVersion: IPVersion {
        get { setting("ipVersion") ?? .any }
        set {
            setSetting("ipVersion", newValue) { config, v in
                try CourierError.check(courier_config_set_ip_version(config, v.cValue), "ipVersion")
            }
        }
    }

    /// Happy eyeballs (RFC 8305): the head start of the first address family, in seconds (>= 0;
    /// 0: libcurl's default, 0.2).
    public var happyEyeballsDelay: Double {
        get { setting("happyEyeballsDelay") ?? 0 }
        set {
            setSetting("happyEyeballsDelay", newValue) { config, s in
                try CourierError.check(courier_config_set_happy_eyeballs_delay_ms(config,
                                                                                  Configuration.timeoutMilliseconds(s)),
                                       "happyEyeballsDelay \(s)")
            }
        }
    }

    /// The HTTP version of every request. Default ``HTTPVersion/automatic``.
    public var httpVersion: HTTPVersion {
        get { setting("httpVersion") ?? .automatic }
        set {
            setSetting("httpVersion", newValue) { config, v in
                try CourierError.check(courier_config_set_http_version(config, v.cValue), "httpVersion")
            }
        }
    }

    /// Whether response bodies arrive decoded (gzip, deflate, br, zstd as libcurl has them; the
    /// Content-Encoding and Content-Length fields removed). false: as the server coded them, the
    /// fields kept, past the cache. Default true.
    public var decodeContent: Bool {
        get { setting("decodeContent") ?? true }
        set {
            setSetting("decodeContent", newValue) { config, on in
                try CourierError.check(courier_config_set_decode_content(config, on ? 1 : 0), "decodeContent")
            }
        }
    }

    /// The connections the pool keeps open between requests (>= 1); putting one more back closes
    /// the one idle longest. Default nil: ``maxConnections``.
    public var maxIdleConnections: Int? {
        get { setting("maxIdleConnections") }
        set {
            setSetting("maxIdleConnections", newValue) { config, n in
                try CourierError.check(courier_config_set_max_idle_connections(config, Int32(clamping: n)),
                                       "maxIdleConnections \(n)")
            }
        }
    }

    /// A connection idle longer than this, in seconds (rounded up to whole seconds), is closed rather
    /// than reused. Default 0: libcurl's, 118 s.
    public var idleConnectionTimeout: Double {
        get { setting("idleConnectionTimeout") ?? 0 }
        set {
            setSetting("idleConnectionTimeout", newValue) { config, s in
                try CourierError.check(courier_config_set_idle_connection_timeout_ms(config,
                                                                                     Configuration.timeoutMilliseconds(s)),
                                       "idleConnectionTimeout \(s)")
            }
        }
    }

    /// Every connection over the Unix-domain socket at this path ("@name": a Linux abstract
    /// socket); the URL still gives the Host field, TLS's name and the cache key. Default nil: TCP.
    public var unixSocket: String? {
        get { setting("unixSocket") }
        set {
            setSetting("unixSocket", newValue) { config, path in
                try CourierError.check(courier_config_set_unix_socket(config, path), "unixSocket \(path)")
            }
        }
    }
}

// MARK: - Request settings

extension Request {
    /// A resolve override for this request alone (its first address), before the engine's
    /// overrides; never seen by other requests.
    /// - Parameters:
    ///   - host: The host name.
    ///   - port: The port.
    ///   - addresses: The addresses (the first is used).
    /// - Returns: The changed request.
    public func resolve(host: String, port: Int, addresses: [String]) -> Request {
        adding(_NameRequestOption.resolve(ResolveEntry(host: host, port: port, addresses: addresses)))
    }

    /// A connect-to override for this request alone; the request's entries replace the engine's.
    /// - Parameters:
    ///   - host: The host name the URL names.
    ///   - port: Its port.
    ///   - toHost: Where the connection goes.
    ///   - toPort: The port there.
    /// - Returns: The changed request.
    public func connectTo(host: String, port: Int, toHost: String, toPort: Int) -> Request {
        adding(_NameRequestOption.connectTo(ConnectToEntry(host: host, port: port, toHost: toHost, toPort: toPort)))
    }

    /// This request over the Unix-domain socket at `path` ("@name": abstract), or over TCP with nil
    /// (even when the engine has a socket).
    /// - Parameter path: The socket's path, or nil.
    /// - Returns: The changed request.
    public func unixSocket(_ path: String?) -> Request { adding(_NameRequestOption.unixSocket(path ?? "")) }

    /// The HTTP version of this request (and its redirects), replacing the engine's.
    /// - Parameter version: The version.
    /// - Returns: The changed request.
    public func httpVersion(_ version: HTTPVersion) -> Request { adding(_NameRequestOption.httpVersion(version)) }

    /// Whether this request's body arrives decoded, replacing the engine's setting (false: as the
    /// server coded it, Content-Encoding kept; such a request neither reads nor writes the cache).
    /// - Parameter decode: false for the coded bytes.
    /// - Returns: The changed request.
    public func decodeContent(_ decode: Bool) -> Request { adding(_NameRequestOption.decodeContent(decode)) }
}

enum _NameRequestOption: RequestOption {
    case resolve(ResolveEntry)
    case connectTo(ConnectToEntry)
    case unixSocket(String)
    case httpVersion(HTTPVersion)
    case decodeContent(Bool)

    func apply(to request: OpaquePointer) throws {
        switch self {
        case .resolve(let e):
            try CourierError.check(courier_request_add_resolve(request, e.host, Int32(clamping: e.port),
                                                               e.addresses.joined(separator: ",")),
                                   "resolve \(e.host):\(e.port)")
        case .connectTo(let e):
            try CourierError.check(courier_request_add_connect_to(request, e.host, Int32(clamping: e.port), e.toHost,
                                                                  Int32(clamping: e.toPort)),
                                   "connectTo \(e.host):\(e.port)")
        case .unixSocket(let path):
            try CourierError.check(courier_request_set_unix_socket(request, path), "unixSocket \(path)")
        case .httpVersion(let v):
            try CourierError.check(courier_request_set_http_version(request, v.cValue), "httpVersion")
        case .decodeContent(let on):
            try CourierError.check(courier_request_set_decode_content(request, on ? 1 : 0), "decodeContent")
        }
    }
}
