// Frozen.swift — frozen requests in Swift: the freeze policy of a Request
// (`.freeze(.auto, expiry: 3600)`), the journal's settings on a Configuration, the codes
// (`frozen`, `offline`, `journalCorrupt`), the manager (`engine.frozen`: list, get, remove,
// removeAll, count, replay, resend, pause/resume, lastOutcome, waitUntilIdle) and the events, as an
// `AsyncStream`, as observers, and as NotificationCenter notifications (the seeds' style).
// Freezing, the journal, replay, ordering, expiry and events are all decided in C; this file only
// translates.

import Foundation
internal import CCore

// MARK: - Policies

/// Whether and how a request is kept when the network is not there (the seeds' `freezePolicyId`;
/// C's `COURIER_FREEZE_NEVER` / `AUTO` / `MANUAL`, Python's `"never"` / `"auto"` / `"manual"`).
public enum FreezePolicy: Sendable, Hashable {
    /// A failure is the caller's (the default).
    case never
    /// Frozen when the engine is offline or the request fails to reach the server (cannot resolve,
    /// cannot connect); resent automatically when the network returns, at the next start, and on
    /// its backoff timer, until a final answer or its expiry.
    case auto
    /// Frozen the same way, then kept until the app resends it (``FrozenRequests/resend(_:)``,
    /// ``FrozenRequests/replay(manual:)``) or removes it.
    case manual

    /// Deprecated name of ``auto``.
    @available(*, deprecated, renamed: "auto")
    public static var whenOffline: FreezePolicy { .auto }
    /// Deprecated name of ``manual``.
    @available(*, deprecated, renamed: "manual")
    public static var waitForApp: FreezePolicy { .manual }

    var cValue: courier_freeze_policy {
        switch self {
        case .never: return COURIER_FREEZE_NEVER
        case .auto: return COURIER_FREEZE_AUTO
        case .manual: return COURIER_FREEZE_MANUAL
        }
    }

    init(cValue: courier_freeze_policy) {
        switch cValue {
        case COURIER_FREEZE_AUTO: self = .auto
        case COURIER_FREEZE_MANUAL: self = .manual
        default: self = .never
        }
    }
}

// MARK: - Request settings

extension Request {
    /// How this request is kept when the network is not there.
    ///
    /// The caller is told ``CourierError/Code/frozen`` (with ``CourierError/freezeID``) once the
    /// request is on disk; the journal sends it again later with an `Idempotency-Key` header that
    /// stays the same across every resend.
    /// - Parameters:
    ///   - policy: The policy.
    ///   - expiry: Seconds after freezing when it is dropped unsent (nil: the engine's, 24 h).
    ///   - unordered: false (the default) keeps its place among the frozen requests to its host (a
    ///     later one is not sent before it has a final answer); true does not
    ///     (`COURIER_FREEZE_UNORDERED`).
    ///   - onAmbiguous: Also freeze after a timeout, reset or partial response, when the request
    ///     may have reached the server (`COURIER_FREEZE_ON_AMBIGUOUS`).
    /// - Returns: The changed request.
    public func freeze(_ policy: FreezePolicy, expiry: TimeInterval? = nil, unordered: Bool = false,
                       onAmbiguous: Bool = false) -> Request {
        var flags: UInt32 = 0
        if unordered { flags |= UInt32(COURIER_FREEZE_UNORDERED) }
        if onAmbiguous { flags |= UInt32(COURIER_FREEZE_ON_AMBIGUOUS) }
        let ms = expiry.map { Int64(($0 * 1000).rounded()) } ?? 0
        return adding(_FreezeRequestOption.policy(policy, ms, flags))
    }

    /// Deprecated spelling of ``freeze(_:expiry:unordered:onAmbiguous:)`` (`ordered: false` is
    /// `unordered: true`).
    /// - Parameters:
    ///   - policy: The policy.
    ///   - expiry: Seconds after freezing when it is dropped unsent.
    ///   - ordered: Whether it keeps its place among the frozen requests to its host.
    ///   - onAmbiguousFailure: Also freeze after a timeout, reset or partial response.
    /// - Returns: The changed request.
    @available(*, deprecated, renamed: "freeze(_:expiry:unordered:onAmbiguous:)")
    public func freeze(_ policy: FreezePolicy, expiry: TimeInterval? = nil, ordered: Bool,
                       onAmbiguousFailure: Bool = false) -> Request {
        freeze(policy, expiry: expiry, unordered: !ordered, onAmbiguous: onAmbiguousFailure)
    }

