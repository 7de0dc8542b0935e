// CourierErrorTests.swift — every way a send fails, by code (never by message): the C core's
// checks, transport failures, HTTP status, validators, limits; and matching errors by code.

import Courier
import Foundation
import XCTest

final class CourierErrorTests: LoopbackTestCase {
    // MARK: - Refused before sending

    func testInvalidURL() async throws {
        let bare = try Engine()
        defer { bare.close() }
        await assertThrows(.invalidURL) { try await bare.send(.get("/relative/without/base")) }
        await assertThrows(.invalidURL) { try await bare.send(.get("ftp://127.0.0.1/x")) }
        await assertThrows(.invalidURL) { try await self.engine.send(.get("/echo").baseURL("not a url")) }
    }

    func testHeaderWithCRLFIsInvalid() async throws {
        await assertThrows(.invalidHeader) { try await self.engine.send(.get("/echo").header("X-A", "1\r\nX-Injected: 2")) }
        await assertThrows(.invalidHeader) { try await self.engine.send(.get("/echo").header("X-A", "a\nb")) }
        await assertThrows(.invalidHeader) { try await self.engine.send(.get("/echo").header("Bad Name", "v")) }
        await assertThrows(.invalidHeader) { try await self.engine.send(.get("/echo").header("X-Nul", "a\u{0}b")) }
        XCTAssertEqual(server.requests, 0)
    }

    func testParameterWithEmbeddedNULIsInvalidEncoding() async throws {
        await assertThrows(.invalidEncoding) { try await self.engine.send(.get("/echo").parameter("q", "a\u{0}b")) }
        await assertThrows(.invalidEncoding) { try await self.engine.send(.post("/echo").parameter("a\u{0}", "v")) }
        XCTAssertEqual(server.requests, 0)
    }

    func testMethodThatIsNotATokenIsInvalidArgument() async throws {
        await assertThrows(.invalidArgument) { try await self.engine.send(.method("GE T", "/echo")) }
        await assertThrows(.invalidArgument) { try await self.engine.send(.get("/echo").timeout(0)) }
        await assertThrows(.invalidArgument) { try await self.engine.send(.get("/echo").timeout(-1)) }
    }

    // MARK: - Transport failures

    func testTimeoutMatchesInACatchClause() async throws {
        var caught = false
        do {
            _ = try await engine.send(.get("/delay/3000").timeout(0.15))
        } catch CourierError.timeout {
            caught = true
        } catch {
            XCTFail("expected timeout, got \(error)")
        }
        XCTAssertTrue(caught)
        let error = await assertThrows(.timeout) { try await self.engine.send(.get("/delay/3000").timeout(0.15)) }
        XCTAssertNotNil(error?.curlCode)
        XCTAssertNil(error?.response)
    }

    func testCannotConnectToAClosedPort() async throws {
        let gone = try LoopbackServer()
        let port = gone.port
        gone.stop()
        await assertThrows(.cannotConnect) { try await self.engine.send(.get("http://127.0.0.1:\(port)/echo")) }
    }

    func testTooLarge() async throws {
        let small = try makeEngine { $0.maxResponseBytes = 1000 }
        defer { small.close() }
        await assertThrows(.tooLarge) { try await small.send(.get("/bytes/5000")) }
        await assertThrows(.tooLarge) { try await small.send(.get("/bytes/5000").parameter("chunked", "1")) }
        let fits = try await small.send(.get("/bytes/1000"))
        XCTAssertEqual(fits.body.count, 1000)
        XCTAssertEqual(Array(fits.body.prefix(3)), [0, 1, 2])
        XCTAssertEqual(fits.body[fits.body.startIndex + 251], 0)
    }

    func testPartialResponseAndReset() async throws {
        await assertThrows(.partialResponse) { try await self.engine.send(.get("/close-mid-body")) }
        await assertThrows(.network) { try await self.engine.send(.get("/reset")) }
    }

    // MARK: - Answers judged as failures

