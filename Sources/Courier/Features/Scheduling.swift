// Scheduling.swift — the C core's scheduling, as request and configuration settings: priorities
// under the connection limits, retry with backoff and Retry-After, coalescing of identical GETs,
// and HLNetworking's frequent-request guard. The C core decides everything; this file only
// hands the settings over.

internal import CCore

// MARK: - Priority

/// Which waiting request starts first when the engine's connection limits hold requests back.
/// Equal priorities start in the order they were sent.
public enum Priority: Sendable, Hashable {
    /// Starts after every normal and high request waiting.
    case low
    /// The default.
    case normal
    /// Starts before every normal and low request waiting.
    case high

    var cValue: courier_priority {
        switch self {
        case .low: return COURIER_PRIORITY_LOW
        case .normal: return COURIER_PRIORITY_NORMAL
        case .high: return COURIER_PRIORITY_HIGH
        }
    }
}

// MARK: - RetryPolicy

/// When and how a failed request is sent again. Attempt n waits `baseDelay * 2^(n-1)`, capped at
/// `maxDelay`, with jitter (between half and all of it); a server's Retry-After (429, 503) is
/// honoured when it is at most `maxDelay`. Retried: network failures (cannot resolve, cannot
/// connect, timeout, partial response, network) and HTTP 408, 429 and 5xx, for idempotent methods
/// only unless ``nonIdempotent``. Never after a cancel, a TLS or pinning failure, a
/// validator's "no" or a body too large. (The C core decides all of this.)
public struct RetryPolicy: Sendable, Hashable {
    /// Further attempts after the first (0: no retry).
    public var maxRetries: Int
    /// The first wait, in seconds (>= 0).
    public var baseDelay: Double
    /// The longest wait, in seconds (>= baseDelay).
    public var maxDelay: Double
    /// Whether POST, PATCH and other non-idempotent methods are retried too
    /// (`COURIER_RETRY_NON_IDEMPOTENT`). Default false.
    public var nonIdempotent: Bool
    /// Whether a server's Retry-After is not waited for (`COURIER_RETRY_IGNORE_RETRY_AFTER`).
    /// Default false.
    public var ignoreRetryAfter: Bool

    /// Deprecated name of ``nonIdempotent``.
    @available(*, deprecated, renamed: "nonIdempotent")
    public var retriesNonIdempotent: Bool {
        get { nonIdempotent }
        set { nonIdempotent = newValue }
    }
    /// Deprecated: `!ignoreRetryAfter`.
    @available(*, deprecated, message: "use !ignoreRetryAfter")
    public var honorsRetryAfter: Bool {
        get { !ignoreRetryAfter }
        set { ignoreRetryAfter = !newValue }
    }

    /// The C core's default first wait, in seconds (0.5; `COURIER_SETTING_RETRY_BASE_DELAY_MS`).
    public static var defaultBaseDelay: Double { CoreDefaults.seconds(COURIER_SETTING_RETRY_BASE_DELAY_MS) }
    /// The C core's default longest wait, in seconds (30; `COURIER_SETTING_RETRY_MAX_DELAY_MS`).
    public static var defaultMaxDelay: Double { CoreDefaults.seconds(COURIER_SETTING_RETRY_MAX_DELAY_MS) }
    /// The C core's default count of further attempts (3; `COURIER_SETTING_RETRY_MAX_RETRIES`),
    /// what Python's `Retry()` uses.
    public static var defaultMaxRetries: Int { Int(CoreDefaults.value(COURIER_SETTING_RETRY_MAX_RETRIES)) }

    /// A retry rule.
    /// - Parameters:
    ///   - maxRetries: Further attempts after the first.
    ///   - baseDelay: The first wait, in seconds. Default ``defaultBaseDelay`` (the C core's).
    ///   - maxDelay: The longest wait, in seconds. Default ``defaultMaxDelay`` (the C core's).
    ///   - nonIdempotent: Also retry non-idempotent methods. Default false.
    ///   - ignoreRetryAfter: Do not wait for a server's Retry-After. Default false.
    public init(maxRetries: Int, baseDelay: Double = RetryPolicy.defaultBaseDelay, maxDelay: Double = RetryPolicy.defaultMaxDelay, nonIdempotent: Bool = false,
                ignoreRetryAfter: Bool = false) {
        self.maxRetries = maxRetries
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.nonIdempotent = nonIdempotent
        self.ignoreRetryAfter = ignoreRetryAfter
    }

    /// Deprecated spelling of ``init(maxRetries:baseDelay:maxDelay:nonIdempotent:ignoreRetryAfter:)``.
    /// - Parameters:
    ///   - maxRetries: Further attempts after the first.
    ///   - baseDelay: The first wait, in seconds.
    ///   - maxDelay: The longest wait, in seconds.
    ///   - retriesNonIdempotent: Also retry non-idempotent methods.
    ///   - honorsRetryAfter: Wait for a server's Retry-After.
    @available(*, deprecated, renamed: "init(maxRetries:baseDelay:maxDelay:nonIdempotent:ignoreRetryAfter:)")
    public init(maxRetries: Int, baseDelay: Double = RetryPolicy.defaultBaseDelay, maxDelay: Double = RetryPolicy.defaultMaxDelay, retriesNonIdempotent: Bool,
                honorsRetryAfter: Bool = true) {
        self.init(maxRetries: maxRetries, baseDelay: baseDelay, maxDelay: maxDelay, nonIdempotent: retriesNonIdempotent,
                  ignoreRetryAfter: !honorsRetryAfter)
    }

