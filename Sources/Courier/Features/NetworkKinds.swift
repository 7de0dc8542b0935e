// NetworkKinds.swift — the network path's kind (wired, Wi-Fi, cellular, other) and whether it is
// expensive, limits per kind and "not on cellular" (HLNetworking's WWAN/WiFi status, YTKNetwork's
// allowsCellularAccess). The monitor, the OS watch and the limits are the C core's (monitor.c,
// netwatch.c); this file converts values.

internal import CCore

/// The kind of the network path (`courier_network_kind`).
public enum NetworkKind: Sendable, Hashable, CaseIterable {
    /// No source said, or no path.
    case unknown
    /// Ethernet.
    case wired
    /// Wi-Fi.
    case wifi
    /// A cellular modem; expensive.
    case cellular
    /// Loopback, tunnels, anything else.
    case other

    var cValue: courier_network_kind {
        switch self {
        case .unknown: return COURIER_NETWORK_UNKNOWN
        case .wired: return COURIER_NETWORK_WIRED
        case .wifi: return COURIER_NETWORK_WIFI
        case .cellular: return COURIER_NETWORK_CELLULAR
        case .other: return COURIER_NETWORK_OTHER
        }
    }

    init(cValue: courier_network_kind) {
        self = NetworkKind.allCases.first { $0.cValue == cValue } ?? .unknown
    }

    /// The kind of a network interface by name ("lo", "eth0"), read from the kernel through netlink
    /// as the OS watch reads it. Linux only.
    /// - Parameter interface: The interface's name.
    /// - Returns: Its kind and whether it is expensive.
    /// - Throws: ``CourierError/Code/notFound`` (no such interface), ``CourierError/Code/invalidArgument``.
    public static func ofInterface(_ interface: String) throws -> (kind: NetworkKind, expensive: Bool) {
        var kind = COURIER_NETWORK_UNKNOWN
        var expensive: Int32 = 0
        var error = courier_error()
        let rc = courier_network_link_kind(&kind, &expensive, interface, &error)
        guard rc == COURIER_OK.rawValue else { throw CourierError(code: rc, detail: &error) }
        return (NetworkKind(cValue: kind), expensive != 0)
    }
}

/// Limits that hold while the path is of one kind; nil keeps the engine's own value.
public struct NetworkLimits: Sendable, Hashable {
    /// Requests in flight to one host.
    public var maxConnectionsPerHost: Int?
    /// Requests in flight in all.
    public var maxConnections: Int?
    /// Frozen requests replayed at once.
    public var replayConcurrency: Int?

    /// - Parameters:
    ///   - maxConnectionsPerHost: Requests in flight to one host.
    ///   - maxConnections: Requests in flight in all.
    ///   - replayConcurrency: Frozen requests replayed at once.
    public init(maxConnectionsPerHost: Int? = nil, maxConnections: Int? = nil, replayConcurrency: Int? = nil) {
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.maxConnections = maxConnections
        self.replayConcurrency = replayConcurrency
    }
}

extension Configuration {
    /// true: the engine watches the operating system's network path (netlink on Linux, the path
    /// monitor on Darwin): online or offline, the kind and whether it is expensive. Default false.
    public var networkWatch: Bool {
        get { setting("networkWatch") ?? false }
        set {
            setSetting("networkWatch", newValue) { config, on in
                try CourierError.check(courier_config_set_network_watch(config, on ? 1 : 0), "networkWatch")
            }
        }
    }

    /// Limits per network kind, applied at once when the kind changes (queued requests, replays).
    public var networkLimits: [NetworkKind: NetworkLimits] {
        get { setting("networkLimits") ?? [:] }
        set {
            setSetting("networkLimits", newValue) { config, table in
                for (kind, l) in table {
                    try CourierError.check(courier_config_set_network_limits(
                        config, kind.cValue, Int32(clamping: l.maxConnectionsPerHost ?? 0),
                        Int32(clamping: l.maxConnections ?? 0), Int32(clamping: l.replayConcurrency ?? 0)),
                                           "networkLimits[\(kind)]")
                }
            }
        }
    }
}

struct _AllowCellularOption: RequestOption {
    let allow: Bool
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_allow_cellular(request, allow ? 1 : 0), "allowCellular")
    }
}

extension Request {
    /// false: this request must not go over a cellular path: while the kind is cellular it fails
    /// with ``CourierError/Code/cellular`` (at send, or queued as soon as the kind turns).
    /// - Parameter allow: Whether cellular is allowed (the default).
    /// - Returns: The changed request.
    public func allowCellular(_ allow: Bool) -> Request { adding(_AllowCellularOption(allow: allow)) }
}

extension CourierError.Code {
    /// The request is not allowed on a cellular network and the path is one.
    public static let cellular = CourierError.Code(COURIER_E_CELLULAR)
}

extension CourierError {
    /// See ``Code/cellular``.
    public static let cellular = Code.cellular
}

extension Reachability {
    /// The path's kind and whether it is expensive.
    public var path: (kind: NetworkKind, expensive: Bool) {
        guard engine.enter() else { return (.unknown, false) }
        defer { engine.leave() }
        var kind = COURIER_NETWORK_UNKNOWN
        var expensive: Int32 = 0
        _ = courier_reachability_path(&kind, &expensive, engine.handle)
        return (NetworkKind(cValue: kind), expensive != 0)
    }

    /// A source's report, as the OS watch makes them (tests, and apps with a source of their own):
    /// the status (``ReachabilityStatus/unknown`` leaves online/offline as it is), the kind and
    /// whether the path is expensive. A change of kind applies its limits at once.
    /// - Parameters:
    ///   - status: Online, offline, or unknown.
    ///   - kind: The path's kind.
    ///   - expensive: Whether the path is expensive.
    public func report(_ status: ReachabilityStatus, kind: NetworkKind, expensive: Bool = false) {
        guard engine.enter() else { return }
        defer { engine.leave() }
        let c: courier_reachability = status == .online ? COURIER_REACHABILITY_ONLINE
            : status == .offline ? COURIER_REACHABILITY_OFFLINE : COURIER_REACHABILITY_UNKNOWN
        _ = courier_reachability_report(engine.handle, c, kind.cValue, expensive ? 1 : 0)
    }
}
