// ConnectionPool.swift — the connection pool's figures (courier_pool_get_figures): per engine and by
// host, the connections open, idle and in use now, made and reused since the engine opened. The C
// core counts them (pool.c); this file copies its snapshot into Swift values.

internal import CCore

/// The connections of one host in the engine's pool, or of all of them (`courier_pool_host`).
///
/// A connection counts from the moment a request is about to go on it (after its connect and TLS
/// handshake) until it is closed: by the server, by the pool's limits
/// (``Configuration/maxIdleConnections``), or past ``Configuration/idleConnectionTimeout`` when the
/// engine next looks for a connection. WebSockets' connections are not counted.
public struct PoolHost: Sendable, Hashable {
    /// "scheme://host:port" as the URLs name the host; nil in ``PoolFigures/total``.
    public var host: String?
    /// Connections open now: ``idle`` + ``inUse``.
    public var open: Int
    /// Open connections with no request on them, kept for reuse.
    public var idle: Int
    /// Open connections with a request on them (over HTTP/2, one or more).
    public var inUse: Int
    /// Connections made since the engine opened.
    public var opened: Int
    /// Requests sent on a connection already open, since the engine opened.
    public var reused: Int

    /// Figures; every count defaults to 0.
    /// - Parameters:
    ///   - host: The host ("scheme://host:port"), nil for a total.
    ///   - open: Connections open.
    ///   - idle: Of them, idle.
    ///   - inUse: Of them, carrying a request.
    ///   - opened: Connections made.
    ///   - reused: Requests sent on a connection already open.
    public init(host: String? = nil, open: Int = 0, idle: Int = 0, inUse: Int = 0, opened: Int = 0, reused: Int = 0) {
        self.host = host
        self.open = open
        self.idle = idle
        self.inUse = inUse
        self.opened = opened
        self.reused = reused
    }

    init(_ h: courier_pool_host) {
        self.init(host: h.host.map { String(cString: $0) }, open: Int(h.open), idle: Int(h.idle), inUse: Int(h.in_use),
                  opened: Int(h.opened), reused: Int(h.reused))
    }
}

/// A snapshot of the engine's connection pool (``Engine/poolFigures()``), taken at once.
public struct PoolFigures: Sendable, Hashable {
    /// The sums over every host.
    public var total: PoolHost
    /// One entry per host the engine made a connection to since it opened, in the order they came
    /// (hosts with no connection open stay, with their totals).
    public var hosts: [PoolHost]

    /// The figures of one host.
    /// - Parameter host: "scheme://host:port" ("http://127.0.0.1:8080", "https://example.com:443").
    /// - Returns: Its figures, or nil when the engine never made a connection to it.
    public subscript(host: String) -> PoolHost? { hosts.first { $0.host == host } }
}

extension Engine {
    // MARK: The connection pool

    /// The connection pool's figures now: open, idle and in use, made and reused, by host and in
    /// all. Any thread; cheap (a short lock the worker takes once per request).
    /// - Returns: The snapshot.
    /// - Throws: ``CourierError/Code/closed`` once the engine is closed, ``CourierError/Code/noMemory``.
    public func poolFigures() throws -> PoolFigures {
        guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { leave() }
        var created: OpaquePointer?
        try CourierError.check(courier_pool_get_figures(&created, handle), "poolFigures")
        defer { courier_pool_figures_free(created) }
        var total = courier_pool_host()
        total.size = MemoryLayout<courier_pool_host>.size
        try CourierError.check(courier_pool_figures_total(&total, created), "poolFigures")
        var hosts: [PoolHost] = []
        let n = courier_pool_figures_count(created)
        hosts.reserveCapacity(n)
        for i in 0..<n {
            var h = courier_pool_host()
            h.size = MemoryLayout<courier_pool_host>.size
            try CourierError.check(courier_pool_figures_at(&h, created, i), "poolFigures")
            hosts.append(PoolHost(h))
        }
        return PoolFigures(total: PoolHost(total), hosts: hosts)
    }
}
