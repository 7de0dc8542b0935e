// RequestTracing.swift — a client span per request of an engine, through swift-distributed-tracing,
// with OpenTelemetry's HTTP client semantic conventions. It only translates: the C core gives an
// interceptor the send's id before the send's first event, carries the trace context on every
// attempt, redirect hop and resend of a frozen request, and tells the resend count and error type
// in its events (docs/design/tracing.md).
// Built with the trait Tracing on (Package.swift); without it the module is empty.

#if Tracing
import Courier
import Foundation
import Tracing

// MARK: - RequestTracing

/// Traces every request of an engine: one span of kind `client` per send, from the moment it is
/// handed to the engine until it finishes.
///
/// - The span starts in ``adapt(_:)``, on the sending thread inside the send, as a child of the
///   task's `ServiceContext` (`ServiceContext.current`); the tracer's `inject` then writes its
///   context into the request's header lines (W3C `traceparent` and `tracestate` for an
///   OpenTelemetry tracer), which the engine sends on every attempt. With no current context
///   (a frozen request resent by the journal's thread), the context the request carries (its
///   header lines, stored with it when it was frozen) is extracted and is the parent, so the
///   resend is in the trace it was frozen in.
/// - Attributes at the start: `http.request.method` (`_OTHER` for a method outside RFC 9110's,
///   with `http.request.method_original`), `url.full` (user information replaced by
///   `REDACTED`), `server.address`, `server.port`.
/// - Span events: `courier.retry` for each retry (`courier.attempt`, the attempt about to start;
///   `courier.retry.delay_ms`; `http.response.status_code` when a response failed it) and
///   `courier.redirect` for each redirect followed (`url.full` of the next hop,
///   `http.response.status_code` the 3xx, `courier.redirect.number`); `courier.cache_hit` true
///   when the cache answered.
/// - At the end: `http.response.status_code`, `http.request.resend_count` (retries and redirects,
///   when there were any) and, for a failure, `error.type` (the status as text, "503", when a
///   status failed it, else the C core's name of the code: "timeout", "cannot_connect", "frozen")
///   with the span's status `error`.
///
/// ```swift
/// let tracing = RequestTracing()          // InstrumentationSystem.tracer
/// var configuration = Configuration(baseURL: "https://api.example.com")
/// configuration.addTracing(tracing)
/// let engine = try Engine(configuration: configuration)
/// ```
///
/// A send the engine refuses after its interceptors ran (a custom transport not registered, a
/// later interceptor throwing, the frequent-request guard) ends its span at once, inside the send
/// before it throws: the C core gives it a `finished` event with the refusal's
/// `error.type` ("not_found") and no status.
///
/// A WebSocket's opening handshake is a send too (`Engine.webSocket`): its span ends when the
/// handshake does, before `webSocket` returns or throws, with `http.response.status_code` 101,
/// or the failure's `error.type` ("ws_handshake", with the refusing status when there was one).
/// The messages and the closing handshake are not in it.
public final class RequestTracing: Interceptor, EventMonitor, @unchecked Sendable {
    // @unchecked Sendable: the closures are Sendable and `spans` is only touched under `lock`.
    private let start: @Sendable (_ name: String, _ parent: ServiceContext) -> any Span
    private let inject: @Sendable (_ context: ServiceContext) -> [String: String]
    private let extract: @Sendable (_ headers: [String: String]) -> ServiceContext?
    private let lock = NSLock()
    private var spans: [RequestID: any Span] = [:]

    /// Traces with the tracer bootstrapped in `InstrumentationSystem`.
    public convenience init() {
        self.init(tracer: InstrumentationSystem.tracer)
    }

    /// Traces with a tracer of your own.
    /// - Parameter tracer: Starts the spans, and injects and extracts their context.
    public init<T: Tracer>(tracer: T) {
        start = { name, parent in tracer.startSpan(name, context: parent, ofKind: .client) }
        inject = { context in
            var carrier: [String: String] = [:]
            tracer.inject(context, into: &carrier, using: DictionaryInjector())
            return carrier
        }
        extract = { headers in
            var context = ServiceContext.topLevel
            tracer.extract(headers, into: &context, using: DictionaryExtractor())
            return context
        }
    }

    /// The requests in flight that have a span (started, not yet finished).
    public var activeCount: Int { lock.withLock { spans.count } }

    // MARK: Interceptor