    /// Deprecated spelling of ``freeze(_:expiry:unordered:onAmbiguous:)``.
    /// - Parameters:
    ///   - policy: The policy.
    ///   - expiry: Seconds after freezing when it is dropped unsent.
    ///   - onAmbiguousFailure: Also freeze after a timeout, reset or partial response.
    /// - Returns: The changed request.
    @available(*, deprecated, renamed: "freeze(_:expiry:unordered:onAmbiguous:)")
    public func freeze(_ policy: FreezePolicy, expiry: TimeInterval? = nil, onAmbiguousFailure: Bool) -> Request {
        freeze(policy, expiry: expiry, onAmbiguous: onAmbiguousFailure)
    }

    /// The freeze id to find the request again (1 to 128 of `A-Z a-z 0-9 - . _ ~ : @ + =`). Freezing
    /// a request whose id is already frozen replaces the older one. Without it an id is generated.
    /// - Parameter id: The id.
    /// - Returns: The changed request.
    public func freezeID(_ id: String) -> Request { adding(_FreezeRequestOption.id(id)) }

    /// Sends even while the engine's reachability says offline ("try anyway";
    /// `courier_request_set_ignore_offline`).
    /// - Parameter ignore: true to ignore the offline state.
    /// - Returns: The changed request.
    public func ignoreOffline(_ ignore: Bool = true) -> Request { adding(_FreezeRequestOption.ignoreOffline(ignore)) }

    /// Deprecated name of ``ignoreOffline(_:)``.
    /// - Parameter ignore: true to ignore the offline state.
    /// - Returns: The changed request.
    @available(*, deprecated, renamed: "ignoreOffline(_:)")
    public func ignoringOffline(_ ignore: Bool = true) -> Request { ignoreOffline(ignore) }
}

enum _FreezeRequestOption: RequestOption {
    case policy(FreezePolicy, Int64, UInt32)
    case id(String)
    case ignoreOffline(Bool)

    func apply(to request: OpaquePointer) throws {
        switch self {
        case .policy(let p, let ms, let flags):
            try CourierError.check(courier_request_set_freeze(request, p.cValue, ms, flags), "freeze")
        case .id(let id):
            try CourierError.check(courier_request_set_freeze_id(request, id), "freezeID '\(id)'")
        case .ignoreOffline(let b):
            try CourierError.check(courier_request_set_ignore_offline(request, b ? 1 : 0), "ignoringOffline")
        }
    }
}

// MARK: - Configuration

/// How frozen requests are replayed (`courier_config_set_frozen_replay`).
public struct FrozenReplay: Sendable, Hashable {
    /// Replays in flight at most (> 0). Default 4.
    public var concurrency: Int
    /// Seconds before the second attempt; doubles per attempt, with jitter. Default 1.
    public var backoffBase: TimeInterval
    /// The longest wait between attempts, in seconds. Default 300.
    public var backoffMax: TimeInterval

    /// The C core's default replays in flight (4; `COURIER_SETTING_FROZEN_REPLAY_CONCURRENCY`).
    public static var defaultConcurrency: Int { Int(CoreDefaults.value(COURIER_SETTING_FROZEN_REPLAY_CONCURRENCY)) }
    /// The C core's default first backoff, in seconds (1; `COURIER_SETTING_FROZEN_BACKOFF_BASE_MS`).
    public static var defaultBackoffBase: TimeInterval { CoreDefaults.seconds(COURIER_SETTING_FROZEN_BACKOFF_BASE_MS) }
    /// The C core's default longest backoff, in seconds (300; `COURIER_SETTING_FROZEN_BACKOFF_MAX_MS`).
    public static var defaultBackoffMax: TimeInterval { CoreDefaults.seconds(COURIER_SETTING_FROZEN_BACKOFF_MAX_MS) }

    /// Replay settings.
    /// - Parameters:
    ///   - concurrency: Replays in flight at most (default ``defaultConcurrency``, the C core's).
    ///   - backoffBase: Seconds before the second attempt; doubles per attempt (default ``defaultBackoffBase``).
    ///   - backoffMax: The longest wait between attempts, in seconds (default ``defaultBackoffMax``).
    public init(concurrency: Int = FrozenReplay.defaultConcurrency, backoffBase: TimeInterval = FrozenReplay.defaultBackoffBase,
                backoffMax: TimeInterval = FrozenReplay.defaultBackoffMax) {
        self.concurrency = concurrency
        self.backoffBase = backoffBase
        self.backoffMax = backoffMax
    }
}

