// TraceContext.swift — a request's W3C trace context (the C core's
// courier_request_set_trace_context), the send's id as an interceptor sees it, and event monitors
// a configuration carries. What CourierTracing and CourierMetrics build on; the checking and the
// sending of the context (on every attempt, redirect hop and resend of a frozen request) are the
// C core's (docs/design/tracing.md).

internal import CCore

// MARK: - The trace context of a request

extension Request {
    /// Sends the request in a W3C trace context: its `traceparent` header line (and `tracestate`,
    /// if given) replace any of those names. They go out on every attempt, redirect hop and resend
    /// of a frozen request (the journal stores them with the request's header lines), and events
    /// carry them (``RequestEvent/traceParent``). An interceptor may still replace them (a
    /// tracer's client span: CourierTracing).
    /// - Parameters:
    ///   - traceparent: Version 00's form, `00-<32 hex>-<16 hex>-<2 hex>` in lowercase, neither id
    ///     all zeros.
    ///   - tracestate: At most 512 characters of visible ASCII, or nil.
    /// - Returns: The changed request; a malformed value fails its send with
    ///   ``CourierError/Code/invalidArgument``.
    public func traceContext(traceparent: String, tracestate: String? = nil) -> Request {
        adding(TraceContextOption(traceparent: traceparent, tracestate: tracestate))
    }
}

struct TraceContextOption: RequestOption {
    let traceparent: String
    let tracestate: String?
    func apply(to request: OpaquePointer) throws {
        try withOptionalCString(tracestate) { state in
            try CourierError.check(courier_request_set_trace_context(request, traceparent, state), "trace context")
        }
    }
}

extension OutgoingRequest {
    /// The id of the send this request belongs to: the id its events carry
    /// (``RequestEvent/requestID``). In an interceptor's ``Interceptor/adapt(_:)`` it is known
    /// before the send's first event; in a customize hook it is zero.
    public var requestID: RequestID {
        guard let pointer = handle.pointer else { return RequestID(rawValue: 0) }
        return RequestID(rawValue: courier_outgoing_request_id(pointer))
    }
}

// MARK: - Monitors carried by a configuration

extension Configuration {
    /// Event monitors added to every engine opened with this configuration, when it opens, in
    /// this order (as ``Engine/addEventMonitor(_:)-(EventMonitor)`` would add them). Setting
    /// replaces them all.
    public var eventMonitors: [any EventMonitor] {
        get { options.compactMap { ($0 as? EventMonitorOption)?.monitor } }
        set {
            options.removeAll { $0 is EventMonitorOption }
            options.append(contentsOf: newValue.map { EventMonitorOption(monitor: $0) as any ConfigurationOption })
        }
    }
}

/// A monitor kept in the configuration; nothing of it goes into the C configuration (the engine
/// adds it once open: ``Engine/init(configuration:)``).
struct EventMonitorOption: ConfigurationOption {
    let monitor: any EventMonitor
    func apply(to config: OpaquePointer) throws {}
}
