// GroupTests.swift — batch, chain, ifSucceeds and dependent requests over the loopback server:
// results in order, fail-fast, the in-flight limit seen by the server, chain order and stopping,
// requests built from the previous response, skipping, and task cancellation reaching the C group.

import Courier
import Foundation
import XCTest

final class GroupTests: LoopbackTestCase {
    // MARK: - Batch

    func testBatchReturnsEveryResultInOrder() async throws {
        let results = await engine.batch([.get("/echo/a"), .get("/status/404"), .post("/echo/c")])
        XCTAssertEqual(results.count, 3)
        XCTAssertEqual(try Echo(try results[0].get()).path, "/echo/a")
        guard case .failure(let error) = results[1] else { return XCTFail("expected a failure") }
        XCTAssertEqual(error.code, .httpStatus)
        XCTAssertEqual(error.response?.status, 404)
        XCTAssertEqual(try Echo(try results[2].get()).method, "POST")
        let ids = results.compactMap { try? $0.get().requestID }
        XCTAssertEqual(Set(ids).count, 2)
    }

    func testEmptyBatch() async {
        let results = await engine.batch([Request]())
        XCTAssertTrue(results.isEmpty)
    }

    func testFailFastCancelsTheRest() async throws {
        let results = await engine.batch([.get("/hang?m=0"), .get("/status/500"), .get("/echo/never1"), .get("/echo/never2")],
                                         failFast: true, maxInFlight: 2)
        XCTAssertEqual(results.map { (try? $0.get()) == nil }, [true, true, true, true])
        let codes = results.map { result -> CourierError.Code? in
            if case .failure(let error) = result { return error.code }
            return nil
        }
        XCTAssertEqual(codes, [.cancelled, .httpStatus, .cancelled, .cancelled])
        XCTAssertEqual(server.count("/echo/never1"), 0)
        XCTAssertEqual(server.count("/echo/never2"), 0)
    }

    func testMaxInFlightHoldsRequestsBack() async throws {
        // Every send announces itself (WILL_SEND, before its FINISHED, so before the batch returns).
        let sends = Locked(0)
        try engine.addEventMonitor(kinds: [.willSend]) { event in
            if event.url?.contains("/hang") == true { sends.mutate { $0 += 1 } }
        }
        let requests = (0..<5).map { Request.get("/hang").parameter("m", String($0)) }
        let task = Task { await engine.batch(requests, maxInFlight: 2) }
        waitUntil("two requests reach the server") { server.count("/hang") == 2 }
        XCTAssertEqual(server.count("/hang"), 2)
        XCTAssertEqual(engine.pending.active, 2)
        XCTAssertEqual(engine.pending.queued, 0)
        task.cancel()
        let results = await task.value
        for result in results {
            guard case .failure(let error) = result else { return XCTFail("expected cancelled") }
            XCTAssertEqual(error.code, .cancelled)
        }
        XCTAssertEqual(sends.get(), 2) // the three held back were never sent
        XCTAssertEqual(server.count("/hang"), 2)
    }

    func testBatchOfRequestables() async throws {
        struct Item: Requestable {
            let id: Int
            var path: String { "/echo/item" }
            var parameters: [String: String] { ["id": String(id)] }
        }
        let results = await engine.batch([Item(id: 1), Item(id: 2)])
        XCTAssertEqual(try results.map { try Echo(try $0.get()).query }, ["id=1", "id=2"])
    }

    // MARK: - Chain

    func testChainRunsInOrderAndReturnsTheLastResponse() async throws {
        let ids = Locked<[RequestID]>([])
        let token = try engine.addEventMonitor(kinds: [.didSend]) { event in ids.mutate { $0.append(event.requestID) } }
        defer { engine.removeEventMonitor(token) }
        let last = try await engine.chain {
            Request.get("/delay/40")
            Request.get("/delay/1")
            Request.get("/echo/last")
        }
        XCTAssertEqual(try Echo(last).path, "/echo/last")
        let seen = ids.get()
        XCTAssertEqual(seen.count, 3)
        XCTAssertEqual(seen, seen.sorted())
    }

    func testChainBuildsTheNextRequestFromTheResponse() async throws {
        let last = try await engine.chain {
            Request.get("/echo/login").parameter("user", "42")
            ChainStep.then { login in
                let echo = try JSONSerialization.jsonObject(with: login.body) as? [String: Any]
                let query = echo?["query"] as? String ?? ""
                return .get("/echo/profile?" + query + "&status=\(login.status)")
            }
        }
        let echo = try Echo(last)
        XCTAssertEqual(echo.path, "/echo/profile")
        XCTAssertEqual(echo.query, "user=42&status=200")
    }

    func testChainFailureStopsAndThrowsItsError() async throws {
        let error = await assertThrows(.httpStatus) {
            try await engine.chain {
                Request.get("/echo/one")
                Request.get("/status/503")
                Request.get("/echo/never")
            }
        }
        XCTAssertEqual(error?.response?.status, 503)
        XCTAssertEqual(server.count("/echo/never"), 0)

        let outcome = await engine.chainResults {
            Request.get("/echo/one")
            Request.get("/status/503")
            Request.get("/echo/never")
        }
        XCTAssertEqual(outcome.failedIndex, 1)
        XCTAssertEqual(outcome.error?.code, .httpStatus)
        XCTAssertEqual(outcome.responses.count, 1)
        if case .failure(let never)? = outcome.results[2] { XCTAssertEqual(never.code, .cancelled) }
        else { XCTFail("the unsent step must be cancelled") }
        XCTAssertEqual(server.count("/echo/never"), 0)
    }