/// How many replicas must confirm a freeze on a Redis journal before it is acknowledged
/// (`WAIT count timeout` after the freeze's script). A freeze they do not confirm in time throws
/// ``CourierError/Code/replicasUnconfirmed`` instead of ``CourierError/Code/frozen``: it is in the
/// journal (and may still be replayed) but not acknowledged. An LMDB journal ignores it.
public struct FrozenReplicas: Sendable, Hashable {
    /// Replicas that must have the freeze (> 0).
    public var count: Int
    /// The longest wait for them, in seconds (> 0).
    public var timeout: TimeInterval

    /// Replica confirmation of freezes.
    /// - Parameters:
    ///   - count: Replicas that must have the freeze (1 closes the window of a master lost before
    ///     its replica copied the freeze).
    ///   - timeout: The longest wait for them, in seconds.
    public init(count: Int, timeout: TimeInterval) {
        self.count = count
        self.timeout = timeout
    }
}

/// Seconds to whole milliseconds, rounded.
private func frozenMilliseconds(_ seconds: TimeInterval) -> Int { Int((seconds * 1000).rounded()) }

extension Configuration {
    /// How frozen requests are replayed. Default ``FrozenReplay/init(concurrency:backoffBase:backoffMax:)``'s
    /// values: 4 in flight, 1 s doubling up to 300 s.
    public var frozenReplay: FrozenReplay {
        get { setting("frozenReplay") ?? FrozenReplay() }
        set {
            setSetting("frozenReplay", newValue) {
                try CourierError.check(courier_config_set_frozen_replay($0, Int32(clamping: $1.concurrency),
                                                                        Int64(frozenMilliseconds($1.backoffBase)),
                                                                        Int64(frozenMilliseconds($1.backoffMax))),
                                       "frozenReplay")
            }
        }
    }

    /// Replicas that must confirm each freeze on a Redis journal before it is acknowledged; nil
    /// (the default): none (acknowledged once the master has it). See ``FrozenReplicas``.
    public var frozenReplicas: FrozenReplicas? {
        get { setting("frozenReplicas") }
        set {
            setSetting("frozenReplicas", newValue) {
                try CourierError.check(courier_config_set_frozen_replicas($0, Int32(clamping: $1.count),
                                                                          Int64(frozenMilliseconds($1.timeout))),
                                       "frozenReplicas")
            }
        }
    }

    /// The expiry, in seconds after freezing, of frozen requests that name none; nil (the
    /// default) means 24 h.
    public var frozenExpiry: TimeInterval? {
        get { setting("frozenExpiry") }
        set {
            setSetting("frozenExpiry", newValue) {
                try CourierError.check(courier_config_set_frozen_expiry_ms($0, Int64(frozenMilliseconds($1))),
                                       "frozenExpiry")
            }
        }
    }

    /// How long, in seconds, a replayer's claim on a request holds while its process is alive but
    /// silent; nil (the default) means 300. A dead process's claims, and claims whose lease ended,
    /// are taken over at the engine's next look for work others left: when it opens, on a
    /// replay-now, and every ``frozenPoll``.
    public var frozenLease: TimeInterval? {
        get { setting("frozenLease") }
        set {
            setSetting("frozenLease", newValue) {
                try CourierError.check(courier_config_set_frozen_lease_ms($0, Int64(frozenMilliseconds($1))), "frozenLease")
            }
        }
    }

    /// How often, in seconds, the engine looks for requests frozen by other processes, claims of
    /// the dead and claims whose lease ended; nil (the default) means 10.
    public var frozenPoll: TimeInterval? {
        get { setting("frozenPoll") }
        set {
            setSetting("frozenPoll", newValue) {
                try CourierError.check(courier_config_set_frozen_poll_ms($0, Int64(frozenMilliseconds($1))),
                                       "frozenPoll")
            }
        }
    }

    /// Where the journal of frozen requests lives, apart from the cache: nil (the default) the
    /// engine's ``Configuration/storeDirectory``; another directory (LMDB there); or a Redis URL,
    /// `"redis://[:password@]host:port/db"`, with `"#name"` at the end to keep journals apart, when
    /// the library has Redis stores: the requests then live on a Redis stream with a consumer group,
    /// shared by every engine, process and machine naming it (docs/design/redis.md, "The journal on
    /// Redis"). Redis down does not fail the engine's open: until Redis answers, the frozen-request
    /// calls throw ``CourierError/Code/redis`` and a send that would be frozen throws its own error
    /// (not frozen); once it answers (a restart too) the same engine freezes and replays again.
    public var frozenStore: String? {
        get { setting("frozenStore") }
        set {
            setSetting("frozenStore", newValue) {
                try CourierError.check(courier_config_set_frozen_store($0, $1), "frozenStore")
            }
        }
    }

