// TransportClients.swift — the four clients of the transport benchmark, each sending `total` GETs
// of one URL with `concurrency` requests in flight over keep-alive, after an untimed warm-up on
// the same connections.
import CBench
import Courier
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one client measured in one run.
public struct ClientRun: Sendable, Codable {
    /// Wall time of the timed phase, in seconds.
    public var seconds: Double
    /// Requests that finished, successfully or not.
    public var completed: Int
    /// Failures plus responses whose status was not 200.
    public var errors: Int
    /// Response body bytes received in the timed phase.
    public var bodyBytes: Int64
    /// The first error seen, if any.
    public var firstError: String?
    /// CPU time (user + system) of the whole process during the timed phase, in seconds.
    public var cpuSeconds: Double = 0
    /// New connections as the client counts them over its whole life (warm-up included): the
    /// libcurl loops and Courier C only (libcurl's CURLINFO_NUM_CONNECTS, Courier's metrics).
    public var clientConnections: Int?
    /// What the TLS server saw of this client (nil over plain HTTP).
    public var server: ServerCount?

    /// Successful requests per second.
    public var requestsPerSecond: Double {
        seconds > 0 ? Double(completed - errors) / seconds : 0
    }

    /// Microseconds of this process's CPU per request: steadier than the rate on a busy machine,
    /// since waiting for a CPU costs wall time but no CPU time. (With the embedded test server
    /// the server's threads are in this process too.)
    public var cpuMicrosecondsPerRequest: Double {
        completed > 0 ? cpuSeconds / Double(completed) * 1e6 : 0
    }
}

/// What the TLS server (scripts/tls-fixture's nginx) saw of one client over its whole life,
/// warm-up included: from nginx's stub_status before and after it, and the lines its
/// connections.log gained meanwhile.
public struct ServerCount: Sendable, Codable {
    /// TCP connections nginx accepted.
    public var connections: Int
    /// TLS handshakes that carried a request (one line of connections.log each).
    public var handshakes: Int
    /// Of those, the ones that resumed a TLS session.
    public var resumed: Int
    /// The TLS protocol negotiated ("TLSv1.3"), the most frequent one if several.
    public var tlsProtocol: String?
    /// The HTTP version spoken ("1.1", "2.0"), as nginx's $server_protocol says it.
    public var httpVersion: String?
}

/// How the clients reach the server.
public struct ClientSetup: Sendable {
    /// The 1 KiB resource.
    public var url: String
    /// The CA every client is given (nil: the system's).
    public var caFile: String?
    /// The server offers HTTP/2: h2load multiplexes (the libcurl loops set Courier's multiplexing
    /// options for every https:// URL).
    public var http2 = false
    /// How to run this tool again as `<command> --url U --requests N --concurrency C --warmup W`,
    /// printing one client's `ClientRun` as JSON: URLSession over TLS runs that way (see
    /// `runURLSessionTrusting`). Nil: URLSession over TLS is not measured.
    public var childCommand: [String]?

    public init(url: String, caFile: String? = nil, http2: Bool = false, childCommand: [String]? = nil) {
        self.url = url
        self.caFile = caFile
        self.http2 = http2
        self.childCommand = childCommand
    }
}

/// The clients, in the order they run.
public enum TransportClient: String, CaseIterable, Sendable {
    case curl
    case curlHeaders = "curl_headers"
    case courierC = "courier_c"
    case courierSwift = "courier_swift"
    /// The Swift facade with its tasks on the engine's executor (`Engine.taskExecutor`): each task
    /// runs where its responses arrive, as the C client's slots do.
    case courierSwiftExecutor = "courier_swift_executor"
    case urlSession = "urlsession"
    case h2load

    /// The clients run unless --clients says otherwise: h2load (the server's ceiling) over TLS only.
    public static func defaults(tls: Bool) -> [TransportClient] {
        tls ? allCases : allCases.filter { $0 != .h2load }
    }

    /// The name shown in the report.
    public var title: String {
        switch self {
        case .curl: return "libcurl multi (C, the ceiling)"
        case .curlHeaders: return "libcurl multi, Courier's headers"
        case .courierC: return "Courier C API (from C)"
        case .courierSwift: return "Courier Swift (async/await)"
        case .courierSwiftExecutor: return "Courier Swift (async/await, engine's executor)"
        case .urlSession: return "URLSession (Foundation)"
        case .h2load: return "h2load (the server's ceiling)"
        }
    }