    /// Deprecated spelling of ``init(maxRetries:baseDelay:maxDelay:nonIdempotent:ignoreRetryAfter:)``.
    /// - Parameters:
    ///   - maxRetries: Further attempts after the first.
    ///   - baseDelay: The first wait, in seconds.
    ///   - maxDelay: The longest wait, in seconds.
    ///   - honorsRetryAfter: Wait for a server's Retry-After.
    @available(*, deprecated, renamed: "init(maxRetries:baseDelay:maxDelay:nonIdempotent:ignoreRetryAfter:)")
    public init(maxRetries: Int, baseDelay: Double = RetryPolicy.defaultBaseDelay, maxDelay: Double = RetryPolicy.defaultMaxDelay, honorsRetryAfter: Bool) {
        self.init(maxRetries: maxRetries, baseDelay: baseDelay, maxDelay: maxDelay, ignoreRetryAfter: !honorsRetryAfter)
    }

    /// No retries (the engine's default).
    public static let disabled = RetryPolicy(maxRetries: 0)

    /// At most `count` further attempts, with the C core's default backoff (0.5 s doubling to 30 s) and
    /// Retry-After honoured: `engine.send(request, retry: .times(3))`.
    /// - Parameter count: Further attempts after the first.
    /// - Returns: The rule.
    public static func times(_ count: Int) -> RetryPolicy { RetryPolicy(maxRetries: count) }

    /// Hands the rule to a C setter with its arguments converted.
    func withCArguments(_ body: (Int32, Int64, Int64, UInt32) -> Int32) -> Int32 {
        let flags = (nonIdempotent ? COURIER_RETRY_NON_IDEMPOTENT : 0)
            | (ignoreRetryAfter ? COURIER_RETRY_IGNORE_RETRY_AFTER : 0)
        return body(Int32(clamping: maxRetries), RetryPolicy.milliseconds(baseDelay), RetryPolicy.milliseconds(maxDelay),
                    UInt32(flags))
    }

    /// Seconds to milliseconds; negative or not-a-number values stay negative, so the C core refuses them.
    static func milliseconds(_ seconds: Double) -> Int64 {
        guard seconds >= 0 else { return -1 }
        guard seconds.isFinite else { return Int64.max / 2 }
        return Int64(min((seconds * 1000).rounded(), Double(Int64.max / 2)))
    }
}

// MARK: - Request settings

extension Request {
    /// The priority of this request while it waits for a connection.
    /// - Parameter priority: Low, normal (the default) or high.
    /// - Returns: The changed request.
    public func priority(_ priority: Priority) -> Request { adding(PriorityOption(priority: priority)) }

    /// A retry rule for this request, replacing the engine's.
    /// - Parameter policy: The rule; ``RetryPolicy/disabled`` turns retrying off.
    /// - Returns: The changed request.
    public func retry(_ policy: RetryPolicy) -> Request { adding(RetryOption(policy: policy)) }

    /// Whether this GET or HEAD may share one network request with identical ones in flight
    /// (same URL and header lines; each caller still gets its own response). On by default.
    /// - Parameter coalesce: false to always send this request on its own.
    /// - Returns: The changed request.
    public func coalesce(_ coalesce: Bool) -> Request { adding(CoalesceOption(coalesce: coalesce)) }

    /// Whether the engine's frequent-request guard applies to this request (the default) or
    /// exempts it (it is then neither refused nor recorded).
    /// - Parameter guarded: false to exempt the request.
    /// - Returns: The changed request.
    public func frequentGuard(_ guarded: Bool) -> Request { adding(FrequentGuardOption(guarded: guarded)) }
}

struct PriorityOption: RequestOption {
    let priority: Priority
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_priority(request, priority.cValue), "priority")
    }
}

struct RetryOption: RequestOption {
    let policy: RetryPolicy
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(policy.withCArguments { courier_request_set_retry(request, $0, $1, $2, $3) }, "retry")
    }
}

struct CoalesceOption: RequestOption {
    let coalesce: Bool
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_coalesce(request, coalesce ? 1 : 0), "coalesce")
    }
}

struct FrequentGuardOption: RequestOption {
    let guarded: Bool
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_frequent_guard(request, guarded ? 1 : 0), "frequentGuard")
    }
}

// MARK: - What the schedule did

extension Response {
    /// How many attempts the response took (1 without retries); 1 for responses made in Swift.
    public var attempts: Int {
        guard let storage else { return 1 }
        var attempts: Int32 = 1
        _ = courier_response_attempts(&attempts, nil, storage.pointer)
        return Int(attempts)
    }

    /// The total time the engine chose to wait between attempts, in seconds (backoff and
    /// Retry-After; computed, not measured); 0 for responses made in Swift.
    public var retryWait: Double {
        guard let storage else { return 0 }
        var waited: Int64 = 0
        _ = courier_response_attempts(nil, &waited, storage.pointer)
        return Double(waited) / 1000
    }
}

// MARK: - Sending with a retry rule

extension Engine {
    /// Sends a request with a retry rule (HTNetworking's signalStartWithRetry:): the same as
    /// `send(request.retry(rule))`; the C core decides which failures are retried and when.
    /// - Parameters:
    ///   - request: The request.
    ///   - rule: The retry rule, e.g. `.times(3)`.
    /// - Returns: The response of the last attempt.
    /// - Throws: ``CourierError`` as ``send(_:)-(Request)``.
    public func send(_ request: Request, retry rule: RetryPolicy) async throws -> Response {
        try await send(request.retry(rule))
    }
}
