// BenchServer.swift — the one local server a transport benchmark measures against: nginx started
// with a generated configuration in a temporary directory, or the embedded test server when nginx
// is missing or will not start, or a server the user names with --url.
import CBench
import CourierSignals
import CourierTestServer
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A running benchmark server and how to stop it.
public final class BenchServer: @unchecked Sendable {  // `stop` is guarded by `lock`; the rest is immutable
    /// Which server answers.
    public enum Kind: String, Sendable {
        case nginx
        case testServer = "test-server"
        case external
    }

    /// What kind of server this is.
    public let kind: Kind
    /// The URL of the 1 KiB resource the clients fetch.
    public let url: String
    /// A human description ("nginx 1.22.1 (pid 123)").
    public let description: String
    /// The TLS server's files (scripts/tls-fixture), when it serves HTTPS; nil for plain HTTP.
    public let tls: TLSFiles?

    /// What a TLS benchmark server made for the run (scripts/tls-fixture) and where it reports.
    public struct TLSFiles: Sendable {
        /// The CA the server's certificate is signed by: every client is given it.
        public let caFile: String
        /// nginx's stub_status (TCP connections accepted so far).
        public let statusURL: String
        /// One line per connection at its first request: "CONNECTION REUSED TLS_PROTOCOL HTTP_PROTOCOL".
        public let connectionsLog: String
        /// Whether the server offers HTTP/2 (ALPN h2) besides HTTP/1.1.
        public let http2: Bool
    }

    private let lock = NSLock()
    private var stopAction: (() -> Void)?
    private var interruptToken: Int?

    private init(kind: Kind, url: String, description: String, tls: TLSFiles? = nil, stop: (() -> Void)?) {
        self.kind = kind
        self.url = url
        self.description = description
        self.tls = tls
        self.stopAction = stop
        if stop != nil {
            interruptToken = Interrupts.shared.register { [weak self] in self?.stopNow() }
        }
    }

    deinit { stopNow() }

    /// Stops the server (idempotent). Runs on interrupts too.
    public func stop() {
        if let token = lock.withLock({ interruptToken }) { Interrupts.shared.unregister(token) }
        stopNow()
    }

    private func stopNow() {
        let action: (() -> Void)? = lock.withLock {
            let action = stopAction
            stopAction = nil
            return action
        }
        action?()
    }

    /// A server the user runs (`--url`): nothing to start or stop.
    public static func external(url: String) -> BenchServer {
        BenchServer(kind: .external, url: url, description: "a server given with --url", stop: nil)
    }

    /// The embedded test server's /bytes/1024 on a free port of 127.0.0.1.
    /// - Throws: `BenchError` when it cannot listen.
    public static func testServer() throws -> BenchServer {
        var server: OpaquePointer?
        let rc = cts_server_start(&server, "127.0.0.1", 0)
        guard rc == 0, let server else { throw BenchError("cannot start the test server: \(String(cString: strerror(-rc)))") }
        let port = cts_server_port(server)
        let box = PointerBox(server)
        return BenchServer(kind: .testServer, url: "http://127.0.0.1:\(port)/bytes/1024",
                           description: "embedded test server (one thread per connection)",
                           stop: { cts_server_stop(box.pointer) })
    }

    /// Where nginx is: $COURIER_NGINX when set (a path that is not an executable, such as "none",
    /// means "no nginx": the fallback server is used), else the usual Debian paths, then $PATH.
    /// Nil when absent.
    public static func findNginx() -> String? {
        if let env = ProcessInfo.processInfo.environment["COURIER_NGINX"], !env.isEmpty {
            return FileManager.default.isExecutableFile(atPath: env) ? env : nil
        }
        var candidates: [String] = []
        candidates += ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx", "/usr/local/bin/nginx",
                       "/opt/homebrew/bin/nginx"]
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(dir)/nginx")
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts nginx: one worker, no daemon, no master, keep-alive for a million requests, no access
    /// log, every path inside a fresh temporary directory, serving one 1024-byte file.
    /// - Parameter path: the nginx binary.
    /// - Throws: `BenchError` with the tail of nginx's error log when it does not come up.
    public static func nginx(path: String) throws -> BenchServer {
        let (version, compiled) = nginxInfo(path: path)
        return try startNginx(path: path, prefix: "courier-nginx", prepare: { dir, port in
            do {
                try writeNginxFiles(dir: dir, port: port, compiled: compiled)
            } catch {
                throw BenchError("cannot write nginx's files in \(dir): \(error)")
            }
        }) { dir, port, pid in
            (url: "http://127.0.0.1:\(port)/1k.bin", description: "nginx \(version) (pid \(pid), 1 worker, keep-alive)", tls: nil)
        }
    }

