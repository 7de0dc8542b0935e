// Cache.swift — the C core's response cache, in Swift: cache policies and keys on a Request, the
// cache's settings on a Configuration, the from-cache facts of a Response, the manager
// (`engine.cache`: has, get, remove, removeAll, removeSince, removeExpired, size, stats, entries,
// with async variants) and user-defined policies as a protocol. Every decision (keys, policies,
// expiry, HTTP semantics, eviction) is made in C; this file only translates.

import Foundation
internal import CCore

// MARK: - Policies

/// Which cache policy a request follows (the seeds' `cacheId`).
public enum CachePolicy: Sendable, Hashable {
    /// Neither reads nor writes the cache (the default).
    case noCache
    /// A fresh entry answers without the network (marked ``Response/fromCache``); otherwise the
    /// network answers and the response is written.
    case cacheFirst
    /// Never reads; writes what the network returns (refresh after showing cached data).
    case writeOnly
    /// Standard HTTP caching (RFC 9111) for GET as a private cache: Cache-Control, Expires, Age,
    /// heuristic freshness, ETag/Last-Modified revalidation, Vary, stale-while-revalidate,
    /// stale-if-error, invalidation by unsafe methods (see `COURIER_CACHE_HTTP` in courier.h).
    case http
    /// The same as a shared cache (a service between many users and an origin): s-maxage and
    /// proxy-revalidate apply, `private` answers are not stored, and answers to requests with
    /// Authorization only when RFC 9111 section 3.5 allows.
    case httpShared
    /// A user-defined policy registered with ``Cache/register(_:id:)`` (id >= 100).
    case custom(Int)
    /// The engine's default (``Configuration/cachePolicy(_:)``).
    case engineDefault

    var cValue: courier_cache_policy {
        switch self {
        case .noCache: return COURIER_CACHE_NO_CACHE
        case .cacheFirst: return COURIER_CACHE_CACHE_FIRST
        case .writeOnly: return COURIER_CACHE_WRITE_ONLY
        case .http: return COURIER_CACHE_HTTP
        case .httpShared: return COURIER_CACHE_HTTP_SHARED
        case .custom(let id): return courier_cache_policy(rawValue: numericCast(Int32(clamping: id)))
        case .engineDefault: return COURIER_CACHE_POLICY_DEFAULT
        }
    }

    /// The smallest id a user-defined policy may have.
    public static let firstCustomID = Int(COURIER_CACHE_POLICY_USER_MIN)
}

/// Where a response's body came from.
public enum CacheStatus: Sendable, Hashable {
    /// The network (or no cache involved).
    case network
    /// A fresh cache entry, without the network.
    case hit
    /// A stored entry the server confirmed with 304 Not Modified.
    case revalidated
    /// A stale entry (stale-while-revalidate, stale-if-error, or ``Cache/get(_:allowStale:)-92l5k``).
    case stale

    init(_ raw: Int32) {
        switch raw {
        case Int32(COURIER_CACHE_STATUS_HIT.rawValue): self = .hit
        case Int32(COURIER_CACHE_STATUS_REVALIDATED.rawValue): self = .revalidated
        case Int32(COURIER_CACHE_STATUS_STALE.rawValue): self = .stale
        default: self = .network
        }
    }
}

/// Why the cache did what it did with a response (`courier_cache_reason`).
public enum CacheReason: Sendable, Hashable {
    /// No cache policy looked at it.
    case none
    /// Nothing stored: the network answered and the answer was stored.
    case miss
    /// A fresh stored response, without the network.
    case fresh
    /// A stale stored response, served while it is revalidated in the background.
    case staleWhileRevalidate
    /// A stale stored response, served because the origin failed (stale-if-error).
    case staleIfError
    /// A stored response the origin confirmed with 304.
    case revalidated
    /// The stored response was stale: the network's new answer (stored).
    case staleRefetched
    /// A response is stored under another Vary variant: the network's answer (stored).
    case varyMiss
    /// only-if-cached and nothing usable stored: a 504 made by the cache.
    case onlyIfCached
    /// Not stored: no-store (request or response).
    case notStoredNoStore
    /// Not stored: a status the rules do not store.
    case notStoredStatus
    /// Not stored: private, in the shared cache.
    case notStoredPrivate
    /// Not stored: a request with Authorization, in the shared cache.
    case notStoredAuthorization
    /// Not stored: Vary: *.
    case notStoredVary
    /// Not stored: more than an eighth of the cache.
    case notStoredTooLarge
    /// Not stored: neither freshness nor a validator.
    case notStoredNoFreshness
    /// Not stored: a method whose answers are not stored.
    case notStoredMethod
    /// An unsafe method's answer: the stored responses of its URLs were removed.
    case invalidated
    /// Stale, as the request allowed (max-stale, or ``Cache/get(_:allowStale:)-92l5k``).
    case staleAccepted
    /// A HEAD answer that freshened the stored GET response.
    case updatedStored
    /// Not stored: a custom policy's `shouldWrite` said no.
    case notStoredPolicy
    /// A reason this version of the facade does not know (a newer library).
    case other(Int)

