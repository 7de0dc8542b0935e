// Metrics.swift — timing and size of one transfer, as the C core measured it.

internal import CCore

// MARK: - Metrics

/// Timing and size of one transfer. Times are seconds from the start of the transfer; a phase
/// that did not happen is 0 (DNS and connect on a reused connection, TLS on plain http).
public struct Metrics: Sendable, Equatable {
    /// Name resolution done.
    public var dns: Double
    /// TCP connected.
    public var connect: Double
    /// TLS handshake done (0 for http).
    public var tls: Double
    /// First response byte received.
    public var firstByte: Double
    /// Transfer done.
    public var total: Double
    /// Request headers and body sent, in bytes.
    public var bytesSent: Int64
    /// Response headers and body received, in bytes.
    public var bytesReceived: Int64
    /// Whether the transfer reused a connection (no new connection was made).
    public var connectionReused: Bool
    /// The HTTP version used: 10, 11, 20, 30, or 0 when unknown.
    public var httpVersion: Int
    /// Redirects followed.
    public var redirects: Int
    /// The address the connection reached ("" for a Unix socket, a mock, a cache hit, or a failure
    /// before connecting); IPv6 without brackets.
    public var remoteIP: String
    /// Its port (0 when ``remoteIP`` is "").
    public var remotePort: Int

    /// Creates metrics (for mocks and tests; the engine fills them for real transfers).
    /// - Parameters:
    ///   - dns: Seconds to name resolution.
    ///   - connect: Seconds to TCP connected.
    ///   - tls: Seconds to TLS done.
    ///   - firstByte: Seconds to the first response byte.
    ///   - total: Seconds to the end of the transfer.
    ///   - bytesSent: Bytes sent.
    ///   - bytesReceived: Bytes received.
    ///   - connectionReused: Whether a connection was reused.
    ///   - httpVersion: 10, 11, 20, 30 or 0.
    ///   - redirects: Redirects followed.
    ///   - remoteIP: The address reached.
    ///   - remotePort: Its port.
    public init(dns: Double = 0, connect: Double = 0, tls: Double = 0, firstByte: Double = 0, total: Double = 0,
                bytesSent: Int64 = 0, bytesReceived: Int64 = 0, connectionReused: Bool = false,
                httpVersion: Int = 0, redirects: Int = 0, remoteIP: String = "", remotePort: Int = 0) {
        self.dns = dns
        self.connect = connect
        self.tls = tls
        self.firstByte = firstByte
        self.total = total
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.connectionReused = connectionReused
        self.httpVersion = httpVersion
        self.redirects = redirects
        self.remoteIP = remoteIP
        self.remotePort = remotePort
    }

    /// The metrics of a C response.
    /// - Parameter response: A `courier_response *`, borrowed for the call.
    init(response: OpaquePointer) {
        var m = courier_metrics()
        m.size = MemoryLayout<courier_metrics>.size
        _ = courier_response_metrics(&m, response)
        self.init(dns: m.dns_s, connect: m.connect_s, tls: m.tls_s, firstByte: m.first_byte_s, total: m.total_s,
                  bytesSent: m.bytes_sent, bytesReceived: m.bytes_received, connectionReused: m.connection_reused != 0,
                  httpVersion: Int(m.http_version), redirects: Int(m.redirects),
                  remoteIP: withUnsafeBytes(of: m.remote_ip) { raw in
                      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                  },
                  remotePort: Int(m.remote_port))
    }
}