    /// Where scripts/tls-fixture is: $COURIER_TLS_FIXTURE, else ./scripts/tls-fixture, else the
    /// checkout this tool was built from. Nil when absent.
    public static func findTLSFixture() -> String? {
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["COURIER_TLS_FIXTURE"], !env.isEmpty { candidates.append(env) }
        candidates.append(FileManager.default.currentDirectoryPath + "/scripts/tls-fixture")
        // Benchmarks/CourierBenchmarks/Transport/BenchServer.swift -> the checkout's root
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent("scripts/tls-fixture").path)
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    /// Starts nginx over TLS with the world scripts/tls-fixture makes for the run (its CA, a
    /// certificate for localhost, its nginx.conf: /1k.bin, /status, connections.log), offering
    /// HTTP/2 by ALPN when `http2`.
    /// - Parameters:
    ///   - path: the nginx binary.
    ///   - fixture: scripts/tls-fixture.
    ///   - http2: whether nginx offers h2.
    /// - Throws: `BenchError` when the fixture fails or nginx does not come up.
    public static func nginxTLS(path: String, fixture: String, http2: Bool) throws -> BenchServer {
        let (version, _) = nginxInfo(path: path)
        return try startNginx(path: path, prefix: "courier-nginx-tls", prepare: { dir, port in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = [fixture, dir, String(port)] + (http2 ? ["h2"] : [])
            let pipe = Pipe()
            process.standardError = pipe
            process.standardOutput = FileHandle.nullDevice
            do { try process.run() } catch { throw BenchError("cannot run \(fixture): \(error)") }
            let message = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw BenchError("\(fixture) failed: \(String(decoding: message, as: UTF8.self))")
            }
        }) { dir, port, pid in
            let files = TLSFiles(caFile: "\(dir)/ca.pem", statusURL: "https://localhost:\(port)/status",
                                 connectionsLog: "\(dir)/connections.log", http2: http2)
            return (url: "https://localhost:\(port)/1k.bin",
                    description: "nginx \(version) (pid \(pid), 1 worker, keep-alive, TLS\(http2 ? ", HTTP/2 and HTTP/1.1 by ALPN" : ", HTTP/1.1"), scripts/tls-fixture)",
                    tls: files)
        }
    }

    /// Makes a temporary directory, has `prepare` write nginx's files for a free port, starts nginx
    /// and waits until the port accepts (three ports tried: one may be taken between the probe and
    /// nginx's bind).
    private static func startNginx(
        path: String, prefix: String, prepare: (String, Int) throws -> Void,
        describe: (String, Int, Int) -> (url: String, description: String, tls: TLSFiles?)
    ) throws -> BenchServer {
        let dir = try makeTempDirectory(prefix: prefix)
        var lastError = "nginx did not start"
        for _ in 0..<3 {
            let port = cbench_free_port()
            guard port > 0 else { break }
            do {
                try prepare(dir, Int(port))
            } catch {
                removeTree(dir)
                throw error
            }
            let log = "\(dir)/nginx.out"
            let argv = [path, "-p", "\(dir)/", "-c", "\(dir)/nginx.conf", "-e", "\(dir)/error.log"]
            var child: OpaquePointer?
            let rc = withCStringArray(argv) { cbench_child_start(&child, $0, log) }
            guard rc == 0, let child else {
                lastError = "cannot run \(path): \(String(cString: strerror(-rc)))"
                break
            }
            var up = false
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                if cbench_wait_port(port, 100) == 0 { up = true; break }
                if cbench_child_running(child, nil) == 0 { break }
            }
            if up && cbench_child_running(child, nil) != 0 {
                let box = PointerBox(child)
                let about = describe(dir, Int(port), Int(cbench_child_pid(child)))
                return BenchServer(kind: .nginx, url: about.url, description: about.description, tls: about.tls,
                                   stop: {
                                       cbench_child_stop(box.pointer, 2000)
                                       removeTree(dir)
                                   })
            }
            cbench_child_stop(child, 500)
            lastError = "nginx did not start: " + tail(of: "\(dir)/error.log", orElse: tail(of: log, orElse: "no error log"))
        }
        removeTree(dir)
        throw BenchError(lastError)
    }

    // MARK: - nginx files

    /// nginx's version and which temp-path modules it was built with (nginx-light lacks some).
    private static func nginxInfo(path: String) -> (version: String, compiled: Set<String>) {
        var modules: Set<String> = ["proxy", "fastcgi", "uwsgi", "scgi"]
        var version = "?"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-V"]
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = pipe
        guard (try? process.run()) != nil else { return (version, modules) }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        if let range = text.range(of: "nginx/") {
            version = String(text[range.upperBound...].prefix { !$0.isWhitespace })
        }
        for module in modules where text.contains("--without-http_\(module)_module") {
            modules.remove(module)
        }
        return (version, modules)
    }

    private static func writeNginxFiles(dir: String, port: Int, compiled: Set<String>) throws {
        let fm = FileManager.default
        try fm.createDirectory(atPath: "\(dir)/www", withIntermediateDirectories: true)
        let body = Data((0..<1024).map { UInt8($0 % 251) })  // the same bytes as the test server's /bytes/1024
        guard fm.createFile(atPath: "\(dir)/www/1k.bin", contents: body) else {
            throw BenchError("cannot write \(dir)/www/1k.bin")
        }
        var temps = "        client_body_temp_path \(dir)/tmp/body;\n"
        for module in ["proxy", "fastcgi", "uwsgi", "scgi"] where compiled.contains(module) {
            temps += "        \(module)_temp_path \(dir)/tmp/\(module);\n"
        }
        try fm.createDirectory(atPath: "\(dir)/tmp", withIntermediateDirectories: true)
        let conf = """
            # Generated by `courier bench transport`; removed when the benchmark ends.
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(dir)/nginx.pid;
            error_log \(dir)/error.log warn;
            events {
                worker_connections 1024;
            }
            http {
                access_log off;
                default_type application/octet-stream;
            \(temps)    keepalive_requests 1000000;
                keepalive_timeout 300s;
                sendfile on;
                tcp_nodelay on;
                open_file_cache max=16 inactive=600s;
                open_file_cache_valid 600s;
                server {
                    listen 127.0.0.1:\(port);
                    root \(dir)/www;
                }
            }

            """
        try conf.write(toFile: "\(dir)/nginx.conf", atomically: true, encoding: .utf8)
    }
}

/// An error of the benchmark's own set-up, with a readable message.
public struct BenchError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - helpers

/// Carries a C pointer into a @Sendable closure (the C side is thread-safe for the use made of it).
private final class PointerBox: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

func makeTempDirectory(prefix: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw BenchError("cannot create a temporary directory in \(base): \(String(cString: strerror(errno)))")
    }
    return String(cString: made)
}

func removeTree(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

private func tail(of path: String, orElse fallback: String) -> String {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return fallback }
    let lines = text.split(separator: "\n").suffix(3).joined(separator: " | ")
    return lines.isEmpty ? fallback : lines
}

/// Calls `body` with a NULL-terminated C array of the strings.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    var pointers = copies.map { UnsafePointer<CChar>($0) }
    pointers.append(nil)
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