    private static let known: [CacheReason] = [
        .none, .miss, .fresh, .staleWhileRevalidate, .staleIfError, .revalidated, .staleRefetched, .varyMiss,
        .onlyIfCached, .notStoredNoStore, .notStoredStatus, .notStoredPrivate, .notStoredAuthorization,
        .notStoredVary, .notStoredTooLarge, .notStoredNoFreshness, .notStoredMethod, .invalidated,
        .staleAccepted, .updatedStored, .notStoredPolicy,
    ]

    /// The C value (`courier_cache_reason`): the case's position in the C enum (the private `known`
    /// list keeps that order).
    public var rawValue: Int {
        if case .other(let v) = self { return v }
        return Self.known.firstIndex(of: self)!
    }

    /// The C library's name of the reason ("fresh", "not-stored-private", ...).
    public var name: String { String(cString: courier_cache_reason_name(Int32(clamping: rawValue))) }

    init(_ raw: Int32) {
        let i = Int(raw)
        self = i >= 0 && i < Self.known.count ? Self.known[i] : .other(i)
    }
}

// MARK: - Request settings

extension Request {
    /// The cache policy of this request.
    /// - Parameter policy: The policy.
    /// - Returns: The changed request.
    public func cachePolicy(_ policy: CachePolicy) -> Request { adding(_CacheRequestOption.policy(policy)) }

    /// How long an entry written for this request stays fresh (cache-first, write-only and custom
    /// policies; the HTTP policy follows the response's headers).
    /// - Parameter seconds: Whole seconds (> 0).
    /// - Returns: The changed request.
    public func cacheExpiry(_ seconds: Int) -> Request { adding(_CacheRequestOption.expiry(seconds)) }

    /// The request's own cache key, instead of the default (method + URL + sorted parameters).
    /// - Parameter key: The key text (not empty).
    /// - Returns: The changed request.
    public func cacheKey(_ key: String) -> Request { adding(_CacheRequestOption.key(key)) }

    /// Data appended to the cache key (an app version, a user id), so one user's entries are
    /// never served to another.
    /// - Parameter data: The data.
    /// - Returns: The changed request.
    public func cacheSensitiveData(_ data: String) -> Request { adding(_CacheRequestOption.sensitive(data)) }

    /// Leaves parameters (a timestamp, a nonce) out of the default cache key.
    /// - Parameter names: Parameter names, matched exactly.
    /// - Returns: The changed request.
    public func cacheKeyFilter(_ names: String...) -> Request {
        names.reduce(self) { $0.adding(_CacheRequestOption.filter($1)) }
    }
}

enum _CacheRequestOption: RequestOption {
    case policy(CachePolicy)
    case expiry(Int)
    case key(String)
    case sensitive(String)
    case filter(String)

    func apply(to request: OpaquePointer) throws {
        switch self {
        case .policy(let p):
            try CourierError.check(courier_request_set_cache_policy(request, p.cValue), "cachePolicy")
        case .expiry(let s):
            try CourierError.check(courier_request_set_cache_expiry_ms(request, Int64(s) * 1000), "cacheExpiry \(s)")
        case .key(let k):
            try CourierError.check(courier_request_set_cache_key(request, k), "cacheKey")
        case .sensitive(let d):
            try CourierError.check(courier_request_set_cache_sensitive_data(request, d), "cacheSensitiveData")
        case .filter(let n):
            try CourierError.check(courier_request_add_cache_key_filter(request, n), "cacheKeyFilter '\(n)'")
        }
    }
}