    /// true opens the engine with automatic replay paused (``FrozenRequests/resume()`` starts it),
    /// so event observers can be in place before the first resend. Default false.
    public var frozenPaused: Bool {
        get { setting("frozenPaused") ?? false }
        set {
            setSetting("frozenPaused", newValue) {
                try CourierError.check(courier_config_set_frozen_paused($0, $1 ? 1 : 0), "frozenPaused")
            }
        }
    }

    /// Deprecated: set ``frozenReplay`` (`configuration.frozenReplay = FrozenReplay(...)`); this
    /// returns a changed copy and does not change `self`.
    /// - Parameters:
    ///   - concurrency: Replays in flight at most.
    ///   - backoffBase: Seconds before the second attempt.
    ///   - backoffMax: The longest wait between attempts, in seconds.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.frozenReplay = FrozenReplay(...)")
    public func frozenReplay(concurrency: Int = FrozenReplay.defaultConcurrency,
                             backoffBase: TimeInterval = FrozenReplay.defaultBackoffBase,
                             backoffMax: TimeInterval = FrozenReplay.defaultBackoffMax)
        -> Configuration {
        with { $0.frozenReplay = FrozenReplay(concurrency: concurrency, backoffBase: backoffBase, backoffMax: backoffMax) }
    }

    /// Deprecated: set ``frozenExpiry`` (`configuration.frozenExpiry = seconds`).
    /// - Parameter seconds: Seconds after freezing.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.frozenExpiry = seconds")
    public func frozenExpiry(_ seconds: TimeInterval) -> Configuration { with { $0.frozenExpiry = seconds } }

    /// Deprecated: set ``frozenLease`` (`configuration.frozenLease = seconds`).
    /// - Parameter seconds: Seconds.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.frozenLease = seconds")
    public func frozenLease(_ seconds: TimeInterval) -> Configuration { with { $0.frozenLease = seconds } }

    /// Deprecated: set ``frozenPoll`` (`configuration.frozenPoll = seconds`).
    /// - Parameter seconds: Seconds.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.frozenPoll = seconds")
    public func frozenPollInterval(_ seconds: TimeInterval) -> Configuration { with { $0.frozenPoll = seconds } }

    /// Deprecated: set ``frozenPaused`` (`configuration.frozenPaused = true`).
    /// - Parameter paused: true to open paused.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.frozenPaused = true")
    public func frozenReplayPaused(_ paused: Bool = true) -> Configuration { with { $0.frozenPaused = paused } }
}

// MARK: - Codes

extension CourierError.Code {
    /// The request was written to the journal, to be sent later; ``CourierError/freezeID`` names it.
    public static let frozen = CourierError.Code(COURIER_E_FROZEN)
    /// The engine's reachability says offline; nothing was sent.
    public static let offline = CourierError.Code(COURIER_E_OFFLINE)
    /// The frozen-request journal is unreadable: it was kept aside (never emptied) and the next
    /// open starts a new one; the message says where it was kept.
    public static let journalCorrupt = CourierError.Code(COURIER_E_JOURNAL_CORRUPT)
}

extension CourierError {
    /// See ``Code/frozen``.
    public static let frozen = Code.frozen
    /// See ``Code/offline``.
    public static let offline = Code.offline
    /// See ``Code/journalCorrupt``.
    public static let journalCorrupt = Code.journalCorrupt

    /// The freeze id of a ``Code/frozen`` error, nil for any other.
    public var freezeID: String? {
        guard code == .frozen, let range = message.range(of: "frozen as ") else { return nil }
        let id = message[range.upperBound...]
        return id.isEmpty ? nil : String(id)
    }
}

// MARK: - Frozen requests

/// One frozen request as it was read (a snapshot).
public struct FrozenRequest: Sendable, Hashable {
    /// The freeze id.
    public let id: String
    /// The HTTP method.
    public let method: String
    /// The effective URL (query included).
    public let url: String
    /// "scheme://host:port", the unit of per-host order.
    public let host: String
    /// The headers that are sent, `Idempotency-Key` included, in order.
    public let headers: [HTTPHeader]
    /// The body, nil when the request has none.
    public let body: Data?
    /// The key sent as `Idempotency-Key` with every resend.
    public let idempotencyKey: String
    /// The policy it was frozen with.
    public let policy: FreezePolicy
    /// Whether it was frozen without keeping its place among the requests to its host
    /// (`COURIER_FREEZE_UNORDERED`).
    public let unordered: Bool
    /// Deprecated: `!unordered`.
    @available(*, deprecated, message: "use !unordered")
    public var ordered: Bool { !unordered }
    /// Its timeout, in seconds.
    public let timeout: TimeInterval
    /// Resends started so far.
    public let attempts: Int
    /// The last attempt's failure, nil before any attempt (``CourierError/Code/journalCorrupt`` for
    /// a record that does not decode).
    public let lastCode: CourierError.Code?
    /// The last attempt's HTTP status, nil if none.
    public let lastStatus: Int?
    /// Whether a replayer holds it now.
    public let claimed: Bool
    /// When it was frozen.
    public let created: Date
    /// When it is dropped unsent.
    public let expires: Date
    /// Not resent automatically before this (nil: at once).
    public let nextAttempt: Date?
    /// The last attempt, nil before any.
    public let lastAttempt: Date?
    /// The stored record with its replay state, as JSON (the journal's own format).
    public let json: String
    /// The id of its resend policy (``BuiltinResendPolicy/auto`` or ``BuiltinResendPolicy/manual``'s
    /// id when it named none).
    public let resendPolicy: String

