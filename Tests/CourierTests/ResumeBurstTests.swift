// ResumeBurstTests.swift — async sends on the global executor are resumed a worker turn at a time
// (ResumeBurst, Callbacks.swift): many tasks sending in loops each get their own responses; tasks
// cancelled while their bursts are being resumed end once, with a response or cancelled; closing
// the engine while a burst is pending leaves no task waiting; tasks on Engine.taskExecutor and on
// the global executor share one engine.

import Courier
import Foundation
import XCTest

final class ResumeBurstTests: LoopbackTestCase {
    /// What one task of the tests below saw: the queries its responses echoed, then the code
    /// that ended it (nil when it sent everything).
    private struct Outcome: Sendable {
        var queries: [String] = []
        var ended: CourierError.Code?
        var other: String?
    }

    /// `count` sends from one task, each checked against its own query, until one fails.
    private static func sendLoop(_ engine: Engine, task: Int, count: Int) async -> Outcome {
        var outcome = Outcome()
        for i in 0..<count {
            do {
                let response = try await engine.send(.get("/echo").parameter("t", "\(task)").parameter("i", "\(i)"))
                outcome.queries.append((try? Echo(response).query) ?? "?")
            } catch let error as CourierError {
                outcome.ended = error.code
                return outcome
            } catch {
                outcome.other = "\(error)"
                return outcome
            }
        }
        return outcome
    }

    /// Runs `tasks` loops of `count` sends at once and returns their outcomes by task; `during`
    /// runs meanwhile (on another task) with the tasks' handles. Bounded by a generous timeout.
    private func run(_ engine: Engine, tasks: Int, count: Int,
                     during: @escaping @Sendable ([Task<Outcome, Never>]) async -> Void = { _ in }) async -> [Outcome] {
        let handles = (0..<tasks).map { t in Task { await Self.sendLoop(engine, task: t, count: count) } }
        let side = Task { await during(handles) }
        let done = expectation(description: "every task ended")
        let collected = Locked<[Outcome]>([])
        Task {
            var all: [Outcome] = []
            for handle in handles { all.append(await handle.value) }
            await side.value
            collected.set(all)
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: 120) // a bound against a hang, not a time assertion
        return collected.get()
    }

    /// Each response a task got is its own, in order.
    private func assertOwnResponses(_ outcomes: [Outcome], file: StaticString = #filePath, line: UInt = #line) {
        for (t, outcome) in outcomes.enumerated() {
            XCTAssertNil(outcome.other, "task \(t) threw \(outcome.other ?? "")", file: file, line: line)
            for (i, query) in outcome.queries.enumerated() {
                XCTAssertEqual(query, "t=\(t)&i=\(i)", "task \(t), send \(i)", file: file, line: line)
            }
        }
    }

    func testManyTasksSendingInLoopsEachGetTheirOwnResponses() async throws {
        let engine = self.engine!
        let outcomes = await run(engine, tasks: 48, count: 25)
        XCTAssertEqual(outcomes.count, 48)
        assertOwnResponses(outcomes)
        for (t, outcome) in outcomes.enumerated() {
            XCTAssertNil(outcome.ended, "task \(t) ended with \(outcome.ended?.name ?? "")")
            XCTAssertEqual(outcome.queries.count, 25, "task \(t)")
        }
        XCTAssertEqual(server.count("/echo"), 48 * 25)
        waitUntil("the engine holds nothing") { engine.pending == (0, 0) }
    }

    func testTasksCancelledWhileTheirBurstsResumeEndOnce() async throws {
        let engine = self.engine!
        for round in 0..<3 {
            let outcomes = await run(engine, tasks: 40, count: 30) { handles in
                // Cancelled at different moments while the others' responses keep arriving.
                for (t, handle) in handles.enumerated() where t % 4 != 0 {
                    handle.cancel()
                    if t % 3 == 0 { await Task.yield() }
                    if t % 7 == 0 { try? await Task.sleep(nanoseconds: 1_000_000) }
                }
            }
            XCTAssertEqual(outcomes.count, 40)
            assertOwnResponses(outcomes)
            for (t, outcome) in outcomes.enumerated() {
                if t % 4 == 0 {
                    XCTAssertNil(outcome.ended, "round \(round), uncancelled task \(t) ended with \(outcome.ended?.name ?? "")")
                    XCTAssertEqual(outcome.queries.count, 30, "round \(round), task \(t)")
                } else if outcome.queries.count < 30 {
                    XCTAssertEqual(outcome.ended, .cancelled, "round \(round), task \(t)")
                }
            }
            waitUntil("the engine holds nothing") { engine.pending == (0, 0) }
        }
    }

    func testClosingWhileBurstsArePendingLeavesNoTaskWaiting() async throws {
        for round in 0..<6 {
            let engine = try makeEngine { _ in }
            let before = server.count("/echo")
            let server = self.server!
            let outcomes = await run(engine, tasks: 32, count: 1_000) { _ in
                // Close once responses are flowing, from a thread of its own (close blocks).
                let threshold = before + 40 + 60 * round
                while server.count("/echo") < threshold { try? await Task.sleep(nanoseconds: 200_000) }
                await withCheckedContinuation { (closed: CheckedContinuation<Void, Never>) in
                    Thread.detachNewThread {
                        engine.close()
                        closed.resume()
                    }
                }
            }
            XCTAssertEqual(outcomes.count, 32)
            assertOwnResponses(outcomes)
            for (t, outcome) in outcomes.enumerated() where outcome.queries.count < 1_000 {
                XCTAssertTrue(outcome.ended == .cancelled || outcome.ended == .closed,
                              "round \(round), task \(t) ended with \(outcome.ended?.name ?? "nothing")")
            }
            XCTAssertEqual(engine.pending.queued + engine.pending.active, 0)
        }
    }

    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
    func testTasksOnTheExecutorAndOnTheGlobalExecutorShareOneEngine() async throws {
        let engine = self.engine!
        let executor = engine.taskExecutor
        let results = await withTaskGroup(of: (Int, Outcome).self) { group in
            for t in 0..<24 {
                if t % 2 == 0 {
                    group.addTask(executorPreference: executor) { (t, await Self.sendLoop(engine, task: t, count: 20)) }
                } else {
                    group.addTask { (t, await Self.sendLoop(engine, task: t, count: 20)) }
                }
            }
            var all = [Outcome](repeating: Outcome(), count: 24)
            for await (t, outcome) in group { all[t] = outcome }
            return all
        }
        assertOwnResponses(results)
        for (t, outcome) in results.enumerated() {
            XCTAssertNil(outcome.ended, "task \(t) ended with \(outcome.ended?.name ?? "")")
            XCTAssertEqual(outcome.queries.count, 20, "task \(t)")
        }
        XCTAssertEqual(server.count("/echo"), 24 * 20)
    }
}