// MARK: - Configuration settings

extension Configuration {
    /// The most the cache may hold, in bytes (>= 65536); nil (the default) means 256 MiB. Over
    /// it, expired entries are evicted first, then the least recently written.
    public var cacheMaxBytes: Int64? {
        get { setting("cacheMaxBytes") }
        set {
            setSetting("cacheMaxBytes", newValue) {
                try CourierError.check(courier_config_set_cache_max_bytes($0, $1), "cacheMaxBytes \($1)")
            }
        }
    }

    /// Where the cache keeps its entries: nil (the default) means the LMDB store in
    /// "<store directory>/cache"; a directory, an LMDB store there; a URL
    /// `redis://[[user]:password@]host[:port][/db][?timeout_ms=N]`, a Redis server shared by every
    /// engine, process and machine that names it (policies, keys, HTTP rules and the manager work
    /// the same; see `courier_config_set_cache_store`). Redis down never fails a request; the
    /// manager then throws ``CourierError/redis``; the engine opens while Redis is down. A library
    /// built without Redis (the package trait `Redis`, off by default, not named; or no hiredis)
    /// throws ``CourierError/redisUnsupported`` at open. The cache is opened with the engine: a
    /// directory that cannot be created or opened throws ``CourierError/store`` from
    /// `Engine(configuration:)`, and a setting that looks like a mistyped URL (`"redis//host"`,
    /// `"redis:/host"`) throws ``CourierError/invalidArgument`` rather than naming the relative
    /// directory `redis/host` (write `"./redis//host"` for that).
    public var cacheStore: String? {
        get { setting("cacheStore") }
        set {
            setSetting("cacheStore", newValue) {
                try CourierError.check(courier_config_set_cache_store($0, $1), "cacheStore")
            }
        }
    }

    /// Default freshness, in whole seconds (> 0), of entries whose request sets none; nil (the
    /// default) means 3600.
    public var cacheExpiry: Int? {
        get { setting("cacheExpiry") }
        set {
            setSetting("cacheExpiry", newValue) {
                try CourierError.check(courier_config_set_cache_expiry_ms($0, Int64($1) * 1000), "cacheExpiry \($1)")
            }
        }
    }

    /// The policy of requests that name none. Default ``CachePolicy/noCache``. Any other opens the
    /// cache with the engine (``CourierError/store`` from `Engine(configuration:)` when it cannot).
    public var cachePolicy: CachePolicy {
        get { setting("cachePolicy") ?? .noCache }
        set {
            setSetting("cachePolicy", newValue) {
                try CourierError.check(courier_config_set_cache_policy($0, $1.cValue), "cachePolicy")
            }
        }
    }

    /// How the cache's commits reach the disk. Default ``CacheDurability/durable``. The first
    /// engine of a process to open a store directory decides it for that store.
    public var cacheDurability: CacheDurability {
        get { setting("cacheDurability") ?? .durable }
        set {
            setSetting("cacheDurability", newValue) {
                try CourierError.check(courier_config_set_cache_durability($0, $1.cValue), "cacheDurability")
            }
        }
    }

    /// The clock the cache and the journal read (creation, expiry, age), for tests of expiry
    /// without sleeping; called from any thread. nil (the default) means the system clock.
    public var clock: (@Sendable () -> Date)? {
        get { setting("clock", as: ClockBox.self)?.now }
        set {
            setSetting("clock", newValue.map(ClockBox.init)) { config, box in
                let user = Unmanaged.passRetained(box).toOpaque()
                // On failure the C core has already released the box through user_free.
                try CourierError.check(courier_config_set_clock(config, clockTrampoline, user, releaseBox), "clock")
            }
        }
    }

    /// Whether responses a cache policy looked at carry a `Cache-Status` field (RFC 9211) saying
    /// what the cache did, e.g. `Courier; hit; detail=fresh`. Default false.
    public var cacheStatusHeader: Bool {
        get { setting("cacheStatusHeader") ?? false }
        set {
            setSetting("cacheStatusHeader", newValue) {
                try CourierError.check(courier_config_set_cache_status_header($0, $1 ? 1 : 0), "cacheStatusHeader")
            }
        }
    }