    /// One header line.
    public struct HTTPHeader: Sendable, Hashable {
        /// The name.
        public let name: String
        /// The value.
        public let value: String
    }

    init(_ f: OpaquePointer) {
        id = String(borrowedCString: courier_frozen_id(f))
        method = String(borrowedCString: courier_frozen_method(f))
        url = String(borrowedCString: courier_frozen_url(f))
        host = String(borrowedCString: courier_frozen_host(f))
        idempotencyKey = String(borrowedCString: courier_frozen_idempotency_key(f))
        json = String(borrowedCString: courier_frozen_json(f))
        resendPolicy = String(borrowedCString: courier_frozen_resend_policy(f))
        headers = HTTPHeaders(count: courier_frozen_header_count(f)) { courier_frozen_header_at(&$1, &$2, f, $0) }
            .map { HTTPHeader(name: $0.name, value: $0.value) }
        var length = 0
        body = courier_frozen_body(f, &length).map { Data(bytes: $0, count: length) }
        var info = courier_frozen_info()
        info.size = MemoryLayout<courier_frozen_info>.size
        _ = courier_frozen_get_info(&info, f)
        policy = FreezePolicy(cValue: info.policy)
        unordered = info.flags & UInt32(COURIER_FREEZE_UNORDERED) != 0
        timeout = TimeInterval(info.timeout_ms) / 1000
        attempts = Int(info.attempts)
        lastCode = info.last_code < 0 ? CourierError.Code(rawValue: info.last_code) : nil
        lastStatus = info.last_status != 0 ? Int(info.last_status) : nil
        claimed = info.claimed != 0
        created = Self.date(info.created_ms) ?? Date(timeIntervalSince1970: 0)
        expires = Self.date(info.expires_ms) ?? Date(timeIntervalSince1970: 0)
        nextAttempt = Self.date(info.next_attempt_ms)
        lastAttempt = Self.date(info.last_attempt_ms)
    }

    static func date(_ ms: Int64) -> Date? { ms > 0 ? Date(timeIntervalSince1970: TimeInterval(ms) / 1000) : nil }
}

/// The recorded final answer of a request that left the journal.
public struct FrozenOutcome: Sendable, Hashable {
    /// nil for a success, else the failure's code.
    public let code: CourierError.Code?
    /// The HTTP status, nil if none.
    public let status: Int?
    /// When it was recorded.
    public let date: Date
}

// MARK: - Events

/// Something that happened to a frozen request (the seeds' resend notifications).
public struct FrozenEvent: Sendable {
    /// What happened.
    public enum Kind: Sendable, Hashable, CaseIterable {
        /// Written to the journal.
        case frozen
        /// A resend got a final, successful answer; removed.
        case resentSucceeded
        /// A resend failed; ``FrozenEvent/isFinal`` says whether it was removed.
        case resentFailed
        /// Its expiry passed: removed, never sent again.
        case expired
        /// Its resend policy is not registered in this engine: kept, never sent or deleted by it
        /// (once per request and engine).
        case policyUnknown
        /// Its resend policy's `canDelete` said yes: removed, never sent again.
        case deleted

        init?(cValue: courier_frozen_event_kind) {
            switch cValue {
            case COURIER_FROZEN_EVENT_FROZEN: self = .frozen
            case COURIER_FROZEN_EVENT_RESENT_SUCCEEDED: self = .resentSucceeded
            case COURIER_FROZEN_EVENT_RESENT_FAILED: self = .resentFailed
            case COURIER_FROZEN_EVENT_EXPIRED: self = .expired
            case COURIER_FROZEN_EVENT_POLICY_UNKNOWN: self = .policyUnknown
            case COURIER_FROZEN_EVENT_DELETED: self = .deleted
            default: return nil
            }
        }
    }

