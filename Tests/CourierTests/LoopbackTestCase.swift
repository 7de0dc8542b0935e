// LoopbackTestCase.swift — the base of the facade's tests: a fresh loopback test server
// (CourierTestServer, 127.0.0.1, a free port) and a fresh engine for each test.

import Courier
import CourierTestServer
import Foundation
import XCTest

// MARK: - The test server

/// Owns one `cts_server` on 127.0.0.1 and a free port.
final class LoopbackServer: @unchecked Sendable {
    private var server: OpaquePointer?
    let port: Int

    init() throws {
        var created: OpaquePointer?
        let rc = cts_server_start(&created, "127.0.0.1", 0)
        guard rc == 0, let created else {
            throw NSError(domain: "CourierTestServer", code: Int(rc))
        }
        server = created
        port = Int(cts_server_port(created))
    }

    /// "http://127.0.0.1:<port>".
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Requests fully parsed whose path (without query) is `path`.
    func count(_ path: String) -> Int { server.map { Int(cts_server_path_count($0, path)) } ?? 0 }

    /// Requests and connections since start.
    var requests: Int { server.map { Int(cts_server_request_count($0)) } ?? 0 }
    var connections: Int { server.map { Int(cts_server_connection_count($0)) } ?? 0 }

    func stop() {
        if let server { cts_server_stop(server) }
        server = nil
    }

    deinit { stop() }
}

// MARK: - What /echo saw

/// The JSON /echo answers with.
struct Echo {
    let method: String
    let path: String
    let query: String
    let headers: [(name: String, value: String)]
    let body: String
    let connection: Int

    init(_ response: Response, file: StaticString = #filePath, line: UInt = #line) throws {
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        let json = try XCTUnwrap(object, "not a JSON object: \(response.text ?? "")", file: file, line: line)
        method = json["method"] as? String ?? ""
        path = json["path"] as? String ?? ""
        query = json["query"] as? String ?? ""
        headers = (json["headers"] as? [[String]] ?? []).compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil }
        body = json["body"] as? String ?? ""
        connection = json["connection"] as? Int ?? 0
    }

    /// Every value of a header the server received (case-insensitive).
    func headers(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    /// The first value of a header the server received.
    func header(_ name: String) -> String? { headers(name).first }

    /// The query pairs, in order (not percent-decoded).
    var queryPairs: [String] { query.isEmpty ? [] : query.split(separator: "&").map(String.init) }
}

// MARK: - Helpers

/// A value shared between threads in tests.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func mutate<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}

// MARK: - The base test case

class LoopbackTestCase: XCTestCase {
    var server: LoopbackServer!
    var engine: Engine!

    /// An engine opened with the default store writes under $XDG_DATA_HOME: in the tests, a
    /// temporary directory of this process, never the real home.
    static let dataHome: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("courier-tests-\(UUID())").path
        setenv("XDG_DATA_HOME", path, 1)
        return path
    }()

    override class func setUp() {
        super.setUp()
        _ = dataHome
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        server = try LoopbackServer()
        engine = try Engine(configuration: configuration())
    }

    override func tearDown() {
        engine?.close()
        engine = nil
        server?.stop()
        server = nil
        super.tearDown()
    }

    /// The configuration of the test's engine; subclasses and tests may change it.
    func configuration() -> Configuration {
        var configuration = Configuration(baseURL: server.baseURL)
        configuration.timeout = 20 // a generous "did not hang" bound
        configuration.temporaryStore = true // each test engine its own store
        return configuration
    }

    /// Opens another engine on the test server with changes to the default configuration.
    func makeEngine(_ change: (inout Configuration) -> Void) throws -> Engine {
        var configuration = configuration()
        change(&configuration)
        return try Engine(configuration: configuration)
    }

    /// Waits (polling, up to a generous bound) until `condition` holds.
    func waitUntil(_ what: String, timeout: TimeInterval = 10, file: StaticString = #filePath, line: UInt = #line,
                   _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() > deadline {
                XCTFail("timed out waiting until \(what)", file: file, line: line)
                return
            }
            usleep(2_000)
        }
    }

    /// 48 sends of short delays, three in four of their tasks cancelled at different moments (some
    /// before they send, some on the wire, some as or after their response arrives), the tasks on
    /// `executor` (nil: the global executor). Each send ends exactly once, with its response or with
    /// cancelled, the uncancelled ones with their response, and the engine is left holding nothing.
    func cancelWhileResponsesArrive(on engine: Engine, executor: (any TaskExecutor)?, round: Int = 0,
                                    file: StaticString = #filePath, line: UInt = #line) async {
        let tasks = (0..<48).map { i in
            Task(executorPreference: executor) { () async -> Int in
                do {
                    return try await engine.send(.get("/delay/\(i % 3)").parameter("n", "\(round)-\(i)")).status
                } catch let error as CourierError {
                    return error.code == .cancelled ? -1 : -2
                } catch {
                    return -3
                }
            }
        }
        for (i, task) in tasks.enumerated() where i % 4 != 0 {
            task.cancel()
            if i % 5 == 0 { await Task.yield() }
        }
        for (i, task) in tasks.enumerated() {
            let outcome = await task.value
            if i % 4 == 0 {
                XCTAssertEqual(outcome, 200, "round \(round), uncancelled task \(i)", file: file, line: line)
            } else {
                XCTAssertTrue(outcome == 200 || outcome == -1, "round \(round), task \(i) ended with \(outcome)",
                              file: file, line: line)
            }
        }
        waitUntil("the engine holds nothing", file: file, line: line) { engine.pending == (0, 0) }
    }

    /// Asserts that `body` throws a CourierError with `code`, and returns it.
    @discardableResult
    func assertThrows<T>(_ code: CourierError.Code, file: StaticString = #filePath, line: UInt = #line,
                         _ body: () async throws -> T) async -> CourierError? {
        do {
            _ = try await body()
            XCTFail("expected \(code.name), got a value", file: file, line: line)
        } catch let error as CourierError {
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
            return error
        } catch {
            XCTFail("expected CourierError \(code.name), got \(error)", file: file, line: line)
        }
        return nil
    }
}
