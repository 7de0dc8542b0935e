// EngineTests.swift — the engine's lifecycle and its four send styles over the loopback server:
// async/await, completion handler, delegate, blocking; cancellation (task, id, all, close).

import Courier
import Foundation
import XCTest

final class EngineTests: LoopbackTestCase {
    // MARK: - Sending

    func testAsyncSendReturnsTheResponse() async throws {
        let response = try await engine.send(.get("/echo").parameter("a", "1"))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.method, "GET")
        XCTAssertEqual(response.url, server.baseURL + "/echo?a=1")
        XCTAssertNotEqual(response.requestID, .invalid)
        let echo = try Echo(response)
        XCTAssertEqual(echo.method, "GET")
        XCTAssertEqual(echo.path, "/echo")
        XCTAssertEqual(echo.query, "a=1")
    }

    func testEveryMethodHelperSendsItsMethod() async throws {
        let requests: [(Request, String)] = [
            (.get("/echo"), "GET"), (.post("/echo"), "POST"), (.put("/echo"), "PUT"),
            (.delete("/echo"), "DELETE"), (.patch("/echo"), "PATCH"), (.method("PROPFIND", "/echo"), "PROPFIND"),
        ]
        for (request, method) in requests {
            let echo = try Echo(try await engine.send(request))
            XCTAssertEqual(echo.method, method)
        }
        let head = try await engine.send(.head("/echo"))
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.method, "HEAD")
        XCTAssertTrue(head.body.isEmpty)
    }

    func testCompletionHandlerRunsOnceWithTheResult() throws {
        let done = expectation(description: "completion")
        let result = Locked<Result<Response, CourierError>?>(nil)
        let id = engine.send(.get("/status/201")) { outcome in
            result.set(outcome)
            done.fulfill()
        }
        XCTAssertNotEqual(id, .invalid)
        wait(for: [done], timeout: 20)
        let response = try XCTUnwrap(result.get()).get()
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(response.requestID, id)
    }

    func testCompletionHandlerGetsAnImmediateFailureOnTheCallingThread() {
        let failure = Locked<CourierError?>(nil)
        let id = engine.send(.get("/echo").header("Bad Name", "x")) { outcome in
            if case .failure(let error) = outcome { failure.set(error) }
        }
        XCTAssertEqual(id, .invalid)
        XCTAssertEqual(failure.get()?.code, .invalidHeader) // already delivered: no waiting
        XCTAssertEqual(server.count("/echo"), 0)
    }

    func testACompletionHandlerMaySendAgain() {
        let done = expectation(description: "second completion")
        let engine = self.engine!
        let second = Locked<Int>(0)
        engine.send(.get("/status/200")) { _ in
            engine.send(.get("/status/202")) { outcome in
                second.set((try? outcome.get().status) ?? -1)
                done.fulfill()
            }
        }
        wait(for: [done], timeout: 20)
        XCTAssertEqual(second.get(), 202)
    }

    func testSyncSendBlocksForTheResponse() throws {
        let response = try engine.sendSync(.post("/echo").parameter("k", "v"))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(try Echo(response).body, "k=v")
        XCTAssertThrowsError(try engine.sendSync(.get("/status/404"))) { error in
            let error = error as? CourierError
            XCTAssertEqual(error?.code, .httpStatus)
            XCTAssertEqual(error?.response?.status, 404)
        }
    }

    func testSyncSendFromTheWorkerThreadIsRefused() {
        let done = expectation(description: "completion")
        let engine = self.engine!
        let code = Locked<CourierError.Code?>(nil)
        engine.send(.get("/status/200")) { _ in
            do { _ = try engine.sendSync(.get("/status/200")) } catch { code.set((error as? CourierError)?.code) }
            done.fulfill()
        }
        wait(for: [done], timeout: 20)
        XCTAssertEqual(code.get(), .invalidArgument)
    }

    // MARK: - Delegates

    final class Recorder: RequestDelegate, @unchecked Sendable {
        let finished = Locked<[(RequestID, Int)]>([])
        let failed = Locked<[(RequestID, CourierError.Code)]>([])
        let expectation: XCTestExpectation?
        init(_ expectation: XCTestExpectation?) { self.expectation = expectation }
        func requestFinished(_ response: Response, id: RequestID) {
            finished.mutate { $0.append((id, response.status)) }
            expectation?.fulfill()
        }
        func requestFailed(_ error: CourierError, id: RequestID) {
            failed.mutate { $0.append((id, error.code)) }
            expectation?.fulfill()
        }
    }

    func testDelegateHearsSuccessAndFailure() {
        let done = expectation(description: "delegate")
        done.expectedFulfillmentCount = 2
        let recorder = Recorder(done)
        let ok = engine.send(.get("/status/200"), delegate: recorder)
        let bad = engine.send(.get("/status/500"), delegate: recorder)
        wait(for: [done], timeout: 20)
        XCTAssertEqual(recorder.finished.get().map(\.0), [ok])
        XCTAssertEqual(recorder.finished.get().map(\.1), [200])
        XCTAssertEqual(recorder.failed.get().map(\.0), [bad])
        XCTAssertEqual(recorder.failed.get().map(\.1), [.httpStatus])
    }

    func testDelegateIsHeldWeakly() {
        final class Sink: @unchecked Sendable { let calls = Locked(0) }
        final class Counting: RequestDelegate, @unchecked Sendable {
            let sink: Sink
            init(_ sink: Sink) { self.sink = sink }
            func requestFinished(_ response: Response, id: RequestID) { sink.calls.mutate { $0 += 1 } }
            func requestFailed(_ error: CourierError, id: RequestID) { sink.calls.mutate { $0 += 1 } }
        }
        let sink = Sink()
        weak var gone: Counting?
        do {
            let delegate = Counting(sink)
            gone = delegate
            engine.send(.get("/delay/200"), delegate: delegate)
        }
        XCTAssertNil(gone, "the engine must not keep the delegate alive")
        // Completions run one after another on the worker: once the first request has left the
        // engine, a later request's completion comes after the first's.
        waitUntil("the delayed request was answered") { self.engine.pending == (0, 0) }
        let done = expectation(description: "later request")
        let recorder = Recorder(done)
        engine.send(.get("/status/200"), delegate: recorder)
        wait(for: [done], timeout: 20)
        XCTAssertEqual(sink.calls.get(), 0)
    }

    // MARK: - Requestable types

    struct CreateItem: Requestable {
        var name: String
        var method: String { "POST" }
        var path: String { "/echo/items" }
        var parameters: [String: String] { ["name": name, "b": "2"] }
        var headers: [String: String] { ["X-Kind": "item"] }
        var timeout: Double? { 15 }
    }

    struct Authorized: Requestable {
        var path: String { "/echo/me" }
        func makeRequest() -> Request { defaultRequest().bearer("t0k") }
    }

    func testRequestableTypesDescribeThemselves() async throws {
        let echo = try Echo(try await engine.send(CreateItem(name: "x y")))
        XCTAssertEqual(echo.method, "POST")
        XCTAssertEqual(echo.path, "/echo/items")
        XCTAssertEqual(echo.body, "b=2&name=x%20y")
        XCTAssertEqual(echo.header("X-Kind"), "item")

        let me = try Echo(try await engine.send(Authorized()))
        XCTAssertEqual(me.header("Authorization"), "Bearer t0k")

        let sync = try Echo(try engine.sendSync(Authorized()))
        XCTAssertEqual(sync.path, "/echo/me")
        XCTAssertEqual(Request(CreateItem(name: "n")).method, "POST")
    }

    func testRequestableWithCompletionAndDelegate() {
        let done = expectation(description: "both")
        done.expectedFulfillmentCount = 2
        let recorder = Recorder(done)
        engine.send(CreateItem(name: "a"), delegate: recorder)
        engine.send(CreateItem(name: "b")) { outcome in
            XCTAssertEqual(try? outcome.get().status, 200)
            done.fulfill()
        }
        wait(for: [done], timeout: 20)
        XCTAssertEqual(recorder.finished.get().count, 1)
    }

    // MARK: - Cancellation

    func testCancellingTheTaskCancelsTheRequest() async throws {
        let engine = self.engine!
        let task = Task { try await engine.send(.get("/hang")) }
        waitUntil("the server saw /hang") { self.server.count("/hang") == 1 }
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("a hung request answered")
        } catch CourierError.cancelled {
            // expected
        }
        waitUntil("the engine let the transfer go") { engine.pending == (0, 0) }
    }

    func testATaskCancelledBeforeSendingSendsNothing() async throws {
        let engine = self.engine!
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await engine.send(.get("/echo/never"))
        }
        await assertThrows(.cancelled) { try await task.value }
        XCTAssertEqual(server.count("/echo/never"), 0)
    }

    func testManyCancelledTasksEachFinishOnce() async throws {
        let engine = self.engine!
        // Identical GETs share one transfer (coalescing); distinct ones each have their own.
        let tasks = (0..<40).map { i in Task { try await engine.send(.get("/hang").parameter("n", "\(i % 20)")) } }
        for (i, task) in tasks.enumerated() where i % 2 == 0 { task.cancel() }
        await Task.yield()
        for (i, task) in tasks.enumerated() where i % 2 == 1 { task.cancel() }
        for task in tasks {
            await assertThrows(.cancelled) { try await task.value }
        }
    }

    func testCancellingAfterTheResponseKeepsTheResponse() async throws {
        let engine = self.engine!
        let task = Task { () async throws -> (Int, CourierError.Code?) in
            let response = try await engine.send(.get("/echo").parameter("a", "1"))
            withUnsafeCurrentTask { $0?.cancel() } // the send is over: nothing left to cancel
            // A send from the cancelled task sends nothing.
            do {
                _ = try await engine.send(.get("/echo/after"))
                return (response.status, nil)
            } catch {
                return (response.status, (error as? CourierError)?.code)
            }
        }
        let (status, then) = try await task.value
        XCTAssertEqual(status, 200)
        XCTAssertEqual(then, .cancelled)
        XCTAssertEqual(server.count("/echo"), 1)
        XCTAssertEqual(server.count("/echo/after"), 0)
        waitUntil("the engine holds nothing") { engine.pending == (0, 0) }
    }

    func testCancellingWhileResponsesArriveEndsEachSendOnce() async throws {
        let engine = self.engine!
        for round in 0..<3 { await cancelWhileResponsesArrive(on: engine, executor: nil, round: round) }
    }

    func testManyConcurrentSendsEachGetTheirOwnResponse() async throws {
        let engine = self.engine!
        let queries = await withTaskGroup(of: (Int, String?).self) { group in
            for i in 0..<200 {
                group.addTask {
                    let response = try? await engine.send(.get("/echo").parameter("n", "\(i)"))
                    return (i, response.flatMap { try? Echo($0).query })
                }
            }
            var queries: [Int: String] = [:]
            for await (i, query) in group { queries[i] = query ?? "" }
            return queries
        }
        XCTAssertEqual(queries.count, 200)
        for i in 0..<200 { XCTAssertEqual(queries[i], "n=\(i)") }
        XCTAssertEqual(server.count("/echo"), 200)
    }

    func testCancelByID() {
        let done = expectation(description: "cancelled")
        let code = Locked<CourierError.Code?>(nil)
        let id = engine.send(.get("/hang")) { outcome in
            if case .failure(let error) = outcome { code.set(error.code) }
            done.fulfill()
        }
        waitUntil("the server saw /hang") { self.server.count("/hang") == 1 }
        XCTAssertTrue(engine.cancel(id))
        wait(for: [done], timeout: 20)
        XCTAssertEqual(code.get(), .cancelled)
        XCTAssertFalse(engine.cancel(id), "a completed id is no longer known")
        XCTAssertFalse(engine.cancel(RequestID(rawValue: 987_654_321)))
    }

    func testCancelAll() {
        let done = expectation(description: "all cancelled")
        done.expectedFulfillmentCount = 3
        let codes = Locked<[CourierError.Code]>([])
        for i in 0..<3 {
            engine.send(.get("/hang").parameter("n", "\(i)")) { outcome in
                if case .failure(let error) = outcome { codes.mutate { $0.append(error.code) } }
                done.fulfill()
            }
        }
        waitUntil("the server saw every /hang") { self.server.count("/hang") == 3 }
        engine.cancelAll()
        wait(for: [done], timeout: 20)
        XCTAssertEqual(codes.get(), [.cancelled, .cancelled, .cancelled])
    }

    // MARK: - Closing

    func testCloseCompletesEveryRequestInFlightOnceWithCancelled() async throws {
        let engine = self.engine!
        let calls = Locked<[CourierError.Code]>([])
        var ids: [RequestID] = []
        for i in 0..<5 {
            ids.append(engine.send(.get("/hang").parameter("n", "\(i)")) { outcome in
                guard case .failure(let error) = outcome else { return calls.mutate { $0.append(.internal) } }
                calls.mutate { $0.append(error.code) }
            })
        }
        let asyncTask = Task { try await engine.send(.get("/hang")) }
        // Five on the wire (the default per-host limit), the sixth waiting in the engine's queue.
        waitUntil("the server saw five /hang") { self.server.count("/hang") == 5 }
        engine.close()
        // close() returns only after every completion ran.
        XCTAssertEqual(calls.get(), Array(repeating: .cancelled, count: 5))
        XCTAssertEqual(Set(ids).count, 5)
        await assertThrows(.cancelled) { try await asyncTask.value }
        await assertThrows(.closed) { try await engine.send(.get("/echo")) }
        XCTAssertThrowsError(try engine.sendSync(.get("/echo"))) { XCTAssertEqual(($0 as? CourierError)?.code, .closed) }
        XCTAssertEqual(engine.send(.get("/echo")) { _ in }, .invalid)
        XCTAssertFalse(engine.cancel(ids[0]))
        engine.cancelAll()
        engine.close() // idempotent
        XCTAssertEqual(engine.pending.queued + engine.pending.active, 0)
    }

    func testCloseCancelsABlockingSendOnAnotherThread() {
        let engine = self.engine!
        let code = Locked<CourierError.Code?>(nil)
        let finished = expectation(description: "sendSync returned")
        Thread.detachNewThread {
            do { _ = try engine.sendSync(.get("/hang")) } catch { code.set((error as? CourierError)?.code) }
            finished.fulfill()
        }
        waitUntil("the server saw /hang") { self.server.count("/hang") == 1 }
        engine.close()
        wait(for: [finished], timeout: 20)
        XCTAssertEqual(code.get(), .cancelled)
    }

    func testReleasingTheEngineClosesIt() throws {
        let done = expectation(description: "cancelled by deinit")
        let code = Locked<CourierError.Code?>(nil)
        var store = ""
        do {
            let local = try Engine(configuration: configuration())
            store = local.storeDirectory
            XCTAssertTrue(FileManager.default.fileExists(atPath: store))
            local.send(.get("/hang")) { outcome in
                if case .failure(let error) = outcome { code.set(error.code) }
                done.fulfill()
            }
            waitUntil("the server saw /hang") { self.server.count("/hang") == 1 }
        }
        wait(for: [done], timeout: 20)
        XCTAssertEqual(code.get(), .cancelled)
        XCTAssertFalse(FileManager.default.fileExists(atPath: store), "the temporary store is removed at close")
    }

    func testConfiguredStoreDirectoryIsCreatedAndKept() throws {
        let dir = NSTemporaryDirectory() + "courier-facade-\(UUID().uuidString)/store"
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let local = try makeEngine { $0.storeDirectory = dir }
        XCTAssertEqual(local.storeDirectory, dir)
        var isDirectory: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory))
        XCTAssertTrue(isDirectory.boolValue)
        local.close()
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir))
    }

    // MARK: - Concurrency and connections

    func testConcurrentSendsFromManyTasks() async throws {
        let engine = self.engine!
        let ids = try await withThrowingTaskGroup(of: [RequestID].self) { group in
            for task in 0..<32 {
                group.addTask {
                    var ids: [RequestID] = []
                    for i in 0..<8 {
                        let response = try await engine.send(.post("/echo/\(task)").body(Data(repeating: UInt8(i), count: 1024),
                                                                                        contentType: nil))
                        XCTAssertEqual(response.status, 200)
                        XCTAssertEqual(try Echo(response).path, "/echo/\(task)")
                        ids.append(response.requestID)
                    }
                    return ids
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        XCTAssertEqual(ids.count, 256)
        XCTAssertEqual(Set(ids).count, 256)
        XCTAssertEqual(server.requests, 256)
    }

    func testMetricsArePresentAndTheConnectionIsReused() async throws {
        let first = try await engine.send(.get("/bytes/1000"))
        let second = try await engine.send(.get("/bytes/1000"))
        XCTAssertEqual(first.body.count, 1000)
        XCTAssertGreaterThan(first.metrics.total, 0)
        XCTAssertGreaterThan(first.metrics.bytesReceived, 1000)
        XCTAssertGreaterThan(first.metrics.bytesSent, 0)
        XCTAssertEqual(first.metrics.httpVersion, 11)
        XCTAssertEqual(first.metrics.tls, 0)
        XCTAssertFalse(first.metrics.connectionReused)
        XCTAssertTrue(second.metrics.connectionReused)
        XCTAssertEqual(server.connections, 1)
    }

    /// Completion handlers run on the engine's worker, which names itself for debuggers and
    /// profilers (the C core's `cr_thread_set_name`).
    func testCompletionHandlerRunsOnTheNamedWorker() throws {
        #if os(Linux)
        let done = expectation(description: "completion")
        let name = Locked<String>("")
        _ = engine.send(.get("/status/200")) { _ in
            // The calling thread's own name (Glibc's pthread_getname_np is not imported: _GNU_SOURCE).
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            name.set(comm.trimmingCharacters(in: .whitespacesAndNewlines))
            done.fulfill()
        }
        wait(for: [done], timeout: 20)
        XCTAssertEqual(name.get(), "courier-worker")
        #endif
    }

    func testVersionAndPending() {
        XCTAssertFalse(Engine.libraryVersion.isEmpty)
        XCTAssertEqual(engine.pending.queued, 0)
        XCTAssertEqual(engine.pending.active, 0)
    }
}
