// LoggingTests.swift — an engine's log from Swift (levels, JSON lines, fields, redaction, a
// rotating file) and the event monitor (protocol, closure, stream) over the loopback server.

import Courier
import Foundation
import XCTest
#if canImport(Logging)
import Logging
#endif

final class LoggingTests: LoopbackTestCase {
    /// Lines a handler sink received, parsed.
    private func parse(_ lines: [String]) throws -> [[String: Any]] {
        try lines.map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return try XCTUnwrap(object, "not a JSON object: \(line)")
        }
    }

    // MARK: - Logging

    func testLevelsFilterAndLinesAreJSON() async throws {
        let lines = Locked<[(LogLevel, String)]>([])
        XCTAssertEqual(engine.logLevel, .info)
        try engine.addLogSink(.handler { level, line in lines.mutate { $0.append((level, line)) } })
        try engine.setLogField("app", "tests")

        engine.logLevel = .warning
        _ = try await engine.send(.get("/echo/quiet"))
        await assertThrows(.httpStatus) { try await engine.send(.get("/status/500")) }
        XCTAssertEqual(lines.get().count, 1)
        let warning = try parse(lines.get().map(\.1))[0]
        XCTAssertEqual(lines.get()[0].0, .warning)
        XCTAssertEqual(warning["level"] as? String, "warning")
        XCTAssertEqual(warning["event"] as? String, "finished")
        XCTAssertEqual(warning["status"] as? Int, 500)
        XCTAssertEqual(warning["code"] as? Int, Int(CourierError.Code.httpStatus.rawValue))
        XCTAssertEqual(warning["app"] as? String, "tests")

        lines.set([])
        engine.logLevel = .debug
        let response = try await engine.send(.post("/echo/debug"))
        let objects = try parse(lines.get().map(\.1))
        XCTAssertEqual(objects.compactMap { $0["event"] as? String }, ["will_send", "did_send", "finished"])
        let finished = objects[2]
        XCTAssertEqual((finished["request_id"] as? NSNumber)?.uint64Value, response.requestID.rawValue)
        XCTAssertEqual(finished["method"] as? String, "POST")
        XCTAssertEqual(finished["url"] as? String, server.baseURL + "/echo/debug")
        XCTAssertNotNil(finished["duration_ms"] as? Double)
        XCTAssertNotNil(finished["time"] as? String)

        lines.set([])
        engine.logLevel = .off
        _ = try await engine.send(.get("/echo/off"))
        engine.log(.error, "not written")
        XCTAssertTrue(lines.get().isEmpty)
        XCTAssertEqual(LogLevel.trace.description, "trace")
        XCTAssertTrue(LogLevel.error < LogLevel.debug)
        XCTAssertThrowsError(try engine.setLogField("level", "x"))
    }

    func testRedactionAndAppLines() async throws {
        let lines = Locked<[String]>([])
        let id = try engine.addLogSink(.handler(level: .info) { _, line in lines.mutate { $0.append(line) } })
        _ = try await engine.send(.get("/echo/r").parameter("api_key", "k1").parameter("page", "2"))
        try engine.redactLogParameter("page")
        engine.log(.info, "hello \"world\"", event: "custom")
        engine.setLogRedaction(.userInfoOnly)
        _ = try await engine.send(.get("/echo/r").parameter("api_key", "k2"))
        let objects = try parse(lines.get())
        XCTAssertEqual(objects.count, 3)
        XCTAssertEqual(objects[0]["url"] as? String, server.baseURL + "/echo/r?api_key=***&page=2")
        XCTAssertEqual(objects[1]["event"] as? String, "custom")
        XCTAssertEqual(objects[1]["message"] as? String, "hello \"world\"")
        XCTAssertEqual(objects[2]["url"] as? String, server.baseURL + "/echo/r?api_key=k2")
        XCTAssertTrue(engine.removeLogSink(id))
        XCTAssertFalse(engine.removeLogSink(id))
    }

    func testFileSinkRotates() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-log-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("engine.log").path
        try engine.configureLogging(LoggingConfiguration(level: .info, sinks: [.file(path, maxBytes: 800, maxFiles: 2)]))
        for i in 1...40 { engine.log(.info, "line \(i) of a file that rotates") }
        engine.close() // closes the file
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertEqual(files, ["engine.log", "engine.log.1"])
        for file in files {
            let text = try String(contentsOfFile: directory.appendingPathComponent(file).path, encoding: .utf8)
            XCTAssertLessThanOrEqual(text.utf8.count, 800)
            XCTAssertTrue(text.hasSuffix("\n"))
            _ = try parse(text.split(separator: "\n").map(String.init))
        }
        let newest = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(newest.contains("line 40 of"))

        let bad = try Engine(configuration: configuration())
        XCTAssertThrowsError(try bad.addLogSink(.file(directory.path + "/missing/x.log"))) { error in
            XCTAssertEqual((error as? CourierError)?.code, .store)
        }
        XCTAssertThrowsError(try bad.addLogSink(.file(path, maxFiles: 0)))
    }

    // MARK: - Event monitors

    final class Recorder: EventMonitor, @unchecked Sendable {
        private let lock = NSLock()
        private var seen: [RequestEvent] = []
        var events: [RequestEvent] { lock.withLock { seen } }
        func requestWillSend(_ event: RequestEvent) { lock.withLock { seen.append(event) } }
        func requestDidSend(_ event: RequestEvent) { lock.withLock { seen.append(event) } }
        func requestDidFinish(_ event: RequestEvent) { lock.withLock { seen.append(event) } }
    }

    func testEventMonitorSeesTheLifecycle() async throws {
        let recorder = Recorder()
        let token = try engine.addEventMonitor(recorder)
        let response = try await engine.send(.get("/echo/monitored").parameter("token", "secret"))
        let mine = recorder.events.filter { $0.requestID == response.requestID }
        XCTAssertEqual(mine.map(\.kind), [.willSend, .didSend, .finished])
        let finished = try XCTUnwrap(mine.last)
        XCTAssertEqual(finished.status, 200)
        XCTAssertNil(finished.error)
        XCTAssertEqual(finished.response?.body, response.body)
        XCTAssertEqual(finished.method, "GET")
        XCTAssertEqual(finished.url, server.baseURL + "/echo/monitored?token=secret")
        XCTAssertNotNil(finished.duration)

        await assertThrows(.httpStatus) { try await engine.send(.get("/status/404")) }
        let failed = try XCTUnwrap(recorder.events.last)
        XCTAssertEqual(failed.kind, .finished)
        XCTAssertEqual(failed.error?.code, .httpStatus)
        XCTAssertEqual(failed.status, 404)

        XCTAssertTrue(engine.removeEventMonitor(token))
        let count = recorder.events.count
        _ = try await engine.send(.get("/echo/after"))
        XCTAssertEqual(recorder.events.count, count)
    }

    func testClosureMonitorKindsAndStream() async throws {
        let finished = Locked<[RequestEvent.Kind]>([])
        try engine.addEventMonitor(kinds: [.finished]) { event in finished.mutate { $0.append(event.kind) } }
        let stream = engine.events([.willSend, .finished])
        let response = try await engine.send(.get("/echo/stream"))
        var kinds: [RequestEvent.Kind] = []
        for await event in stream where event.requestID == response.requestID {
            kinds.append(event.kind)
            if event.kind == .finished { break }
        }
        XCTAssertEqual(kinds, [.willSend, .finished])
        XCTAssertEqual(finished.get(), [.finished])
        XCTAssertEqual(RequestEvent.Kind.fromCache.description, "from_cache")
    }

    func testStreamFinishesWhenTheEngineCloses() async throws {
        let engine = try makeEngine { _ in }
        let stream = engine.events()
        let consumer = Task { () -> (lifecycle: Int, progress: Int) in
            var lifecycle = 0, progress = 0
            for await event in stream {
                if event.kind == .progress { progress += 1 } else { lifecycle += 1 }
            }
            return (lifecycle, progress)
        }
        _ = try await engine.send(.get("/echo/one"))
        engine.close()
        let counts = await consumer.value
        XCTAssertEqual(counts.lifecycle, 3) // will send, did send, finished
        XCTAssertGreaterThanOrEqual(counts.progress, 1) // at least the attempt's final count
    }

    func testCancelledRequestFinishesInTheMonitor() async throws {
        let events = Locked<[RequestEvent]>([])
        try engine.addEventMonitor(kinds: [.didSend, .finished]) { event in events.mutate { $0.append(event) } }
        let task = Task { try await engine.send(.get("/hang")) }
        waitUntil("the request is on the wire") { events.get().contains { $0.kind == .didSend } }
        task.cancel()
        _ = try? await task.value
        waitUntil("the request finished") { events.get().contains { $0.kind == .finished } }
        let finished = try XCTUnwrap(events.get().first { $0.kind == .finished })
        XCTAssertEqual(finished.error?.code, .cancelled)
        XCTAssertNil(finished.response)
    }

    #if canImport(Logging)
    // MARK: - swift-log

    struct CapturingHandler: LogHandler {
        let lines: Locked<[(Logger.Level, String, Logger.Metadata)]>
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
                 file: String, function: String, line: UInt) {
            lines.mutate { $0.append((level, message.description, metadata ?? [:])) }
        }
    }

    func testSwiftLogBridge() async throws {
        let lines = Locked<[(Logger.Level, String, Logger.Metadata)]>([])
        let logger = Logger(label: "courier.tests") { _ in CapturingHandler(lines: lines) }
        try engine.addLogSink(.swiftLog(logger))
        await assertThrows(.httpStatus) { try await engine.send(.get("/status/500")) }
        let (level, message, metadata) = try XCTUnwrap(lines.get().first)
        XCTAssertEqual(level, .warning)
        XCTAssertTrue(message.contains("500"))
        XCTAssertEqual(metadata["status"], "500")
        XCTAssertEqual(metadata["event"], "finished")
        XCTAssertEqual(LogLevel(Logger.Level.notice), .info)
    }
    #endif

    /// Issue 28 bug 3: the finished line of a request whose response was written to the cache read
    /// "GET ? -> 200 (0.0 ms) cache: miss"; it keeps its URL and duration under every writing policy.
    func testFinishedLineOfACacheWriteKeepsURLAndDuration() async throws {
        let lines = Locked<[String]>([])
        try engine.addLogSink(.handler(level: .info) { _, line in lines.mutate { $0.append(line) } })
        let cases: [(CachePolicy, String)] = [(.cacheFirst, "/json?finished=first"),
                                              (.http, "/cache?max_age=60&body=finished-http"),
                                              (.writeOnly, "/json?finished=write")]
        for (policy, path) in cases {
            let response = try await engine.send(Request.get(path).cachePolicy(policy))
            XCTAssertEqual(response.cacheReason, .miss)
            let finished = try parse(lines.get()).filter {
                $0["event"] as? String == "finished" &&
                    (($0["request_id"] as? NSNumber)?.uint64Value == response.requestID.rawValue)
            }
            XCTAssertEqual(finished.count, 1, path)
            XCTAssertEqual(finished.first?["url"] as? String, server.baseURL + path)
            XCTAssertEqual(finished.first?["cache"] as? String, "miss")
            XCTAssertGreaterThan(finished.first?["duration_ms"] as? Double ?? 0, 0, path)
            let again = try await engine.send(Request.get(path).cachePolicy(policy == .http ? .http : .cacheFirst))
            XCTAssertTrue(again.fromCache, path) // it was written
        }
    }
}