    /// What happened.
    public let kind: Kind
    /// The freeze id.
    public let freezeID: String
    /// The request (as claimed, for resends), when it could be read.
    public let request: FrozenRequest?
    /// For ``Kind/frozen`` the original send's id; for resends the resend's id.
    public let requestID: RequestID
    /// The response of a resend, when one arrived (a copy).
    public let response: Response?
    /// The failure of a failed resend.
    public let error: CourierError?
    /// Whether the request left the journal with this event.
    public let isFinal: Bool
    /// Resends started so far.
    public let attempts: Int
    /// Why, for ``Kind/policyUnknown`` ("not_registered"), ``Kind/deleted`` ("can_delete") and
    /// ``Kind/expired`` ("expired"); nil otherwise.
    public let reason: String?

    init?(_ ev: UnsafePointer<courier_frozen_event>) {
        let e = ev.pointee
        guard let kind = Kind(cValue: e.kind) else { return nil }
        self.kind = kind
        freezeID = String(borrowedCString: e.freeze_id)
        request = e.frozen.map { FrozenRequest($0) }
        requestID = RequestID(rawValue: e.request_id)
        let response = e.response.map { Response(borrowing: $0) }
        self.response = response
        error = e.code != COURIER_OK.rawValue ? CourierError(code: e.code, detail: e.error, response: response) : nil
        isFinal = e.final != 0
        attempts = Int(e.attempts)
        reason = e.reason.map { String(cString: $0) }
    }
}

/// A registration of an observer; ``cancel()`` (or ``FrozenRequests/removeObserver(_:)``) ends it.
/// The engine closing ends it too.
public final class ObservationToken: @unchecked Sendable { // immutable but for a locked flag
    weak var engine: Engine?
    let token: UInt64
    let remove: @Sendable (OpaquePointer, UInt64) -> Int32
    private let lock = NSLock()
    private var cancelled = false

    init(engine: Engine, token: UInt64, remove: @escaping @Sendable (OpaquePointer, UInt64) -> Int32) {
        self.engine = engine
        self.token = token
        self.remove = remove
    }

    /// Stops the observer. Idempotent; any thread except inside the observer itself is fine.
    public func cancel() {
        lock.lock()
        let first = !cancelled
        cancelled = true
        lock.unlock()
        guard first, let engine, engine.enter() else { return }
        defer { engine.leave() }
        _ = remove(engine.handle, token)
    }
}

/// The Swift closure behind one C listener; released by the C core's user_free.
final class FrozenListenerBox: @unchecked Sendable { // immutable
    let kinds: Set<FrozenEvent.Kind>
    let handler: @Sendable (FrozenEvent) -> Void
    let onEnd: (@Sendable () -> Void)?
    init(kinds: Set<FrozenEvent.Kind>, handler: @escaping @Sendable (FrozenEvent) -> Void, onEnd: (@Sendable () -> Void)?) {
        self.kinds = kinds
        self.handler = handler
        self.onEnd = onEnd
    }
    deinit { onEnd?() }
}

private let frozenEventTrampoline: courier_frozen_event_fn = { ev, user in
    guard let ev, let user else { return }
    let box = Unmanaged<FrozenListenerBox>.fromOpaque(user).takeUnretainedValue()
    guard let kind = FrozenEvent.Kind(cValue: ev.pointee.kind), box.kinds.contains(kind),
          let event = FrozenEvent(ev) else { return }
    box.handler(event)
}

/// The notifications ``FrozenRequests/postNotifications(to:)`` posts, HTNetworking's names for them.
extension Notification.Name {
    /// Posted by ``FrozenRequests/postNotifications(to:)`` when a resend succeeded
    /// (HTNetworking's `kHTResendFrozenRequestSuccessfulNotification`).
    public static let courierFrozenRequestResent = Notification.Name("CourierFrozenRequestResent")
    /// Posted when a resend failed.
    public static let courierFrozenRequestResendFailed = Notification.Name("CourierFrozenRequestResendFailed")
    /// Posted when a request was frozen.
    public static let courierRequestFrozen = Notification.Name("CourierRequestFrozen")
    /// Posted when a frozen request expired.
    public static let courierFrozenRequestExpired = Notification.Name("CourierFrozenRequestExpired")
    /// Posted when a frozen request's resend policy is not registered in the engine.
    public static let courierFrozenRequestPolicyUnknown = Notification.Name("CourierFrozenRequestPolicyUnknown")
    /// Posted when a frozen request's resend policy deleted it.
    public static let courierFrozenRequestDeleted = Notification.Name("CourierFrozenRequestDeleted")
}

/// The key of the ``FrozenEvent`` in a notification's `userInfo`.
public let CourierFrozenEventKey = "event"

// MARK: - The manager

