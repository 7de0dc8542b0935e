// RequestMetrics.swift — an engine's requests counted and timed through swift-metrics, from the C
// core's request events and its frozen-request events (docs/design/tracing.md, "Swift:
// CourierTracing and CourierMetrics"). It only translates: what a status class, a cache hit or a
// resend is, the engine's events already say.
// Built with the trait Metrics on (Package.swift); without it the module is empty.

#if Metrics
import CoreMetrics
import Courier

// MARK: - RequestMetrics

/// Counts and times the requests of an engine through swift-metrics.
///
/// | Metric | Kind | Dimensions | When |
/// | --- | --- | --- | --- |
/// | `courier.requests` | counter | `status_class` (`1xx`...`5xx`, or `error` when no response came), `method` | each send finishes, or is refused after the interceptors ran (`error`) |
/// | `courier.request.duration` | timer | `status_class`, `method` | each send finishes: from the send to its end (none for a refused send) |
/// | `courier.cache.hits` | counter | | the cache answers a send (no network) |
/// | `courier.cache.misses` | counter | | a cache policy looked and the network answered (`miss`, `vary-miss`, `stale-refetched`) |
/// | `courier.frozen.queued` | counter | | a request is written to the journal |
/// | `courier.frozen.replayed` | counter | `outcome` (`succeeded` or `failed`) | a resend of a frozen request is answered |
///
/// A WebSocket's opening handshake is a send: it counts in `courier.requests` and
/// `courier.request.duration` when it ends, `status_class` `1xx` for one that opened (the 101),
/// the refusing status's class or `error` for one that did not.
///
/// ```swift
/// let engine = try Engine(configuration: Configuration(baseURL: "https://api.example.com"))
/// try RequestMetrics().attach(to: engine)   // MetricsSystem.factory
/// ```
public final class RequestMetrics: EventMonitor, Sendable {
    private let factory: any MetricsFactory
    private let cacheHits: Counter
    private let cacheMisses: Counter
    private let frozenQueued: Counter
    private let replaySucceeded: Counter
    private let replayFailed: Counter

    /// Metrics made by a factory.
    /// - Parameter factory: The factory (the one bootstrapped in `MetricsSystem` if omitted).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        cacheHits = Counter(label: "courier.cache.hits", factory: factory)
        cacheMisses = Counter(label: "courier.cache.misses", factory: factory)
        frozenQueued = Counter(label: "courier.frozen.queued", factory: factory)
        replaySucceeded = Counter(label: "courier.frozen.replayed", dimensions: [("outcome", "succeeded")], factory: factory)
        replayFailed = Counter(label: "courier.frozen.replayed", dimensions: [("outcome", "failed")], factory: factory)
    }

    /// Starts counting an engine's requests: adds this as an event monitor of the engine, and an
    /// observer of its frozen requests' resends. Attach it to several engines to add them up.
    /// - Parameter engine: An open engine.
    /// - Throws: `CourierError` when the engine is closed.
    public func attach(to engine: Engine) throws {
        try engine.addEventMonitor(self)
        try engine.frozen.addObserver(for: [.resentSucceeded, .resentFailed]) { [self] event in
            (event.kind == .resentSucceeded ? replaySucceeded : replayFailed).increment()
        }
    }

    // MARK: EventMonitor

    /// The ends of sends, cache answers and freezes.
    public var monitoredEvents: Set<RequestEvent.Kind> { [.finished, .fromCache, .frozen] }

    /// Counts and times the send; counts a cache miss.
    /// - Parameter event: The event.
    public func requestDidFinish(_ event: RequestEvent) {
        let statusClass = event.status.map { "\($0 / 100)xx" } ?? "error"
        let method = event.method.map { Self.knownMethods.contains($0) ? $0 : "_OTHER" } ?? "_OTHER"
        let dimensions = [("status_class", statusClass), ("method", method)]
        Counter(label: "courier.requests", dimensions: dimensions, factory: factory).increment()
        if let duration = event.duration {
            Timer(label: "courier.request.duration", dimensions: dimensions, factory: factory)
                .recordNanoseconds(Int64((duration * 1e9).rounded()))
        }
        switch event.response?.cacheReason {
        case .miss?, .varyMiss?, .staleRefetched?: cacheMisses.increment()
        default: break
        }
    }

    /// Counts a cache hit.
    /// - Parameter event: The event.
    public func requestDidLoadFromCache(_ event: RequestEvent) { cacheHits.increment() }

    /// Counts a request written to the journal.
    /// - Parameter event: The event.
    public func requestWasFrozen(_ event: RequestEvent) { frozenQueued.increment() }

    static let knownMethods: Set<String> = ["CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"]
}

#endif // Metrics