    /// Starts the request's span and injects its context into the request's header lines.
    /// Telemetry never fails a send: nothing here throws.
    /// - Parameter request: The outgoing request.
    public func adapt(_ request: inout OutgoingRequest) throws {
        let id = request.requestID
        guard id.rawValue != 0 else { return }
        let parent: ServiceContext
        if let current = ServiceContext.current {
            parent = current
        } else {
            // The journal's thread resending a frozen request: the context it was frozen under.
            var carried: [String: String] = [:]
            for line in request.headers { carried[line.name.lowercased()] = line.value }
            parent = extract(carried) ?? .topLevel
        }
        let method = request.method
        let known = Self.knownMethods.contains(method)
        let span = start(known ? method : "HTTP", parent)
        span.updateAttributes { attributes in
            attributes["http.request.method"] = known ? method : "_OTHER"
            if !known { attributes["http.request.method_original"] = method }
            let url = request.url
            attributes["url.full"] = Self.redacted(url)
            if let components = URLComponents(string: url) {
                attributes["server.address"] = components.host ?? ""
                attributes["server.port"] = components.port ?? (components.scheme == "https" ? 443 : 80)
            }
        }
        for (name, value) in inject(span.context) {
            try? request.setHeader(name, value)
        }
        lock.withLock { spans[id] = span }
    }

    // MARK: EventMonitor

    /// Retries, redirects, cache answers and the end.
    public var monitoredEvents: Set<RequestEvent.Kind> { [.retried, .redirected, .fromCache, .finished] }

    /// Adds a `courier.retry` event.
    /// - Parameter event: The event.
    public func requestWillRetry(_ event: RequestEvent) {
        guard let span = span(of: event.requestID) else { return }
        var attributes: SpanAttributes = [:]
        attributes["courier.attempt"] = event.attempt ?? 0
        attributes["courier.retry.delay_ms"] = Int(((event.retryDelay ?? 0) * 1000).rounded())
        if let status = event.status { attributes["http.response.status_code"] = status }
        span.addEvent(SpanEvent(name: "courier.retry", attributes: attributes))
    }

    /// Adds a `courier.redirect` event.
    /// - Parameter event: The event.
    public func requestWasRedirected(_ event: RequestEvent) {
        guard let span = span(of: event.requestID) else { return }
        var attributes: SpanAttributes = [:]
        attributes["url.full"] = Self.redacted(event.url ?? "")
        attributes["http.response.status_code"] = event.status ?? 0
        attributes["courier.redirect.number"] = event.attempt ?? 0
        span.addEvent(SpanEvent(name: "courier.redirect", attributes: attributes))
    }

    /// Marks the span as answered by the cache.
    /// - Parameter event: The event.
    public func requestDidLoadFromCache(_ event: RequestEvent) {
        span(of: event.requestID)?.attributes["courier.cache_hit"] = true
    }

    /// Ends the span.
    /// - Parameter event: The event.
    public func requestDidFinish(_ event: RequestEvent) {
        guard let span = lock.withLock({ spans.removeValue(forKey: event.requestID) }) else { return }
        span.updateAttributes { attributes in
            if let status = event.status { attributes["http.response.status_code"] = status }
            if let resends = event.resendCount, resends > 0 { attributes["http.request.resend_count"] = resends }
            if let errorType = event.errorType { attributes["error.type"] = errorType }
        }
        if event.errorType != nil { span.setStatus(SpanStatus(code: .error)) }
        span.end()
    }

    // MARK: Helpers

    private func span(of id: RequestID) -> (any Span)? { lock.withLock { spans[id] } }

    static let knownMethods: Set<String> = ["CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"]

    /// The URL with user information replaced by `REDACTED:REDACTED` (the semantic conventions' rule).
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.user != nil || components.password != nil else {
            return url
        }
        components.user = "REDACTED"
        components.password = components.password == nil ? nil : "REDACTED"
        return components.string ?? url
    }
}

// MARK: - Configuration

/// Tracing an engine's requests from its configuration.
extension Configuration {
    /// Traces every request of engines opened with this configuration: adds `tracing` as an
    /// interceptor (`Configuration.interceptors`, where its span starts and its context is
    /// injected) and as an event monitor (`Configuration.eventMonitors`, where the span gets
    /// its events and ends).
    /// - Parameter tracing: The tracing.
    public mutating func addTracing(_ tracing: RequestTracing) {
        interceptors.append(tracing)
        eventMonitors.append(tracing)
    }
}

// MARK: - Carriers

/// Writes a tracer's context into a dictionary of header lines.
struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}

/// Reads a tracer's context from header lines (names lowercased).
struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? {
        carrier[key.lowercased()]
    }
}

#endif // Tracing