extension Engine {
    /// The engine's frozen requests: inspect, remove, replay, observe.
    public var frozen: FrozenRequests { FrozenRequests(engine: self) }
}

/// The manager of an engine's frozen requests (HTFreezeManager). Every method is thread-safe and
/// reads or writes the journal directly (a synced commit for removals).
public struct FrozenRequests: Sendable {
    let engine: Engine

    private func call<R>(_ body: (OpaquePointer) throws -> R) throws -> R { try engine.withHandle(body) }

    /// Every frozen request of the store, oldest first.
    /// - Returns: The snapshots.
    /// - Throws: ``CourierError`` (``CourierError/Code/store``, ``CourierError/Code/journalCorrupt``).
    public func list() throws -> [FrozenRequest] {
        try call { handle in
            var out: OpaquePointer?
            var error = courier_error()
            let rc = courier_frozen_list_requests(&out, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            defer { courier_frozen_list_free(out) }
            return (0..<courier_frozen_list_count(out)).compactMap { i in
                courier_frozen_list_at(out, i).map { FrozenRequest($0) }
            }
        }
    }

    /// The frozen request with this id, nil if there is none.
    /// - Parameter id: The freeze id.
    /// - Returns: The snapshot, or nil.
    /// - Throws: ``CourierError``.
    public func get(_ id: String) throws -> FrozenRequest? {
        try call { handle in
            var out: OpaquePointer?
            var error = courier_error()
            let rc = courier_frozen_get(&out, handle, id, &error)
            if rc == COURIER_E_NOT_FOUND.rawValue { return nil }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            defer { courier_frozen_free(out) }
            return out.map { FrozenRequest($0) }
        }
    }

    /// Removes a frozen request.
    /// - Parameter id: The freeze id.
    /// - Returns: Whether it was there.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func remove(_ id: String) throws -> Bool {
        try call { handle in
            var error = courier_error()
            let rc = courier_frozen_remove(handle, id, &error)
            if rc == COURIER_E_NOT_FOUND.rawValue { return false }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return true
        }
    }

    /// Removes every frozen request.
    /// - Returns: How many were removed.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func removeAll() throws -> Int {
        try call { handle in
            var removed: Int64 = 0
            var error = courier_error()
            let rc = courier_frozen_remove_all(&removed, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(removed)
        }
    }

