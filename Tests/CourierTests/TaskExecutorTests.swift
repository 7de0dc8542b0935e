// TaskExecutorTests.swift — Engine.taskExecutor over the loopback server: tasks that prefer it run
// on the engine's worker thread (where completions run), send and await there, in numbers; they
// are cancelled as any task is; a blocking send there is refused; closing the engine with tasks
// waiting on it leaves none behind, and tasks that prefer it after the close still run.

import Courier
import Foundation
import XCTest

@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
final class TaskExecutorTests: LoopbackTestCase {
    /// The engine's worker thread, learnt from a completion handler (which runs there).
    private func workerThread(of engine: Engine) -> pthread_t {
        let done = expectation(description: "completion")
        let thread = Locked<pthread_t?>(nil)
        engine.send(.get("/status/200")) { _ in
            thread.set(pthread_self())
            done.fulfill()
        }
        wait(for: [done], timeout: 20)
        return thread.get()!
    }

    func testATaskOnTheExecutorSendsAndResumesOnTheWorker() async throws {
        let engine = self.engine!
        let worker = workerThread(of: engine)
        let (statuses, offWorker) = try await withTaskExecutorPreference(engine.taskExecutor) {
            var statuses: [Int] = []
            var offWorker = 0
            for i in 0..<20 {
                let response = try await engine.send(.get("/echo").parameter("i", "\(i)"))
                statuses.append(response.status)
                if pthread_equal(pthread_self(), worker) == 0 { offWorker += 1 }
            }
            return (statuses, offWorker)
        }
        XCTAssertEqual(statuses, Array(repeating: 200, count: 20))
        XCTAssertEqual(offWorker, 0, "the task ran off the worker after some sends")
    }

    func testManyTasksOnTheExecutorAtOnce() async throws {
        let engine = self.engine!
        let executor = engine.taskExecutor
        XCTAssertTrue(executor === engine.taskExecutor, "one executor per engine")
        let results = await withTaskGroup(of: [Int].self) { group in
            for t in 0..<16 {
                group.addTask(executorPreference: executor) {
                    var seen: [Int] = []
                    for i in 0..<10 {
                        let response = try? await engine.send(.get("/echo").parameter("t", "\(t)").parameter("i", "\(i)"))
                        seen.append(response?.status ?? -1)
                    }
                    return seen
                }
            }
            var all: [[Int]] = []
            for await seen in group { all.append(seen) }
            return all
        }
        XCTAssertEqual(results.count, 16)
        XCTAssertEqual(results.flatMap { $0 }, Array(repeating: 200, count: 160))
        XCTAssertEqual(server.count("/echo"), 160)
    }

    func testCancellingATaskOnTheExecutorCancelsItsRequest() async throws {
        let engine = self.engine!
        let task = Task(executorPreference: engine.taskExecutor) { try await engine.send(.get("/hang")) }
        waitUntil("the server saw /hang") { self.server.count("/hang") == 1 }
        task.cancel()
        await assertThrows(.cancelled) { try await task.value }
        waitUntil("the engine let the transfer go") { engine.pending == (0, 0) }
    }

    func testCancellingTasksOnTheExecutorWhileResponsesArrive() async throws {
        let engine = self.engine!
        await cancelWhileResponsesArrive(on: engine, executor: engine.taskExecutor)
    }

    func testABlockingSendOnTheExecutorIsRefused() async throws {
        let engine = self.engine!
        let code = await withTaskExecutorPreference(engine.taskExecutor) { () async -> CourierError.Code? in
            _ = try? await engine.send(.get("/status/200")) // now on the worker
            do {
                _ = try engine.sendSync(.get("/status/200"))
                return nil
            } catch {
                return (error as? CourierError)?.code
            }
        }
        XCTAssertEqual(code, .invalidArgument)
    }

    func testClosingWithTasksWaitingOnTheExecutorLeavesNoneBehind() async throws {
        let engine = try makeEngine { _ in }
        let executor = engine.taskExecutor
        let tasks = (0..<4).map { i in // within the per-host connection limit: all on the wire
            Task(executorPreference: executor) { () async -> CourierError.Code? in
                do {
                    _ = try await engine.send(.get("/hang").parameter("n", "\(i)"))
                    return nil
                } catch {
                    return (error as? CourierError)?.code
                }
            }
        }
        waitUntil("the server saw every /hang") { self.server.count("/hang") == 4 }
        engine.close()
        for task in tasks {
            let code = await task.value
            XCTAssertEqual(code, .cancelled)
        }
        // After the close the executor still runs tasks (elsewhere), and a send says the engine closed.
        let late = Task(executorPreference: executor) { () async -> CourierError.Code? in
            do {
                _ = try await engine.send(.get("/status/200"))
                return nil
            } catch {
                return (error as? CourierError)?.code
            }
        }
        let lateCode = await late.value
        XCTAssertEqual(lateCode, .closed)
    }
}