    /// Runs this client once: `warmup` requests untimed, then `total` timed, `concurrency` in flight.
    public func run(_ setup: ClientSetup, total: Int, concurrency: Int, warmup: Int) async -> ClientRun {
        switch self {
        case .curl: return runC(cbench_curl_multi, setup, total: total, concurrency: concurrency, warmup: warmup)
        case .curlHeaders: return runC(cbench_curl_multi_headers, setup, total: total, concurrency: concurrency, warmup: warmup)
        case .courierC: return runC(cbench_courier_c, setup, total: total, concurrency: concurrency, warmup: warmup)
        case .courierSwift: return await runCourierSwift(setup, total: total, concurrency: concurrency, warmup: warmup)
        case .courierSwiftExecutor:
            return await runCourierSwift(setup, total: total, concurrency: concurrency, warmup: warmup, onWorker: true)
        case .urlSession:
            #if os(Linux)
            if let caFile = setup.caFile {
                return runURLSessionTrusting(caFile, setup, total: total, concurrency: concurrency, warmup: warmup)
            }
            #endif
            return await runURLSession(setup, total: total, concurrency: concurrency, warmup: warmup)
        case .h2load: return runH2load(setup, total: total, concurrency: concurrency)
        }
    }
}

// MARK: - C clients

private typealias CBenchFunction = (UnsafePointer<CChar>?, Int, Int32, Int, UnsafePointer<cbench_transport_options>?,
                                    UnsafeMutablePointer<cbench_result>?) -> Int32

private func runC(_ function: CBenchFunction, _ setup: ClientSetup, total: Int, concurrency: Int, warmup: Int) -> ClientRun {
    var result = cbench_result()
    let rc = withOptionalCString(setup.caFile) { ca in
        var options = cbench_transport_options(ca_file: ca, multiplex: setup.url.hasPrefix("https:") ? 1 : 0)
        return function(setup.url, total, Int32(concurrency), warmup, &options, &result)
    }
    let firstError = withUnsafeBytes(of: result.first_error) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
    var run = ClientRun(seconds: result.seconds, completed: result.completed, errors: result.errors,
                        bodyBytes: result.body_bytes, firstError: firstError.isEmpty ? nil : firstError,
                        cpuSeconds: result.cpu_seconds, clientConnections: result.connections)
    if rc != 0 {  // the client could not even start: every request counts as failed
        run.errors = max(run.errors, total)
        run.completed = max(run.completed, total)
        run.firstError = run.firstError ?? "set-up failed (\(rc))"
    }
    return run
}

// MARK: - Courier Swift facade

/// Keeps `concurrency` requests in flight until `total` have completed: a task group of
/// `concurrency` tasks, each sending one request after the other (awaiting each) while requests
/// are left to claim — the usual shape of N concurrent workers in async/await, and the same shape
/// as the C clients' slots, each of which sends its next request when its last one completes.
/// With `executor` (an `any TaskExecutor`; typed AnyObject for the platforms before
/// TaskExecutor), the tasks prefer it (`addTask(executorPreference:)`).
public func runInFlight(total: Int, concurrency: Int, executor: AnyObject? = nil,
                        _ one: @escaping @Sendable () async -> (ok: Bool, bytes: Int, error: String?)) async -> ClientRun {
    let start = DispatchTime.now().uptimeNanoseconds
    let cpuStart = cbench_process_cpu_seconds()
    var run = ClientRun(seconds: 0, completed: 0, errors: 0, bodyBytes: 0, firstError: nil)
    let claims = Claims(total: total)
    let worker: @Sendable () async -> ClientRun = {
        var mine = ClientRun(seconds: 0, completed: 0, errors: 0, bodyBytes: 0, firstError: nil)
        while claims.claim() {
            let outcome = await one()
            mine.completed += 1
            if outcome.ok {
                mine.bodyBytes += Int64(outcome.bytes)
            } else {
                mine.errors += 1
                if mine.firstError == nil { mine.firstError = outcome.error }
            }
        }
        return mine
    }
    await withTaskGroup(of: ClientRun.self) { group in
        for _ in 0..<min(concurrency, total) {
            if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *),
               let executor = executor as? any TaskExecutor {
                group.addTask(executorPreference: executor, operation: worker)
            } else {
                group.addTask(operation: worker)
            }
        }
        for await mine in group {
            run.completed += mine.completed
            run.errors += mine.errors
            run.bodyBytes += mine.bodyBytes
            if run.firstError == nil { run.firstError = mine.firstError }
        }
    }
    run.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    run.cpuSeconds = cbench_process_cpu_seconds() - cpuStart
    return run
}

