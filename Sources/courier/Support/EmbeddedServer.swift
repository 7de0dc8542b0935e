// EmbeddedServer.swift — the loopback test server (CourierTestServer, in C) as a Swift object.
import CourierTestServer
import Foundation

/// A running test server on 127.0.0.1; stop it with `stop()` (also run by deinit).
final class EmbeddedServer: @unchecked Sendable {  // cts_server is thread-safe; stop runs once under `lock`
    /// The port it listens on.
    let port: Int
    /// "http://127.0.0.1:PORT".
    let baseURL: String

    private let lock = NSLock()
    private var server: OpaquePointer?

    /// Starts the server.
    /// - Parameters:
    ///   - host: a numeric address or a name.
    ///   - port: 0 for a free port.
    /// - Throws: `ValidationError`-like message when it cannot listen.
    init(host: String = "127.0.0.1", port: Int = 0) throws {
        var server: OpaquePointer?
        let rc = cts_server_start(&server, host, Int32(port))
        guard rc == 0, let server else {
            throw ServerStartError(message: "cannot listen on \(host):\(port): \(String(cString: strerror(-rc)))")
        }
        self.server = server
        self.port = Int(cts_server_port(server))
        self.baseURL = "http://\(host.contains(":") ? "[\(host)]" : host):\(self.port)"
    }

    deinit { stop() }

    /// Requests and connections the server has seen.
    var counts: (requests: Int, connections: Int) {
        lock.lock()
        defer { lock.unlock() }
        guard let server else { return (0, 0) }
        return (cts_server_request_count(server), cts_server_connection_count(server))
    }

    /// Requests the server has seen for one path (query left out).
    func path(_ path: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        guard let server else { return 0 }
        return cts_server_path_count(server, path)
    }

    /// Stops the server and closes its connections (idempotent).
    func stop() {
        lock.lock()
        let server = self.server
        self.server = nil
        lock.unlock()
        if let server { cts_server_stop(server) }
    }
}

/// The test server could not start.
struct ServerStartError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
