// MonitorReachability.swift — the engine's network monitor in Swift (HLNetworking's
// `reachabilityStatus` and `listening:`): the status, the app's own word (`setOnline`,
// `setOffline`, `setAutomatic`), listeners and an `AsyncStream` of changes, and the monitor's
// settings on a Configuration. Detection (transport errors, probes) is done in C.

import Foundation
internal import CCore

/// The engine's view of the network.
public enum ReachabilityStatus: Sendable, Hashable {
    /// No evidence yet; requests are sent as if online.
    case unknown
    /// Offline: requests fail at once with ``CourierError/Code/offline`` or are frozen per policy.
    case offline
    /// Online.
    case online

    init(cValue: Int32) {
        switch cValue {
        case Int32(COURIER_REACHABILITY_OFFLINE.rawValue): self = .offline
        case Int32(COURIER_REACHABILITY_ONLINE.rawValue): self = .online
        default: self = .unknown
        }
    }
}

/// Where an engine's view of the network comes from (`courier_config_set_reachability`). Any
/// response means online.
public struct ReachabilitySettings: Sendable, Hashable {
    /// The C core's default seconds between probes (5; `COURIER_SETTING_MONITOR_INTERVAL_MS`).
    public static var defaultInterval: TimeInterval { CoreDefaults.seconds(COURIER_SETTING_MONITOR_INTERVAL_MS) }

    /// A request that cannot resolve or connect means offline. Off by default: one server being
    /// down does not make the engine offline.
    public var fromErrors: Bool
    /// While offline, what to try: an http(s) URL (a HEAD through the engine) or "host:port" (a
    /// TCP connect); nil probes the host that failed.
    public var probe: String?
    /// Seconds between probes. Default 5.
    public var interval: TimeInterval

    /// Reachability settings.
    /// - Parameters:
    ///   - fromErrors: A request that cannot resolve or connect means offline.
    ///   - probe: What to try while offline, or nil for the host that failed.
    ///   - interval: Seconds between probes (default 5).
    public init(fromErrors: Bool = true, probe: String? = nil,
                interval: TimeInterval = ReachabilitySettings.defaultInterval) {
        self.fromErrors = fromErrors
        self.probe = probe
        self.interval = interval
    }
}

extension Configuration {
    /// Where the engine's view of the network comes from; nil (the default) means only responses
    /// and the app's own word (``Reachability/setOffline()``), no detection from errors.
    public var reachability: ReachabilitySettings? {
        get { setting("reachability") }
        set {
            setSetting("reachability", newValue) { config, r in
                try withOptionalCString(r.probe) {
                    try CourierError.check(courier_config_set_reachability(config, r.fromErrors ? 1 : 0, $0,
                                                                           Int64((r.interval * 1000).rounded())),
                                           "reachability")
                }
            }
        }
    }

    /// Deprecated: set ``reachability`` (`configuration.reachability = ReachabilitySettings(...)`).
    /// - Parameters:
    ///   - fromErrors: A request that cannot resolve or connect means offline.
    ///   - probe: What to try while offline, or nil for the host that failed.
    ///   - interval: Seconds between probes (default 5).
    /// - Returns: The new configuration.
    @available(*, deprecated, message: "set the property: configuration.reachability = ReachabilitySettings(...)")
    public func reachability(fromErrors: Bool = true, probe: String? = nil,
                             interval: TimeInterval = ReachabilitySettings.defaultInterval) -> Configuration {
        with { $0.reachability = ReachabilitySettings(fromErrors: fromErrors, probe: probe, interval: interval) }
    }
}

extension Engine {
    /// The engine's network monitor.
    public var reachability: Reachability { Reachability(engine: self) }
}

/// The closure behind one C reachability listener; released by the C core's user_free.
final class ReachabilityListenerBox: @unchecked Sendable { // immutable
    let handler: @Sendable (ReachabilityStatus) -> Void
    let onEnd: (@Sendable () -> Void)?
    init(handler: @escaping @Sendable (ReachabilityStatus) -> Void, onEnd: (@Sendable () -> Void)?) {
        self.handler = handler
        self.onEnd = onEnd
    }
    deinit { onEnd?() }
}

private let reachabilityTrampoline: courier_reachability_fn = { status, user in
    guard let user else { return }
    Unmanaged<ReachabilityListenerBox>.fromOpaque(user).takeUnretainedValue().handler(ReachabilityStatus(cValue: Int32(status.rawValue)))
}

/// The engine's network monitor. Thread-safe.
public struct Reachability: Sendable {
    let engine: Engine

    /// The current status.
    public var status: ReachabilityStatus {
        guard engine.enter() else { return .unknown }
        defer { engine.leave() }
        return ReachabilityStatus(cValue: courier_reachability_status(engine.handle))
    }

    /// Whether requests are sent (online or unknown).
    public var isReachable: Bool { status != .offline }

    /// The app says the network is there (a phone knows better). Holds until the app says
    /// otherwise or calls ``setAutomatic()``; starts a replay of the frozen requests (while replay
    /// is paused, at ``FrozenRequests/resume()``).
    public func setOnline() { set(courier_reachability_set_online) }

    /// The app says the network is gone; holds until the app says otherwise.
    public func setOffline() { set(courier_reachability_set_offline) }

    /// Gives the status back to detection (transport errors and probes).
    public func setAutomatic() { set(courier_reachability_set_automatic) }

    private func set(_ fn: (OpaquePointer?) -> Int32) {
        guard engine.enter() else { return }
        defer { engine.leave() }
        _ = fn(engine.handle)
    }

    /// Calls `handler` with each new status (HLNetworking's `listening:`), on the engine's journal
    /// thread, in order.
    /// - Parameter handler: Receives the status; keep it quick.
    /// - Returns: The token; cancel it to stop.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func listen(_ handler: @escaping @Sendable (ReachabilityStatus) -> Void) throws -> ObservationToken {
        try register(ReachabilityListenerBox(handler: handler, onEnd: nil))
    }

    /// The changes of status as an asynchronous sequence, ending when the engine closes.
    public var updates: AsyncStream<ReachabilityStatus> {
        AsyncStream { continuation in
            let box = ReachabilityListenerBox(handler: { continuation.yield($0) }, onEnd: { continuation.finish() })
            do {
                let token = try register(box)
                continuation.onTermination = { _ in token.cancel() }
            } catch {
                continuation.finish()
            }
        }
    }

    private func register(_ box: ReachabilityListenerBox) throws -> ObservationToken {
        guard engine.enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { engine.leave() }
        var token: UInt64 = 0
        let rc = courier_reachability_add_listener(&token, engine.handle,
                                                   reachabilityTrampoline, Unmanaged.passRetained(box).toOpaque(), releaseBox)
        try CourierError.check(rc, "reachability listener")
        return ObservationToken(engine: engine, token: token) { courier_reachability_remove_listener($0, $1) }
    }
}