/// The requests of one phase, claimed one at a time by the workers.
private final class Claims: @unchecked Sendable {
    private let lock = NSLock()
    private var left: Int
    init(total: Int) { left = total }

    /// Claims one request. Returns false when none is left.
    func claim() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if left == 0 { return false }
        left -= 1
        return true
    }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

// MARK: - h2load

/// nghttp2's h2load with the libcurl loop's shape: over HTTP/1.1 `concurrency` connections of one
/// request at a time; over h2 one connection of `concurrency` streams. It is a process of its own
/// (its CPU is not this process's: CPU per request is not measured) and does not verify the
/// server's certificate.
private func runH2load(_ setup: ClientSetup, total: Int, concurrency: Int) -> ClientRun {
    var failed = ClientRun(seconds: 0, completed: total, errors: total, bodyBytes: 0, firstError: nil)
    guard let path = findExecutable("h2load") else {
        failed.firstError = "h2load not found (Debian: nghttp2-client; scripts/setup installs it)"
        return failed
    }
    let shape = setup.http2 ? ["-c", "1", "-m", String(concurrency)] : ["--h1", "-c", String(concurrency), "-m", "1"]
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = ["-n", String(total), "-t", "1"] + shape + [setup.url]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    do { try process.run() } catch {
        failed.firstError = "cannot run \(path): \(error)"
        return failed
    }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    // "finished in 451.94ms, 44253.66 req/s, 48.91MB/s"
    // "requests: 20000 total, 20000 started, 20000 done, 20000 succeeded, 0 failed, 0 errored, 0 timeout"
    func number(after prefix: String, in line: Substring) -> Double? {
        guard let range = line.range(of: prefix) else { return nil }
        return Double(line[range.upperBound...].prefix { $0.isNumber || $0 == "." })
    }
    var seconds: Double?
    var done: Int?
    var succeeded: Int?
    for line in output.split(separator: "\n") {
        if line.hasPrefix("finished in "), let value = number(after: "finished in ", in: line) {
            let unit = line.dropFirst("finished in ".count).drop { $0.isNumber || $0 == "." }
            seconds = unit.hasPrefix("ms") ? value / 1000 : unit.hasPrefix("us") ? value / 1e6 : value
        }
        if line.hasPrefix("requests: ") {
            done = number(after: "started, ", in: line).map { Int($0) }
            succeeded = number(after: "done, ", in: line).map { Int($0) }
        }
    }
    guard process.terminationStatus == 0, let seconds, let done, let succeeded else {
        failed.firstError = "h2load failed (status \(process.terminationStatus)): " + String(output.suffix(300))
        return failed
    }
    return ClientRun(seconds: seconds, completed: done, errors: done - succeeded + (total - done), bodyBytes: 0,
                     firstError: succeeded < total ? "h2load: \(total - succeeded) requests did not succeed" : nil)
}