    /// Deprecated: set ``cacheMaxBytes`` (`configuration.cacheMaxBytes = bytes`).
    /// - Parameter bytes: The limit.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.cacheMaxBytes = bytes")
    public func cacheMaxBytes(_ bytes: Int64) -> Configuration { with { $0.cacheMaxBytes = bytes } }

    /// Deprecated: set ``cacheExpiry`` (`configuration.cacheExpiry = seconds`).
    /// - Parameter seconds: Whole seconds (> 0).
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.cacheExpiry = seconds")
    public func cacheExpiry(_ seconds: Int) -> Configuration { with { $0.cacheExpiry = seconds } }

    /// Deprecated: set ``cachePolicy`` (`configuration.cachePolicy = policy`).
    /// - Parameter policy: The policy.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.cachePolicy = policy")
    public func cachePolicy(_ policy: CachePolicy) -> Configuration { with { $0.cachePolicy = policy } }

    /// Deprecated: set ``cacheDurability`` (`configuration.cacheDurability = durability`).
    /// - Parameter durability: The setting.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.cacheDurability = durability")
    public func cacheDurability(_ durability: CacheDurability) -> Configuration {
        with { $0.cacheDurability = durability }
    }

    /// Deprecated: set ``cacheStatusHeader`` (`configuration.cacheStatusHeader = on`).
    /// - Parameter on: Whether to add it.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.cacheStatusHeader = on")
    public func cacheStatusHeader(_ on: Bool) -> Configuration { with { $0.cacheStatusHeader = on } }

    /// Deprecated: set ``clock`` (`configuration.clock = { ... }`).
    /// - Parameter now: Returns the current time; called from any thread.
    /// - Returns: The changed configuration.
    @available(*, deprecated, message: "set the property: configuration.clock = { ... }")
    public func clock(_ now: @escaping @Sendable () -> Date) -> Configuration { with { $0.clock = now } }
}

/// How the cache's commits reach the disk.
public enum CacheDurability: Sendable, Hashable {
    /// One fdatasync per commit (MDB_NOMETASYNC): consistent across power loss, which may undo
    /// the last commit. The default.
    case durable
    /// No sync (MDB_NOSYNC): safe across process crashes; power loss may lose recent writes or
    /// damage the store (then moved aside and recreated when noticed).
    case fast
    /// Data and meta page synced on every commit.
    case synced

    var cValue: courier_cache_durability {
        switch self {
        case .durable: return COURIER_CACHE_DURABLE
        case .fast: return COURIER_CACHE_FAST
        case .synced: return COURIER_CACHE_SYNCED
        }
    }
}

final class ClockBox: @unchecked Sendable { // immutable after init
    let now: @Sendable () -> Date
    init(_ now: @escaping @Sendable () -> Date) { self.now = now }
}

private let clockTrampoline: courier_clock_fn = { user in
    let box = Unmanaged<ClockBox>.fromOpaque(user!).takeUnretainedValue()
    return Int64((box.now().timeIntervalSince1970 * 1000).rounded(.down))
}


// MARK: - Responses

extension Response {
    /// Whether the body came from the cache (a hit, a revalidated entry or a stale one).
    public var fromCache: Bool { storage.map { courier_response_from_cache($0.pointer) != 0 } ?? false }

    /// Where the body came from.
    public var cacheStatus: CacheStatus {
        storage.map { CacheStatus(courier_response_cache_status($0.pointer)) } ?? .network
    }

    /// Why the cache did what it did with this response (``CacheReason/none`` when no cache
    /// policy looked at it).
    public var cacheReason: CacheReason {
        storage.map { CacheReason(courier_response_cache_reason($0.pointer)) } ?? .none
    }

    /// Age in seconds of a response from the cache (RFC 9111 age for the HTTP policy), else 0.
    public var age: Int { storage.map { Int(courier_response_age_ms($0.pointer) / 1000) } ?? 0 }

    /// When the cache entry was written; nil for a response that did not come from the cache.
    public var cacheCreated: Date? { storage.flatMap { Self.date(courier_response_cache_created($0.pointer)) } }