    /// How many frozen requests the store holds.
    /// - Returns: The count.
    /// - Throws: ``CourierError``.
    public func count() throws -> Int {
        try call { handle in
            var n: Int64 = 0
            var error = courier_error()
            let rc = courier_frozen_count(&n, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(n)
        }
    }

    /// The recorded final answer of a request that left the journal (the last 1,000 are kept).
    /// - Parameter id: The freeze id.
    /// - Returns: The outcome, nil if none is recorded.
    /// - Throws: ``CourierError``.
    public func lastOutcome(_ id: String) throws -> FrozenOutcome? {
        try call { handle in
            var code: Int32 = 0
            var status: Int32 = 0
            var at: Int64 = 0
            var error = courier_error()
            let rc = courier_frozen_last_outcome(&code, &status, &at, handle, id, &error)
            if rc == COURIER_E_NOT_FOUND.rawValue { return nil }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return FrozenOutcome(code: code < 0 ? CourierError.Code(rawValue: code) : nil,
                                 status: status != 0 ? Int(status) : nil,
                                 date: Date(timeIntervalSince1970: TimeInterval(at) / 1000))
        }
    }

    /// Replays now: every request not tried since this call is due at once, whatever its backoff
    /// (per-host order and the concurrency bound still hold), even while offline. Answers arrive
    /// as events.
    /// - Parameter manual: Also the ``FreezePolicy/manual`` requests (`COURIER_REPLAY_MANUAL`).
    /// - Throws: ``CourierError``.
    public func replay(manual: Bool = false) throws {
        try call { handle in
            var error = courier_error()
            let rc = courier_frozen_replay(handle, manual ? UInt32(COURIER_REPLAY_MANUAL) : 0, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
        }
    }

    /// Deprecated spelling of ``replay(manual:)``.
    /// - Parameter includingManual: Also the ``FreezePolicy/manual`` requests.
    /// - Throws: ``CourierError``.
    @available(*, deprecated, renamed: "replay(manual:)")
    public func replay(includingManual: Bool) throws { try replay(manual: includingManual) }

    /// Sends one frozen request now, whatever its policy, order or backoff.
    /// - Parameter id: The freeze id.
    /// - Throws: ``CourierError`` (``CourierError/Code/notFound``).
    public func resend(_ id: String) throws {
        try call { handle in
            var error = courier_error()
            let rc = courier_frozen_resend(handle, id, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
        }
    }

    /// Pauses automatic replay (explicit ``replay(manual:)`` and ``resend(_:)`` still run).
    public func pause() { _ = try? call { courier_frozen_pause($0) } }

    /// Resumes automatic replay.
    public func resume() { _ = try? call { courier_frozen_resume($0) } }

    /// Blocks until the journal has nothing in flight and nothing it would send now. Never call it
    /// from an observer or a completion handler.
    /// - Parameter timeout: Seconds to wait at most.
    /// - Returns: Whether it became idle in time.
    @discardableResult
    public func waitUntilIdle(timeout: TimeInterval) -> Bool {
        (try? call { courier_frozen_wait_idle($0, Int64((timeout * 1000).rounded())) == COURIER_OK.rawValue }) ?? false
    }

    /// ``waitUntilIdle(timeout:)`` without blocking the calling task.
    /// - Parameter timeout: Seconds to wait at most.
    /// - Returns: Whether it became idle in time.
    public func idle(timeout: TimeInterval) async -> Bool {
        let engine = self.engine
        return (try? await offTaskThread { FrozenRequests(engine: engine).waitUntilIdle(timeout: timeout) }) ?? false
    }

    // MARK: Events

    /// Adds an observer (NotificationCenter-style): `handler` runs on the engine's journal thread,
    /// one event at a time, in order. Events reach only this engine's observers.
    /// - Parameters:
    ///   - kinds: The kinds to observe (all by default).
    ///   - handler: Receives each event; keep it quick.
    /// - Returns: The token; cancel it to stop.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func addObserver(for kinds: Set<FrozenEvent.Kind> = Set(FrozenEvent.Kind.allCases),
                            _ handler: @escaping @Sendable (FrozenEvent) -> Void) throws -> ObservationToken {
        try register(FrozenListenerBox(kinds: kinds, handler: handler, onEnd: nil))
    }

    /// Removes an observer (the same as `token.cancel()`).
    /// - Parameter token: What ``addObserver(for:_:)`` returned.
    public func removeObserver(_ token: ObservationToken) { token.cancel() }

    /// Posts every event to a NotificationCenter, as the seeds did: ``Foundation/NSNotification/Name/courierRequestFrozen``,
    /// ``Foundation/NSNotification/Name/courierFrozenRequestResent``, ``Foundation/NSNotification/Name/courierFrozenRequestResendFailed``,
    /// ``Foundation/NSNotification/Name/courierFrozenRequestExpired``, with the ``FrozenEvent`` under
    /// ``CourierFrozenEventKey`` in `userInfo`. Posted on the journal thread.
    /// - Parameter center: The center (the default one if omitted).
    /// - Returns: The token; cancel it to stop posting.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func postNotifications(to center: NotificationCenter = .default) throws -> ObservationToken {
        try addObserver { event in
            let name: Notification.Name
            switch event.kind {
            case .frozen: name = .courierRequestFrozen
            case .resentSucceeded: name = .courierFrozenRequestResent
            case .resentFailed: name = .courierFrozenRequestResendFailed
            case .expired: name = .courierFrozenRequestExpired
            case .policyUnknown: name = .courierFrozenRequestPolicyUnknown
            case .deleted: name = .courierFrozenRequestDeleted
            }
            center.post(name: name, object: nil, userInfo: [CourierFrozenEventKey: event])
        }
    }

    /// The events as an asynchronous sequence. It ends when the engine closes; stopping the
    /// iteration removes the observer. Events are buffered, so a slow consumer misses none.
    /// - Parameter kinds: The kinds to observe (all by default).
    /// - Returns: The stream.
    public func events(_ kinds: Set<FrozenEvent.Kind> = Set(FrozenEvent.Kind.allCases)) -> AsyncStream<FrozenEvent> {
        AsyncStream { continuation in
            let box = FrozenListenerBox(kinds: kinds, handler: { continuation.yield($0) },
                                        onEnd: { continuation.finish() })
            do {
                let token = try register(box)
                continuation.onTermination = { _ in token.cancel() }
            } catch {
                continuation.finish()
            }
        }
    }

    private func register(_ box: FrozenListenerBox) throws -> ObservationToken {
        try call { handle in
            var token: UInt64 = 0
            // On failure the C core has already released the box through user_free.
            let rc = courier_frozen_add_listener(&token, handle, frozenEventTrampoline,
                                                 Unmanaged.passRetained(box).toOpaque(), releaseBox)
            try CourierError.check(rc, "frozen observer")
            return ObservationToken(engine: engine, token: token) { courier_frozen_remove_listener($0, $1) }
        }
    }
}