/// An executable of that name in $PATH or the usual Debian directories.
func findExecutable(_ name: String) -> String? {
    var dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
    dirs += ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/opt/homebrew/bin"]
    return dirs.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

private func runCourierSwift(_ setup: ClientSetup, total: Int, concurrency: Int, warmup: Int,
                             onWorker: Bool = false) async -> ClientRun {
    let url = setup.url
    var configuration = Configuration()
    configuration.caFile = setup.caFile
    configuration.maxConnectionsPerHost = concurrency
    configuration.maxConnections = max(concurrency, 64)
    configuration.timeout = 30
    configuration.temporaryStore = true
    let engine: Engine
    do {
        engine = try Engine(configuration: configuration)
    } catch {
        return ClientRun(seconds: 0, completed: total, errors: total, bodyBytes: 0, firstError: "\(error)")
    }
    defer { engine.close() }
    // Identical GETs in flight would share one network request (coalescing, on by default):
    // measure the transport, one network request per send, like the other clients.
    let request = Request.get(url).coalesce(false)
    let one: @Sendable () async -> (ok: Bool, bytes: Int, error: String?) = {
        do {
            let response = try await engine.send(request)
            if response.status == 200 { return (true, response.body.count, nil) }
            return (false, 0, "HTTP status \(response.status)")
        } catch {
            return (false, 0, "\(error)")
        }
    }
    var executor: AnyObject?
    if onWorker, #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) { executor = engine.taskExecutor }
    if warmup > 0 { _ = await runInFlight(total: warmup, concurrency: concurrency, executor: executor, one) }
    return await runInFlight(total: total, concurrency: concurrency, executor: executor, one)
}

// MARK: - URLSession

/// Runs URLSession in this process (the child side of `runURLSessionTrusting`, or over plain HTTP).
public func runURLSessionClient(url: String, total: Int, concurrency: Int, warmup: Int) async -> ClientRun {
    await runURLSession(ClientSetup(url: url), total: total, concurrency: concurrency, warmup: warmup)
}

#if os(Linux)
/// URLSession on Linux (swift-corelibs-foundation over libcurl) has no way to be given a CA: it
/// verifies with libcurl's built-in bundle alone. So it runs in a child process (`childCommand`)
/// in a private user and mount namespace (`unshare --user --map-root-user --mount`) where that
/// bundle is the system's with the run's CA added, bind-mounted over the file: the CA is trusted
/// by the system for that one process, as a user would install it, and nothing outside changes.
/// CPU per request is the child's own (it measures itself).
private func runURLSessionTrusting(_ caFile: String, _ setup: ClientSetup, total: Int, concurrency: Int,
                                   warmup: Int) -> ClientRun {
    var failed = ClientRun(seconds: 0, completed: total, errors: total, bodyBytes: 0, firstError: nil)
    guard let command = setup.childCommand else {
        failed.firstError = "URLSession over TLS needs the courier tool to run it as a child process"
        return failed
    }
    guard let unshare = findExecutable("unshare"), let bundle = curlDefaultCABundle() else {
        failed.firstError = "URLSession over TLS on Linux needs unshare (util-linux) and libcurl's CA bundle path"
        return failed
    }
    let trust = URL(fileURLWithPath: caFile).deletingLastPathComponent().appendingPathComponent("system-and-run-ca.pem").path
    guard let system = FileManager.default.contents(atPath: bundle), let ca = FileManager.default.contents(atPath: caFile),
          FileManager.default.createFile(atPath: trust, contents: system + Data("\n".utf8) + ca) else {
        failed.firstError = "cannot write \(trust) from \(bundle) and \(caFile)"
        return failed
    }
    let script = "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\""
    let process = Process()
    process.executableURL = URL(fileURLWithPath: unshare)
    process.arguments = ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", script, "sh", trust, bundle]
        + command + ["--url", setup.url, "--requests", String(total), "--concurrency", String(concurrency),
                     "--warmup", String(warmup)]
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    do { try process.run() } catch {
        failed.firstError = "cannot run \(unshare): \(error)"
        return failed
    }
    let data = out.fileHandleForReading.readDataToEndOfFile()
    let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard let run = try? JSONDecoder().decode(ClientRun.self, from: data) else {
        failed.firstError = "URLSession's child process (in a namespace of its own, made by unshare) failed"
            + " (status \(process.terminationStatus)): " + String(message.suffix(300))
        return failed
    }
    return run
}

/// libcurl's built-in CA bundle (CURLINFO_CAINFO), the one URLSession on Linux verifies with.
private func curlDefaultCABundle() -> String? {
    var buffer = [CChar](repeating: 0, count: 1024)
    guard cbench_curl_default_cainfo(&buffer, buffer.count) == 0 else { return nil }
    return String(cString: buffer)
}
#endif

private func runURLSession(_ setup: ClientSetup, total: Int, concurrency: Int, warmup: Int) async -> ClientRun {
    let url = setup.url
    guard let target = URL(string: url) else {
        return ClientRun(seconds: 0, completed: total, errors: total, bodyBytes: 0, firstError: "bad URL \(url)")
    }
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = concurrency
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.urlCache = nil
    configuration.timeoutIntervalForRequest = 30
    let session = URLSession(configuration: configuration)
    defer { session.invalidateAndCancel() }
    let one: @Sendable () async -> (ok: Bool, bytes: Int, error: String?) = {
        await withCheckedContinuation { continuation in
            let task = session.dataTask(with: target) { data, response, error in
                if let error {
                    continuation.resume(returning: (false, 0, "\(error.localizedDescription)"))
                } else if let http = response as? HTTPURLResponse, http.statusCode != 200 {
                    continuation.resume(returning: (false, 0, "HTTP status \(http.statusCode)"))
                } else {
                    continuation.resume(returning: (true, data?.count ?? 0, nil))
                }
            }
            task.resume()
        }
    }
    if warmup > 0 { _ = await runInFlight(total: warmup, concurrency: concurrency, one) }
    return await runInFlight(total: total, concurrency: concurrency, one)
}