    /// Until when the cache entry is fresh; nil for a response that did not come from the cache.
    public var cacheExpires: Date? { storage.flatMap { Self.date(courier_response_cache_expires($0.pointer)) } }

    /// The key text of the cache entry the response came from, or nil.
    public var cacheKey: String? {
        guard let storage, let key = courier_response_cache_key(storage.pointer) else { return nil }
        return String(cString: key)
    }

    private static func date(_ ms: Int64) -> Date? {
        ms == 0 ? nil : Date(timeIntervalSince1970: Double(ms) / 1000)
    }
}

// MARK: - User-defined policies

/// A user-defined cache policy (the seeds' `HTCachePolicyProtocol`), registered by id with
/// ``Cache/register(_:id:)`` and named by requests with ``CachePolicy/custom(_:)``.
/// The methods run on the thread that sends (the two lookups) or on the engine's worker
/// (``shouldWrite(_:expires:)``); they must be quick and must not close the engine.
public protocol CustomCachePolicy: Sendable {
    /// Whether the request has a usable entry. Default: an entry exists and is fresh.
    /// - Parameters:
    ///   - cached: The stored entry, or nil when there is none.
    ///   - now: The cache's clock.
    /// - Returns: true when the entry counts.
    func hasCache(_ cached: Response?, now: Date) -> Bool
    /// Given a usable entry, whether to answer from it without the network. Default: yes.
    /// - Parameters:
    ///   - cached: The entry.
    ///   - now: The cache's clock.
    /// - Returns: true to answer from the cache.
    func answerFromCache(_ cached: Response, now: Date) -> Bool
    /// After a successful, validated network response: whether to write it. Default: yes.
    /// - Parameters:
    ///   - response: The response.
    ///   - expires: When the entry would expire; may be changed.
    /// - Returns: true to write it.
    func shouldWrite(_ response: Response, expires: inout Date) -> Bool
}

extension CustomCachePolicy {
    /// An entry exists and is fresh.
    public func hasCache(_ cached: Response?, now: Date) -> Bool {
        guard let cached, let expires = cached.cacheExpires else { return false }
        return now < expires
    }
    /// Yes.
    public func answerFromCache(_ cached: Response, now: Date) -> Bool { true }
    /// Yes.
    public func shouldWrite(_ response: Response, expires: inout Date) -> Bool { true }
}

final class PolicyBox: @unchecked Sendable { // immutable after init; the policy is Sendable
    let policy: any CustomCachePolicy
    init(_ policy: any CustomCachePolicy) { self.policy = policy }
}

private func policyBox(_ user: UnsafeMutableRawPointer?) -> PolicyBox {
    Unmanaged<PolicyBox>.fromOpaque(user!).takeUnretainedValue()
}

private func date(ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

private let hasCacheTrampoline: @convention(c) (OpaquePointer?, Int64, UnsafeMutableRawPointer?) -> Int32 = {
    cached, now, user in
    let response = cached.map { Response(borrowing: $0) }
    return policyBox(user).policy.hasCache(response, now: date(ms: now)) ? 1 : 0
}

private let answerTrampoline: @convention(c) (OpaquePointer?, Int64, UnsafeMutableRawPointer?) -> Int32 = {
    cached, now, user in
    guard let cached else { return 0 }
    return policyBox(user).policy.answerFromCache(Response(borrowing: cached), now: date(ms: now)) ? 1 : 0
}

private let writeTrampoline: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int64>?, UnsafeMutableRawPointer?)
    -> Int32 = { response, expires, user in
    guard let response, let expires else { return 0 }
    var when = date(ms: expires.pointee)
    let write = policyBox(user).policy.shouldWrite(Response(borrowing: response), expires: &when)
    expires.pointee = Int64((when.timeIntervalSince1970 * 1000).rounded(.down))
    return write ? 1 : 0
}

// MARK: - The manager

/// A snapshot of one cache entry, as listed by ``Cache/entries()-431cm``.
public struct CacheEntry: Sendable, Hashable {
    /// The key text (method, URL and sorted parameters, or the request's own key).
    public let key: String
    /// The URL that answered.
    public let url: String
    /// The key's 128-bit hash, 32 hex digits.
    public let id: String
    /// The HTTP status.
    public let status: Int
    /// Bytes in the store.
    public let size: Int64
    /// When it was written.
    public let created: Date
    /// Until when it is fresh.
    public let expires: Date
}

