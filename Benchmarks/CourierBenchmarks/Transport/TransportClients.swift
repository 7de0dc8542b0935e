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
public struct ClientRun: Sendable {
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

/// The clients, in the order they run.
public enum TransportClient: String, CaseIterable, Sendable {
    case curl
    case curlHeaders = "curl_headers"
    case courierC = "courier_c"
    case courierSwift = "courier_swift"
    case urlSession = "urlsession"

    /// The name shown in the report.
    public var title: String {
        switch self {
        case .curl: return "libcurl multi (C, the ceiling)"
        case .curlHeaders: return "libcurl multi, Courier's headers"
        case .courierC: return "Courier C API (from C)"
        case .courierSwift: return "Courier Swift (async/await)"
        case .urlSession: return "URLSession (Foundation)"
        }
    }

    /// Runs this client once.
    func run(url: String, total: Int, concurrency: Int, warmup: Int) async -> ClientRun {
        switch self {
        case .curl: return runC(cbench_curl_multi, url: url, total: total, concurrency: concurrency, warmup: warmup)
        case .curlHeaders:
            return runC(cbench_curl_multi_headers, url: url, total: total, concurrency: concurrency, warmup: warmup)
        case .courierC: return runC(cbench_courier_c, url: url, total: total, concurrency: concurrency, warmup: warmup)
        case .courierSwift: return await runCourierSwift(url: url, total: total, concurrency: concurrency, warmup: warmup)
        case .urlSession: return await runURLSession(url: url, total: total, concurrency: concurrency, warmup: warmup)
        }
    }
}

// MARK: - C clients

private typealias CBenchFunction = (UnsafePointer<CChar>?, Int, Int32, Int, UnsafeMutablePointer<cbench_result>?) -> Int32

private func runC(_ function: CBenchFunction, url: String, total: Int, concurrency: Int, warmup: Int) -> ClientRun {
    var result = cbench_result()
    let rc = function(url, total, Int32(concurrency), warmup, &result)
    let firstError = withUnsafeBytes(of: result.first_error) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
    var run = ClientRun(seconds: result.seconds, completed: result.completed, errors: result.errors,
                        bodyBytes: result.body_bytes, firstError: firstError.isEmpty ? nil : firstError,
                        cpuSeconds: result.cpu_seconds)
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
private func inFlight(total: Int, concurrency: Int,
                      _ one: @escaping @Sendable () async -> (ok: Bool, bytes: Int, error: String?)) async -> ClientRun {
    let start = DispatchTime.now().uptimeNanoseconds
    let cpuStart = cbench_process_cpu_seconds()
    var run = ClientRun(seconds: 0, completed: 0, errors: 0, bodyBytes: 0, firstError: nil)
    let claims = Claims(total: total)
    await withTaskGroup(of: ClientRun.self) { group in
        for _ in 0..<min(concurrency, total) {
            group.addTask {
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

private func runCourierSwift(url: String, total: Int, concurrency: Int, warmup: Int) async -> ClientRun {
    var configuration = Configuration()
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
    if warmup > 0 { _ = await inFlight(total: warmup, concurrency: concurrency, one) }
    return await inFlight(total: total, concurrency: concurrency, one)
}

// MARK: - URLSession

private func runURLSession(url: String, total: Int, concurrency: Int, warmup: Int) async -> ClientRun {
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
    if warmup > 0 { _ = await inFlight(total: warmup, concurrency: concurrency, one) }
    return await inFlight(total: total, concurrency: concurrency, one)
}
