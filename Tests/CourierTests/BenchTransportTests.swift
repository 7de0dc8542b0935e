// BenchTransportTests.swift — `courier bench transport --tls/--h2 --json` run briefly as a process:
// its keys, and that nginx saw one TLS handshake per connection for every client in every run. No
// rate is asserted (the machine's speed is not the test's business). Skipped without nginx.

import Foundation
import XCTest

final class BenchTransportTests: XCTestCase {
    /// The clients to run: URLSession over TLS runs in a namespace of its own (`unshare`), which
    /// some machines forbid; the others always.
    private func clients() -> String {
        var list = "curl,curl_headers,courier_c,courier_swift,courier_swift_executor,h2load"
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["--user", "--map-root-user", "--mount", "true"]
        probe.standardError = FileHandle.nullDevice
        if (try? probe.run()) != nil {
            probe.waitUntilExit()
            if probe.terminationStatus == 0 { list += ",urlsession" }
        }
        return list
    }

    private func bench(_ mode: String) throws -> [String: Any] {
        guard ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx", "/opt/homebrew/bin/nginx"]
            .contains(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("nginx is not installed (scripts/setup installs it)")
        }
        let process = Process()
        process.executableURL = try courierToolURL()
        process.arguments = ["bench", "transport", mode, "--json", "--requests", "300", "--urlsession-requests", "30",
                             "--warmup", "20", "--concurrency", "4", "--runs", "2", "--clients", clients()]
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_TLS_FIXTURE"] = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/tls-fixture").path
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let progress = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, progress)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any], progress)
    }

    private func check(_ object: [String: Any], mode: String, http: String) throws {
        for key in ["curl_rps", "curl_headers_rps", "courier_c_rps", "courier_swift_rps", "courier_swift_executor_rps",
                    "urlsession_rps", "h2load_rps"] {
            XCTAssertTrue(object.keys.contains(key), key)
        }
        XCTAssertEqual(object["mode"] as? String, mode)
        XCTAssertEqual(object["ok"] as? Bool, true)
        let tls = try XCTUnwrap(object["tls"] as? [String: Any])
        let versions = try XCTUnwrap(object["http_version"] as? [String: Any])
        let handshakes = try XCTUnwrap(object["handshakes"] as? [String: [Int]])
        let connections = try XCTUnwrap(object["connections"] as? [String: [Int]])
        let counted = try XCTUnwrap(object["client_connections"] as? [String: [Int]])
        XCTAssertEqual(object["handshakes_equal_connections"] as? Bool, true)
        for client in clients().split(separator: ",").map(String.init) {
            XCTAssertEqual((tls[client] as? String)?.hasPrefix("TLSv1."), true, client)
            XCTAssertEqual(versions[client] as? String, http, client)
            let made = try XCTUnwrap(handshakes[client], client)
            XCTAssertEqual(made.count, 2, client)
            XCTAssertEqual(made, connections[client], client)
            // Kept alive: never more connections than requests in flight; over h2 one for all, but
            // URLSession's (it does not wait for the first connection's ALPN answer: on a slow run
            // it opens a few).
            let most = http == "2.0" && client != "urlsession" ? 1 : 4
            for n in made { XCTAssertTrue(n >= 1 && n <= most, "\(client): \(made)") }
            if let mine = counted[client] { XCTAssertEqual(mine, made, client) }
        }
        XCTAssertNotNil(counted["courier_c"])
    }

    func testHTTPS11HandshakesEqualConnections() throws {
        try check(try bench("--tls"), mode: "tls", http: "1.1")
    }

    func testH2HandshakesEqualConnections() throws {
        try check(try bench("--h2"), mode: "h2", http: "2.0")
    }
}
