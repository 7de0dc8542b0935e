// HSTSTests.swift — what the facade adds to HSTS: the list manager (preload, all, clear), the
// response's hstsUpgraded and the settings. The rules themselves are the C core's (hsts_test.c,
// over nginx with TLS); here an upgraded request to the plain loopback server fails its TLS
// handshake, which shows it went out as https://.

import Courier
import Foundation
import XCTest

final class HSTSTests: LoopbackTestCase {
    private func code(_ body: () throws -> Void) -> CourierError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? CourierError)?.code
        }
    }

    func testPreloadListAndClear() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("hsts-\(UUID().uuidString).txt")
        try "# preload\nlocalhost \"unlimited\"\n.example.org \"20991231 10:00:00\"\n"
            .write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        XCTAssertEqual(try engine.hsts.preload(from: file.path), 2)
        let all = try engine.hsts.all()
        XCTAssertEqual(all.map(\.host), ["example.org", "localhost"])
        XCTAssertEqual(all.map(\.includeSubdomains), [true, false])
        XCTAssertEqual(all[0].expires, Date(timeIntervalSince1970: 4_102_394_400))
        XCTAssertNil(all[1].expires)
        // http://localhost went out as https:// to a server that speaks plain HTTP.
        let url = server.baseURL.replacingOccurrences(of: "127.0.0.1", with: "localhost") + "/json"
        do {
            _ = try await engine.send(.get(url))
            XCTFail("an upgraded request reached the plain server")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .tls)
        }
        XCTAssertEqual(try engine.hsts.clear(), 2)
        XCTAssertEqual(try engine.hsts.all(), [])
        let plain = try await engine.send(.get(url))
        XCTAssertEqual(plain.status, 200)
        XCTAssertFalse(plain.hstsUpgraded)
        XCTAssertEqual(code { _ = try self.engine.hsts.preload(from: "/no/such/file") }, .notFound)
    }

    func testHSTSOff() throws {
        let off = try makeEngine { $0.hsts = false }
        XCTAssertFalse(off.configuration.hsts)
        XCTAssertEqual(code { _ = try off.hsts.all() }, .invalidArgument)
        XCTAssertEqual(code { _ = try off.hsts.clear() }, .invalidArgument)
        off.close()
        let alt = try makeEngine { $0.altSvc = true }
        XCTAssertTrue(alt.configuration.altSvc)
        alt.close()
    }
}