/// The cache's statistics: what this engine did since it opened, and the store's totals.
public struct CacheStats: Sendable, Hashable {
    /// Requests answered from the cache without the network.
    public let hits: Int64
    /// Lookups that found no usable entry.
    public let misses: Int64
    /// Entries written.
    public let writes: Int64
    /// Entries evicted to stay under the limit or to make room.
    public let evictions: Int64
    /// 304 answers merged into stored entries.
    public let revalidations: Int64
    /// Stale entries served (stale-while-revalidate, stale-if-error).
    public let staleServed: Int64
    /// Writes dropped (too large, store full, store failure).
    public let writeFailures: Int64
    /// The store's total bytes (all engines and processes).
    public let bytes: Int64
    /// The store's entry count.
    public let count: Int64
    /// This engine's limit.
    public let maxBytes: Int64
}

extension Engine {
    /// The engine's response cache: inspect, read and clear it.
    public var cache: Cache { Cache(engine: self) }
}

/// The manager of an engine's cache (HTCacheManager). Every method is thread-safe and has one
/// shape, synchronous, in every context: the same call compiles in a synchronous function and in an
/// `async` closure, with no `await`. A local store answers in microseconds (LMDB, read in place); a
/// Redis store in one round trip, bounded by its timeouts. For a large purge from async code
/// (``removeAll()`` or ``removeSince(_:)`` over millions of entries), call it from a detached task
/// or your own queue.
public struct Cache: Sendable {
    let engine: Engine

    private func call<R>(_ body: (OpaquePointer) throws -> R) throws -> R { try engine.withHandle(body) }

    // MARK: By request

    /// The cache key text of a request.
    /// - Parameter request: The request.
    /// - Returns: The key.
    /// - Throws: ``CourierError``.
    public func key(for request: Request) throws -> String {
        try request.withCRequest(on: engine) { creq, _ in
            try call { handle in
                var out: UnsafeMutablePointer<CChar>?
                try CourierError.check(courier_cache_key(&out, handle, creq), "cache key")
                defer { courier_free(out) }
                return String(borrowedCString: out)
            }
        }
    }

    /// Whether the request has a fresh entry (for a custom policy: as its ``CustomCachePolicy/hasCache(_:now:)`` says).
    /// - Parameter request: The request.
    /// - Returns: Whether it has one.
    /// - Throws: ``CourierError`` (``CourierError/Code/store`` if the store cannot be used).
    public func has(_ request: Request) throws -> Bool {
        try request.withCRequest(on: engine) { creq, _ in
            try call { handle in
                var has: Int32 = 0
                var error = courier_error()
                let rc = courier_cache_has(&has, handle, creq, &error)
                if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
                return has != 0
            }
        }
    }

    /// The cached response of a request, marked from-cache, with its age and expiry; nil if none.
    /// - Parameters:
    ///   - request: The request.
    ///   - allowStale: Also return an entry past its expiry (``CacheStatus/stale``).
    /// - Returns: The response, or nil.
    /// - Throws: ``CourierError``.
    public func get(_ request: Request, allowStale: Bool = false) throws -> Response? {
        try request.withCRequest(on: engine) { creq, _ in
            try call { handle in
                var out: OpaquePointer?
                var error = courier_error()
                let rc = courier_cache_get(&out, handle, creq, allowStale ? COURIER_CACHE_ALLOW_STALE : 0, &error)
                if rc == COURIER_E_NOT_FOUND.rawValue { return nil }
                if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
                return out.map { Response(taking: $0) }
            }
        }
    }

