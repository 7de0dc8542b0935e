// StubsSwiftTesting.swift — the stubs from Swift Testing (@Test, #expect), with no server at all: an
// app's own test as it would be written with the swift-testing library (StubsTests does the same from
// XCTest, and with the loopback server for pass-through and HAR).

import Courier
import Foundation
import Testing

@Suite struct StubsWithSwiftTesting {
    @Test func stubsAnswerWithoutAServer() async throws {
        var configuration = Configuration(baseURL: "https://api.example.test")
        configuration.temporaryStore = true
        configuration.stubMode = .only
        configuration.stubs = [Stub(.get("/users/1"), .json(#"{"id":1}"#))]
        let engine = try Engine(configuration: configuration)
        defer { engine.close() }
        let user = try await engine.send(.get("users/1"))
        #expect(user.text == #"{"id":1}"#)
        #expect(user.header("content-type") == "application/json")
        await #expect(throws: CourierError.self) { try await engine.send(.get("users/2")) }
        let seen = engine.stubs.requests
        #expect(seen.map(\.url) == ["https://api.example.test/users/1", "https://api.example.test/users/2"])
        #expect(seen[0].stubID != nil && seen[1].stubID == nil)
    }
}
