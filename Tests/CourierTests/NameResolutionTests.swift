// NameResolutionTests.swift — the name and socket settings reaching the C core from Swift: resolve
// and connectTo per engine and per request (the URL's host kept for the Host field), the remote
// address in the metrics, DoH, the IP version, a Unix socket per engine and TCP per request, and
// values the C core refuses thrown as invalidArgument.

import Courier
import Foundation
import XCTest

final class NameResolutionTests: LoopbackTestCase {
    func testEngineResolveReachesAMadeUpNameAndTheMetricsSayWhere() async throws {
        let port = server.port
        let resolving = try makeEngine {
            $0.resolve = [ResolveEntry(host: "api.test", port: port, addresses: ["127.0.0.1"])]
            $0.dnsCacheLifetime = 30
            $0.happyEyeballsDelay = 0.1
            $0.ipVersion = .v4
        }
        defer { resolving.close() }
        let response = try await resolving.send(.get("http://api.test:\(port)/echo"))
        XCTAssertEqual(try Echo(response).header("Host"), "api.test:\(port)")
        XCTAssertEqual(response.metrics.remoteIP, "127.0.0.1")
        XCTAssertEqual(response.metrics.remotePort, port)
        XCTAssertFalse(response.metrics.connectionReused)
        let again = try await resolving.send(.get("http://api.test:\(port)/echo"))
        XCTAssertTrue(again.metrics.connectionReused)
    }

    func testRequestOverridesAreItsOwn() async throws {
        let port = server.port
        let elsewhere = try makeEngine {
            $0.connectTo = [ConnectToEntry(host: "api.test", port: 80, toHost: "127.0.0.1", toPort: 1)]
        }
        defer { elsewhere.close() }
        await assertThrows(.cannotConnect) { try await elsewhere.send(.get("http://api.test/echo")) }
        let connected = try await elsewhere.send(
            Request.get("http://api.test/echo").connectTo(host: "api.test", port: 80, toHost: "127.0.0.1", toPort: port))
        XCTAssertEqual(try Echo(connected).header("Host"), "api.test")
        let resolved = try await engine.send(
            Request.get("http://api.test:\(port)/echo").resolve(host: "api.test", port: port, addresses: ["127.0.0.1"]))
        XCTAssertEqual(try Echo(resolved).header("Host"), "api.test:\(port)")
        await assertThrows(.cannotResolve) { try await self.engine.send(.get("http://api.test:\(port)/echo")) }
        await assertThrows(.cannotConnect) { try await elsewhere.send(.get("http://api.test/echo")) }
    }

    func testUnixSocketPerEngineAndTCPPerRequest() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("nobody-\(UUID()).sock").path
        let overSocket = try makeEngine { $0.unixSocket = path }
        defer { overSocket.close() }
        await assertThrows(.cannotConnect) { try await overSocket.send(.get("/echo")) }
        let overTCP = try await overSocket.send(Request.get("/echo").unixSocket(nil))
        XCTAssertEqual(overTCP.status, 200)
        XCTAssertEqual(overTCP.metrics.remotePort, server.port)
    }

    func testDoHAndRefusedValues() async throws {
        let doh = try makeEngine { $0.dohURL = "https://127.0.0.1:1/dns-query" }
        defer { doh.close() }
        let viaAddress = try await doh.send(.get("/echo"))
        XCTAssertEqual(viaAddress.status, 200) // an address needs no resolving
        XCTAssertThrowsError(try makeEngine { $0.dohURL = "http://127.0.0.1/dns-query" }) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidURL)
        }
        XCTAssertThrowsError(try makeEngine { $0.resolve = [ResolveEntry(host: "a.test", port: 80, addresses: ["nope"])] }) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
        }
        await assertThrows(.invalidArgument) {
            try await self.engine.send(Request.get("/echo").connectTo(host: "a.test", port: 0, toHost: "b.test", toPort: 1))
        }
    }
}

final class HTTPVersionTests: LoopbackTestCase {
    func testRequiredHTTP2FromAnHTTP11ServerThrowsAndARequestMayReplaceIt() async throws {
        let h2Only = try makeEngine { $0.httpVersion = .http2Only }
        defer { h2Only.close() }
        await assertThrows(.httpVersion) { try await h2Only.send(.get("/echo")) }
        let plain = try await h2Only.send(Request.get("/echo").httpVersion(.automatic))
        XCTAssertEqual(plain.metrics.httpVersion, 11)
        await assertThrows(.httpVersion) { try await self.engine.send(Request.get("/echo").httpVersion(.http2Only)) }
        let forbidden = try await engine.send(Request.get("/echo").httpVersion(.http1_1))
        XCTAssertEqual(forbidden.metrics.httpVersion, 11)
    }

    func testHTTP3IsThereOnlyWhereLibcurlHasIt() throws {
        if HTTPVersion.http3Available {
            XCTAssertNoThrow(try makeEngine { $0.httpVersion = .http3 }.close())
        } else {
            XCTAssertThrowsError(try makeEngine { $0.httpVersion = .http3Only }) {
                XCTAssertEqual(($0 as? CourierError)?.code, .httpVersion)
            }
        }
    }
}

final class ContentCodingTests: LoopbackTestCase {
    func testCodedBytesPerEngineAndPerRequest() async throws {
        let path = "/origin/swift-coded?Content-Encoding=gzip&_gzip=1"
        let decoded = try await engine.send(.get(path))
        XCTAssertEqual(decoded.text, "decoded body")
        XCTAssertNil(decoded.header("Content-Encoding"))
        let coded = try await engine.send(Request.get(path).decodeContent(false))
        XCTAssertEqual(Array(coded.body.prefix(2)), [0x1f, 0x8b])
        XCTAssertEqual(coded.header("Content-Encoding"), "gzip")
        let raw = try makeEngine { $0.decodeContent = false }
        defer { raw.close() }
        let rawCoded = try await raw.send(.get(path))
        XCTAssertEqual(Array(rawCoded.body.prefix(2)), [0x1f, 0x8b])
        let rawDecoded = try await raw.send(Request.get(path).decodeContent(true))
        XCTAssertEqual(rawDecoded.text, "decoded body")
    }
}

final class PoolLimitTests: LoopbackTestCase {
    func testLimitsReachTheEngineAndAreChecked() async throws {
        let limited = try makeEngine {
            $0.maxIdleConnections = 1
            $0.idleConnectionTimeout = 30
        }
        defer { limited.close() }
        let response = try await limited.send(.get("/echo"))
        XCTAssertEqual(response.status, 200)
        XCTAssertThrowsError(try makeEngine { $0.maxIdleConnections = 0 }) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
        }
    }
}