    /// Removes a request's entry.
    /// - Parameter request: The request.
    /// - Returns: Whether there was one.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func remove(_ request: Request) throws -> Bool {
        try request.withCRequest(on: engine) { creq, _ in
            try call { handle in
                var error = courier_error()
                let rc = courier_cache_remove(handle, creq, &error)
                if rc == COURIER_E_NOT_FOUND.rawValue { return false }
                if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
                return true
            }
        }
    }

    // MARK: By key

    /// Whether a key has a fresh entry.
    /// - Parameter key: The key text (as listed, or as given to ``Request/cacheKey(_:)``).
    /// - Returns: Whether it has one.
    /// - Throws: ``CourierError``.
    public func has(key: String) throws -> Bool {
        try call { handle in
            var has: Int32 = 0
            var error = courier_error()
            let rc = key.withCString { courier_cache_has_key(&has, handle, $0, &error) }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return has != 0
        }
    }

    /// The entry of a key, or nil.
    /// - Parameters:
    ///   - key: The key text.
    ///   - allowStale: Also return an entry past its expiry.
    /// - Returns: The response, or nil.
    /// - Throws: ``CourierError``.
    public func get(key: String, allowStale: Bool = false) throws -> Response? {
        try call { handle in
            var out: OpaquePointer?
            var error = courier_error()
            // Explicit withCString: the implicit String-to-pointer conversion copies the key into a new
            // array first (String.utf8CString: an allocation and a copy per get).
            let rc = key.withCString { courier_cache_get_key(&out, handle, $0, allowStale ? COURIER_CACHE_ALLOW_STALE : 0, &error) }
            if rc == COURIER_E_NOT_FOUND.rawValue { return nil }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return out.map { Response(taking: $0) }
        }
    }

    /// Removes the entry of a key.
    /// - Parameter key: The key text.
    /// - Returns: Whether there was one.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func remove(key: String) throws -> Bool {
        try call { handle in
            var error = courier_error()
            let rc = key.withCString { courier_cache_remove_key(handle, $0, &error) }
            if rc == COURIER_E_NOT_FOUND.rawValue { return false }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return true
        }
    }

    /// Writes an entry under a key (one committed transaction).
    /// - Parameters:
    ///   - key: The key text.
    ///   - status: The HTTP status.
    ///   - headers: Header lines.
    ///   - body: The body.
    ///   - expiry: Freshness in whole seconds; nil for the engine's default.
    /// - Throws: ``CourierError``.
    public func put(key: String, status: Int = 200, headers: HTTPHeaders = [], body: Data, expiry: Int? = nil) throws {
        try call { handle in
            var error = courier_error()
            let rc = Self.withCHeaders(headers) { names, values in
                body.withUnsafeBytes { bytes -> Int32 in
                    var empty: UInt8 = 0
                    return withUnsafeMutablePointer(to: &empty) { emptyPointer in
                        key.withCString { key in
                            courier_cache_put_key(handle, key, Int32(status), names, values, headers.count,
                                                  bytes.baseAddress ?? UnsafeRawPointer(emptyPointer), bytes.count,
                                                  (Int64(expiry ?? 0)) * 1000, &error)
                        }
                    }
                }
            }
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
        }
    }

    /// Calls `body` with the header names and values as two arrays of C strings, all of them in
    /// one buffer ("name\0value\0"...): three allocations, none for no headers (it was one
    /// `strdup` per string plus four arrays).
    private static func withCHeaders<R>(
        _ headers: HTTPHeaders,
        _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) -> R {
        if headers.isEmpty { return body(nil, nil) }
        var text: [UInt8] = []
        text.reserveCapacity(headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 })
        for line in headers {
            text.append(contentsOf: line.name.utf8)
            text.append(0)
            text.append(contentsOf: line.value.utf8)
            text.append(0)
        }
        return text.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { base in
                var names = [UnsafePointer<CChar>?](repeating: nil, count: headers.count)
                var values = [UnsafePointer<CChar>?](repeating: nil, count: headers.count)
                var offset = 0
                for (i, line) in headers.enumerated() {
                    names[i] = base + offset
                    offset += line.name.utf8.count + 1
                    values[i] = base + offset
                    offset += line.value.utf8.count + 1
                }
                return names.withUnsafeBufferPointer { np in
                    values.withUnsafeBufferPointer { vp in body(np.baseAddress, vp.baseAddress) }
                }
            }
        }
    }

    // MARK: Clearing

    /// Removes every entry.
    /// - Returns: How many were removed.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func removeAll() throws -> Int {
        try call { handle in
            var n: Int64 = 0
            var error = courier_error()
            let rc = courier_cache_remove_all(&n, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(n)
        }
    }

    /// Removes the entries written at or after a date (on the cache's clock).
    /// - Parameter date: The date.
    /// - Returns: How many were removed.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func removeSince(_ date: Date) throws -> Int {
        try call { handle in
            var n: Int64 = 0
            var error = courier_error()
            let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
            let rc = courier_cache_remove_since(&n, handle, ms, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(n)
        }
    }

    /// Removes the entries past their use (a range scan of the expiry index).
    /// - Returns: How many were removed.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func removeExpired() throws -> Int {
        try call { handle in
            var n: Int64 = 0
            var error = courier_error()
            let rc = courier_cache_remove_expired(&n, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(n)
        }
    }

    // MARK: Inspecting

    /// The store's exact total bytes and entry count.
    /// - Returns: Bytes and count.
    /// - Throws: ``CourierError``.
    public func size() throws -> (bytes: Int64, count: Int64) {
        try call { handle in
            var bytes: Int64 = 0
            var count: Int64 = 0
            var error = courier_error()
            let rc = courier_cache_size(&bytes, &count, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return (bytes, count)
        }
    }

    /// The statistics.
    /// - Returns: The statistics.
    /// - Throws: ``CourierError``.
    public func stats() throws -> CacheStats {
        try call { handle in
            var s = courier_cache_stats()
            s.size = MemoryLayout<courier_cache_stats>.size
            var error = courier_error()
            let rc = courier_cache_get_stats(&s, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return CacheStats(hits: s.hits, misses: s.misses, writes: s.writes, evictions: s.evictions,
                              revalidations: s.revalidations, staleServed: s.stale_served,
                              writeFailures: s.write_failures, bytes: s.bytes, count: s.count, maxBytes: s.max_bytes)
        }
    }

    /// A snapshot of every entry.
    /// - Returns: The entries.
    /// - Throws: ``CourierError``.
    public func entries() throws -> [CacheEntry] {
        try call { handle in
            var list: OpaquePointer?
            var error = courier_error()
            let rc = courier_cache_list_entries(&list, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            defer { courier_cache_list_free(list) }
            let n = courier_cache_list_count(list)
            var out: [CacheEntry] = []
            out.reserveCapacity(n)
            for i in 0..<n {
                var info = courier_cache_entry_info()
                info.size = MemoryLayout<courier_cache_entry_info>.size
                guard courier_cache_list_at(&info, list, i)
                    == COURIER_OK.rawValue else { continue }
                out.append(CacheEntry(key: String(borrowedCString: info.key), url: String(borrowedCString: info.url),
                                      id: String(borrowedCString: info.id), status: Int(info.status), size: info.bytes,
                                      created: date(ms: info.created_ms), expires: date(ms: info.expires_ms)))
            }
            return out
        }
    }

    // MARK: User-defined policies

    /// Registers (or replaces) a user-defined policy under an id (>= ``CachePolicy/firstCustomID``).
    /// - Parameters:
    ///   - policy: The policy.
    ///   - id: Its id; requests name it with ``CachePolicy/custom(_:)``.
    /// - Throws: ``CourierError`` (``CourierError/Code/invalidArgument`` for a reserved id).
    public func register(_ policy: any CustomCachePolicy, id: Int) throws {
        try call { handle in
            var fns = courier_cache_policy_callbacks()
            fns.size = MemoryLayout<courier_cache_policy_callbacks>.size
            fns.has_cache = hasCacheTrampoline
            fns.answer_from_cache = answerTrampoline
            fns.should_write = writeTrampoline
            let user = Unmanaged.passRetained(PolicyBox(policy)).toOpaque()
            try CourierError.check(courier_engine_register_cache_policy(handle, Int32(clamping: id), &fns, user, releaseBox),
                                   "cache policy \(id)")
        }
    }

    /// Removes a user-defined policy; requests naming it then fail with ``CourierError/Code/invalidArgument``.
    /// - Parameter id: Its id.
    /// - Throws: ``CourierError``.
    public func unregister(id: Int) throws {
        try call { handle in
            try CourierError.check(courier_engine_register_cache_policy(handle, Int32(clamping: id), nil, nil, nil),
                                   "cache policy \(id)")
        }
    }
}