    func testContinuingOnFailureAndSkippedSteps() async throws {
        let sawPrevious = Locked<Bool?>(nil)
        let outcome = await engine.chainResults {
            ChainStep.send(.get("/status/500")).continuingOnFailure()
            ChainStep.then { _ in .get("/echo/skipped") } // no response to build from: skipped
            ChainStep.after { previous in
                sawPrevious.set(previous != nil)
                return .get("/echo/after")
            }
        }
        XCTAssertEqual(sawPrevious.get(), false) // the previous step was skipped
        XCTAssertNil(outcome.error)
        if case .failure(let first)? = outcome.results[0] { XCTAssertEqual(first.code, .httpStatus) }
        else { XCTFail("the first step failed and continued") }
        XCTAssertNil(outcome.results[1])
        XCTAssertEqual(try Echo(try XCTUnwrap(outcome.results[2]).get()).path, "/echo/after")
        XCTAssertEqual(server.count("/echo/skipped"), 0)
    }

    func testAThrowingStepFailsTheChainWithItsError() async throws {
        struct Refused: Error, Equatable {}
        do {
            _ = try await engine.chain {
                Request.get("/echo/first")
                ChainStep.then { _ in throw Refused() }
                Request.get("/echo/never")
            }
            XCTFail("expected the step's error")
        } catch let error as Refused {
            XCTAssertEqual(error, Refused())
        }
        XCTAssertEqual(server.count("/echo/never"), 0)
    }

    func testIfSucceedsPicksTheBranch() async throws {
        let then = try await engine.ifSucceeds(.get("/echo/a"), then: .get("/echo/then"), else: .get("/echo/else"))
        XCTAssertEqual(try Echo(then).path, "/echo/then")
        let otherwise = try await engine.ifSucceeds(.get("/status/500"), then: .get("/echo/then"), else: .get("/echo/else"))
        XCTAssertEqual(try Echo(otherwise).path, "/echo/else")
        let fromError = try await engine.ifSucceeds(.get("/status/404"), then: { _ in .get("/echo/then") },
                                                    else: { error in .get("/echo/else").parameter("s", String(error.httpStatus ?? 0)) })
        XCTAssertEqual(try Echo(fromError).query, "s=404")
        await assertThrows(.httpStatus) {
            try await engine.ifSucceeds(.get("/echo/a"), then: .get("/status/502"), else: .get("/echo/else"))
        }
    }

    func testDependentRequestFromAModel() async throws {
        struct Login: Decodable, Sendable {
            let query: String
        }
        let response = try await engine.send(.get("/echo/login").parameter("token", "t1"), as: Login.self) { login in
            .get("/echo/next").parameter("prev", login.query)
        }
        XCTAssertEqual(try Echo(response).query, "prev=token%3Dt1")
        let plain = try await engine.send(.get("/status/201")) { first in .get("/echo/x").parameter("s", String(first.status)) }
        XCTAssertEqual(try Echo(plain).query, "s=201")
    }

    // MARK: - Cancellation

    func testCancellingTheTaskCancelsTheChain() async throws {
        let task = Task {
            try await engine.chain {
                Request.get("/hang?chain=1")
                Request.get("/echo/never")
            }
        }
        waitUntil("the first step reaches the server") { server.count("/hang") == 1 }
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("expected cancelled")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .cancelled)
        }
        XCTAssertEqual(server.count("/echo/never"), 0)
        XCTAssertEqual(engine.pending.active + engine.pending.queued, 0)
    }

    func testAnAlreadyCancelledTaskSendsNothing() async throws {
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await engine.batch([.get("/echo/never")])
        }
        let results = await task.value
        guard case .failure(let error) = results[0] else { return XCTFail("expected cancelled") }
        XCTAssertEqual(error.code, .cancelled)
        XCTAssertEqual(server.count("/echo/never"), 0)
    }

    func testClosingTheEngineEndsAGroup() async throws {
        let engine = try makeEngine { _ in }
        let task = Task { await engine.batch([.get("/hang?close=1"), .get("/hang?close=2")]) }
        waitUntil("both requests reach the server") { server.count("/hang") == 2 }
        engine.close()
        let results = await task.value
        XCTAssertEqual(results.count, 2)
        for result in results {
            guard case .failure(let error) = result else { return XCTFail("expected a failure") }
            XCTAssertEqual(error.code, .cancelled)
        }
        let after = await engine.batch([.get("/echo")])
        guard case .failure(let closed) = after[0] else { return XCTFail("expected closed") }
        XCTAssertEqual(closed.code, .closed)
    }

    func testABadRequestFailsOnlyItsMember() async throws {
        let results = await engine.batch([.get("/echo").header("Bad Name", "x"), .get("/echo/ok")])
        guard case .failure(let error) = results[0] else { return XCTFail("expected a failure") }
        XCTAssertEqual(error.code, .invalidHeader)
        XCTAssertEqual(try Echo(try results[1].get()).path, "/echo/ok")
    }
}