    func testHTTPStatusAttachesTheResponse() async throws {
        let error = await assertThrows(.httpStatus) { try await self.engine.send(.get("/status/404")) }
        XCTAssertEqual(error?.httpStatus, 404)
        XCTAssertEqual(error?.response?.status, 404)
        XCTAssertEqual(error?.response?.text, #"{"status":404}"#)
        XCTAssertEqual(error?.response?.method, "GET")
        let server = await assertThrows(.httpStatus) { try await self.engine.send(.post("/status/503")) }
        XCTAssertEqual(server?.response?.status, 503)
        let fine = try await engine.send(.get("/status/399"))
        XCTAssertEqual(fine.status, 399)
    }

    func testHTTPStatusThroughEveryStyle() throws {
        let done = expectation(description: "completion")
        let code = Locked<CourierError?>(nil)
        engine.send(.get("/status/418")) { outcome in
            if case .failure(let error) = outcome { code.set(error) }
            done.fulfill()
        }
        wait(for: [done], timeout: 20)
        XCTAssertEqual(code.get()?.code, .httpStatus)
        XCTAssertEqual(code.get()?.response?.status, 418)
    }

    // MARK: - Matching and describing codes

    func testCodesMirrorTheCCore() {
        let expected: [(CourierError.Code, Int32)] = [
            (.invalidArgument, -1), (.invalidURL, -2), (.cannotResolve, -3), (.cannotConnect, -4), (.timeout, -5),
            (.tls, -6), (.pinning, -7), (.cancelled, -8), (.httpStatus, -9), (.invalidResult, -10),
            (.tooLarge, -11), (.internal, -12), (.noMemory, -13), (.invalidHeader, -14), (.invalidEncoding, -15),
            (.partialResponse, -16), (.network, -17), (.closed, -18), (.store, -19), (.notFound, -20),
            (.tooFrequent, -21), (.init(rawValue: -22), -22), (.init(rawValue: -23), -23), (.init(rawValue: -24), -24),
            (.init(rawValue: -25), -25), (.init(rawValue: -26), -26), (.init(rawValue: -27), -27),
            (.tooManyRedirects, -28), (.redirectRefused, -29), (.bodyNotReplayable, -30), (.protocolError, -31),
            (.headersTooLarge, -32),
            (.init(rawValue: -34), -34),
            (.cacheInconsistent, -40),
            (.user, -41),
            (.resendPolicyUnknown, -43), (.deletedByPolicy, -44),
            (.unknownCharset, -46), (.charset, -47), (.clientCertificate, -48), (.cellular, -49),
            (.unknownName, -51), (.routeParameter, -52), (.catalog, -53),
            (.redis, -54), (.redisUnsupported, -55), (.numberRange, -56), (.again, -58),
            (.wsHandshake, -60), (.wsProtocolError, -61), (.wsClosed, -62), (.httpVersion, -63), (.noStub, -64),
            (.credentialRefused, -65), (.replicasUnconfirmed, -66),
        ]
        XCTAssertEqual(CourierError.Code.allKnown, expected.map(\.0))
        for (code, raw) in expected {
            XCTAssertEqual(code.rawValue, raw)
            XCTAssertTrue(code.isKnown)
            XCTAssertFalse(code.name.hasPrefix("unknown("))
            XCTAssertFalse(code.description.isEmpty)
        }
        XCTAssertEqual(Set(expected.map(\.0.name)).count, expected.count)
        XCTAssertEqual(CourierError.Code(rawValue: -22).name, "json")
        XCTAssertEqual(CourierError.Code(rawValue: -24).name, "api")
        XCTAssertEqual(CourierError.Code(rawValue: -25).name, "frozen")
        XCTAssertEqual(CourierError.Code(rawValue: -27).name, "journalCorrupt")
        XCTAssertEqual(CourierError.timeout, CourierError.Code.timeout)
        XCTAssertEqual(CourierError.notFound, .notFound)
    }

    func testUnknownCodesAreRepresented() {
        let code = CourierError.Code(rawValue: -999)
        XCTAssertFalse(code.isKnown)
        XCTAssertEqual(code.name, "unknown(-999)")
        XCTAssertEqual(CourierError.Code.unknown(-999), code)
        XCTAssertEqual(CourierError.Code.unknown(-5), .timeout)
    }

    func testPatternMatchingByCode() {
        let error: any Error = CourierError(.cancelled)
        XCTAssertTrue(CourierError.cancelled ~= error)
        XCTAssertFalse(CourierError.timeout ~= error)
        XCTAssertFalse(CourierError.timeout ~= NSError(domain: "x", code: -5))
        switch error {
        case CourierError.timeout: XCTFail("matched the wrong code")
        case CourierError.cancelled: break
        default: XCTFail("did not match")
        }
    }

    func testEqualityAndDefaults() {
        let a = CourierError(.httpStatus, message: "m", httpStatus: 500, response: Response(status: 500))
        let b = CourierError(.httpStatus, message: "m", httpStatus: 500, response: Response(status: 500))
        XCTAssertEqual(a, b)
        XCTAssertNotEqual(a, CourierError(.httpStatus, message: "m", httpStatus: 501))
        let bare = CourierError(.timeout)
        XCTAssertFalse(bare.message.isEmpty)
        XCTAssertNil(bare.httpStatus)
        XCTAssertNil(bare.curlCode)
        XCTAssertNil(bare.osError)
        XCTAssertNil(bare.storeError)
        XCTAssertNil(bare.response)
        XCTAssertTrue(bare.description.contains("timeout"))
    }
}
