// SecurityTests.swift — security policies per engine and per request against a real nginx with a
// CA made for the run (scripts/tls-fixture). Skipped, saying why, without nginx (scripts/setup
// installs it).

import Courier
import Foundation
import XCTest

final class SecurityTests: XCTestCase {
    private var nginx: Process?
    private var dir = ""
    private var port = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        let candidates = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/opt/homebrew/bin/nginx", "/usr/local/bin/nginx"]
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("nginx is not installed (scripts/setup installs it); the TLS policy tests need it")
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("courier-tls-\(UUID())").path
        let server = try LoopbackServer() // a free port: bound, then closed
        port = server.port
        server.stop()
        let fixture = Process()
        fixture.executableURL = URL(fileURLWithPath: "/bin/bash")
        fixture.arguments = [root.appendingPathComponent("scripts/tls-fixture").path, dir, String(port)]
        try fixture.run()
        fixture.waitUntilExit()
        XCTAssertEqual(fixture.terminationStatus, 0)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-p", dir, "-e", dir + "/error.log", "-c", dir + "/nginx.conf"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        nginx = process
        let engine = try Engine(configuration: configuration(SecurityPolicy(allowInvalidCertificates: true)))
        defer { engine.close() }
        for _ in 0..<500 {
            if (try? engine.sendSync(.get(url("localhost")))) != nil { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    override func tearDown() {
        nginx?.terminate()
        nginx?.waitUntilExit()
        try? FileManager.default.removeItem(atPath: dir)
        super.tearDown()
    }

    private func file(_ name: String) -> String { dir + "/" + name }
    private func url(_ host: String, _ path: String = "/") -> String { "https://\(host):\(port)\(path)" }
    private func configuration(_ policy: SecurityPolicy?) -> Configuration {
        var configuration = Configuration()
        configuration.temporaryStore = true
        configuration.timeout = 20
        configuration.security = policy
        return configuration
    }

    func testSwitchesPinningAndRequestPolicies() async throws {
        let engine = try Engine(configuration: configuration(SecurityPolicy(caFile: file("ca.pem"))))
        defer { engine.close() }
        let ok = try await engine.send(.get(url("localhost")))
        XCTAssertEqual(ok.text, "ok")
        do {
            _ = try await engine.send(.get(url("127.0.0.1")))
            XCTFail("the certificate names localhost only")
        } catch CourierError.tls {}
        let noName = SecurityPolicy(validatesDomainName: false, caFile: file("ca.pem"))
        let r1 = try await engine.send(.get(url("127.0.0.1")).security(noName))
        XCTAssertEqual(r1.status, 200)
        do {
            _ = try await engine.send(.get(url("127.0.0.1")).security(SecurityPolicy(allowInvalidCertificates: true)))
            XCTFail("allowInvalidCertificates leaves the name check on")
        } catch CourierError.tls {}
        let pin = try String(contentsOfFile: file("server.pin"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let pinned = SecurityPolicy(pinning: .publicKey(pin), caFile: file("ca.pem"))
        let r2 = try await engine.send(.get(url("localhost")).security(pinned))
        XCTAssertEqual(r2.status, 200)
        let certificate = SecurityPolicy(pinning: .certificate(path: file("server.pem")))
        let r3 = try await engine.send(.get(url("localhost")).security(certificate))
        XCTAssertEqual(r3.status, 200)
        do {
            _ = try await engine.send(.get(url("localhost"))
                .security(SecurityPolicy(pinning: .certificate(path: file("other.pem")), allowInvalidCertificates: true)))
            XCTFail("another certificate is pinned")
        } catch CourierError.pinning {}
    }

    func testClientCertificates() async throws {
        let mtls = SecurityPolicy(caFile: file("ca.pem"), clientCertificate: file("client.pem"),
                                  clientKey: file("client.key"), clientKeyPassword: "secret")
        let engine = try Engine(configuration: configuration(mtls))
        defer { engine.close() }
        let r4 = try await engine.send(.get(url("localhost", "/mtls")))
        XCTAssertEqual(r4.text, "client CN=courier-client")
        do {
            _ = try await engine.send(.get(url("localhost", "/mtls")).security(SecurityPolicy(caFile: file("ca.pem"))))
            XCTFail("no client certificate")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .httpStatus)
            XCTAssertEqual(error.response?.status, 403)
        }
        let wrong = try Engine(configuration: configuration(SecurityPolicy(
            caFile: file("ca.pem"), clientCertificate: file("client.pem"), clientKey: file("client.key"),
            clientKeyPassword: "wrong")))
        defer { wrong.close() }
        do {
            _ = try await wrong.send(.get(url("localhost", "/mtls")))
            XCTFail("the key does not open")
        } catch CourierError.clientCertificate {}
    }

    /// Certificate status required: "ocsp.localhost" staples a good OCSP response and answers,
    /// "nostaple.localhost" staples none and fails with .tls (curl code 91) before its body; without
    /// the requirement it answers.
    func testCertificateStatus() async throws {
        var config = configuration(SecurityPolicy(caFile: file("ca.pem"), requiresCertificateStatus: true))
        config.resolve = [ResolveEntry(host: "ocsp.localhost", port: port, addresses: ["127.0.0.1"]),
                          ResolveEntry(host: "nostaple.localhost", port: port, addresses: ["127.0.0.1"])]
        let engine = try Engine(configuration: config)
        defer { engine.close() }
        let stapled = try await engine.send(.get(url("ocsp.localhost")))
        XCTAssertEqual(stapled.text, "stapled")
        do {
            _ = try await engine.send(.get(url("nostaple.localhost")))
            XCTFail("no stapled OCSP response")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .tls)
            XCTAssertEqual(error.curlCode, 91)
            XCTAssertNil(error.response)
        }
        let unchecked = try await engine.send(.get(url("nostaple.localhost")).security(SecurityPolicy(caFile: file("ca.pem"))))
        XCTAssertEqual(unchecked.text, "no staple")
    }
}
