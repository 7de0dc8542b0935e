// UserErrorTests.swift — an error a closure throws (an interceptor, a customize hook, a mock, a
// custom transport) travels with its send through the C core's per-send slot (`courier_raise`)
// and the send rethrows that very error, however many sends are in flight; the facade keeps no
// table of its own.

import Courier
import Foundation
import XCTest

/// A user error type the core knows nothing about; a class, so identity can be asserted.
final class Mine: Error, @unchecked Sendable {
    let tag: String
    init(_ tag: String) { self.tag = tag }
}

final class UserErrorTests: LoopbackTestCase {
    private func thrown<T>(_ body: () async throws -> T) async -> (any Error)? {
        do {
            _ = try await body()
            return nil
        } catch {
            return error
        }
    }

    func testEachKindOfClosureGivesBackTheSameError() async throws {
        let adaptError = Mine("adapt")
        let inspectError = Mine("inspect")
        let adapting = try makeEngine { $0.interceptors = [ClosureInterceptor(adapt: { _ in throw adaptError })] }
        defer { adapting.close() }
        var error = await thrown { try await adapting.send(.get("/json")) }
        XCTAssertTrue(error as? Mine === adaptError)
        error = await thrown { try adapting.sendSync(.get("/json")) }
        XCTAssertTrue(error as? Mine === adaptError)

        let inspecting = try makeEngine { $0.interceptors = [ClosureInterceptor(inspect: { _, _ in throw inspectError })] }
        defer { inspecting.close() }
        error = await thrown { try await inspecting.send(.get("/json")) }
        XCTAssertTrue(error as? Mine === inspectError)
        error = await thrown { try inspecting.sendSync(.get("/json")) }
        XCTAssertTrue(error as? Mine === inspectError)

        let customizeError = Mine("customize")
        error = await thrown { try await self.engine.send(.get("/json").customize { _ in throw customizeError }) }
        XCTAssertTrue(error as? Mine === customizeError)
        error = await thrown { try self.engine.sendSync(.get("/json").customize { _ in throw customizeError }) }
        XCTAssertTrue(error as? Mine === customizeError)

        let mockError = Mine("mock")
        let mocking = try makeEngine { $0.mockEnabled = true }
        defer { mocking.close() }
        error = await thrown { try await mocking.send(.get("/json").mock { _ in throw mockError }) }
        XCTAssertTrue(error as? Mine === mockError)

        let transportError = Mine("transport")
        let transporting = try makeEngine {
            $0.transports["failing"] = ClosureTransport { _ in throw transportError }
        }
        defer { transporting.close() }
        error = await thrown { try await transporting.send(.get("/json").transport("failing")) }
        XCTAssertTrue(error as? Mine === transportError)
    }

    func testACourierErrorThrownKeepsItsCodeAndGetsTheResponse() async throws {
        let inspecting = try makeEngine {
            $0.interceptors = [ClosureInterceptor(inspect: { _, _ in throw CourierError(.api, message: "no") })]
        }
        defer { inspecting.close() }
        let error = await thrown { try await inspecting.send(.get("/json")) } as? CourierError
        XCTAssertEqual(error?.code, .api)
        XCTAssertEqual(error?.response?.status, 200)
        // A completion handler gets the C core's failure: the code thrown.
        let done = expectation(description: "completion")
        inspecting.send(.get("/json")) { result in
            if case .failure(let failure) = result { XCTAssertEqual(failure.code, .api) }
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: 10)
    }

    func testManyConcurrentSendsEachGetTheirOwnError() async throws {
        let errors = Locked<[RequestID: Mine]>([:])
        let inspecting = try makeEngine {
            $0.interceptors = [ClosureInterceptor(inspect: { _, id in
                let error = Mine("\(id.rawValue)")
                errors.mutate { $0[id] = error }
                throw error
            })]
        }
        defer { inspecting.close() }
        let caught = await withTaskGroup(of: (any Error)?.self) { group -> [(any Error)?] in
            for i in 0..<200 { // more than the 64 the old table kept; distinct URLs, never coalesced
                group.addTask { await self.thrown { try await inspecting.send(.get("/echo?n=\(i)")) } }
            }
            var all: [(any Error)?] = []
            for await error in group { all.append(error) }
            return all
        }
        XCTAssertEqual(caught.count, 200)
        let kept = errors.get()
        XCTAssertEqual(kept.count, 200)
        for error in caught {
            let mine = try XCTUnwrap(error as? Mine)
            XCTAssertTrue(kept.values.contains { $0 === mine })
        }
        XCTAssertEqual(Set(caught.map { ($0 as? Mine)?.tag ?? "" }).count, 200) // each its own
    }
}
