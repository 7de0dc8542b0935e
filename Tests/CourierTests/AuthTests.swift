// AuthTests.swift — what the facade adds to cookies, authentication and proxies: the Cookie values
// and the jar manager, the async challenge handler (answered once, declined, never for another
// origin), credentials and proxies as configuration and request settings, the proxy error code.

import Courier
import Foundation
import XCTest

final class AuthTests: LoopbackTestCase {
    /// The code of the CourierError `body` throws, or nil.
    private func code(_ body: () throws -> Void) -> CourierError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? CourierError)?.code
        }
    }

    private func cookieHeader(_ engine: Engine, _ path: String = "/cookies") async throws -> String {
        let response = try await engine.send(.get(path))
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return object?["cookie"] as? String ?? "(none)"
    }

    func testCookieJarFromTheServerAndTheManager() async throws {
        let header = try await cookieHeader(engine, "/cookies/set?a=1")
        XCTAssertTrue(header.contains("a=1"))
        XCTAssertEqual(try engine.cookies.all().map(\.name), ["a"])
        let later = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3600).rounded(.down))
        try engine.cookies.set(Cookie(name: "token", value: "t", domain: "127.0.0.1", expires: later, httpOnly: true))
        let again = try await cookieHeader(engine)
        XCTAssertTrue(again.contains("token=t"))
        let token = try XCTUnwrap(try engine.cookies.all().first { $0.name == "token" })
        XCTAssertEqual(token.expires, later)
        XCTAssertTrue(token.httpOnly)
        XCTAssertFalse(token.secure)
        try engine.cookies.remove(name: "a", domain: "127.0.0.1")
        XCTAssertEqual(code { try self.engine.cookies.remove(name: "a", domain: "127.0.0.1") }, .notFound)
        XCTAssertEqual(code { try self.engine.cookies.set(Cookie(name: "x;y", value: "v", domain: "127.0.0.1")) },
                       .invalidHeader)
        XCTAssertEqual(try engine.cookies.clear(), 1)
        let empty = try await cookieHeader(engine)
        XCTAssertEqual(empty, "")
    }

    func testCookiesOff() async throws {
        let off = try makeEngine { $0 = $0.cookies(false) }
        let header = try await cookieHeader(off, "/cookies/set?a=1")
        XCTAssertEqual(header, "")
        XCTAssertEqual(code { _ = try off.cookies.all() }, .invalidArgument)
        off.close()
    }

    func testAsyncChallengeHandlerAnswersOnce() async throws {
        let seen = Locked<[AuthChallenge]>([])
        let answering = try makeEngine {
            $0 = $0.challengeHandler { challenge in
                seen.mutate { $0.append(challenge) }
                try? await Task.sleep(nanoseconds: 1_000_000) // answers after a suspension
                return Credentials(user: "u", password: "p")
            }
        }
        let response = try await answering.send(.get("/digest-auth/u/p"))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(seen.get().count, 1)
        XCTAssertEqual(seen.get().first?.status, 401)
        XCTAssertEqual(seen.get().first?.url, server.baseURL + "/digest-auth/u/p")
        XCTAssertTrue(seen.get().first?.header.contains("Digest") ?? false)
        // Wrong credentials: asked once, then the 401.
        do {
            _ = try await answering.send(.get("/basic-auth/u/other"))
            XCTFail("expected a 401")
        } catch CourierError.httpStatus {}
        XCTAssertEqual(seen.get().count, 2)
        // Never for another origin (localhost is not 127.0.0.1).
        do {
            _ = try await answering.send(.get("/redirect?to=http%3A%2F%2Flocalhost%3A\(server.port)%2Fbasic-auth%2Fu%2Fp"))
            XCTFail("expected a 401")
        } catch CourierError.httpStatus {}
        XCTAssertEqual(seen.get().count, 2)
        answering.close()
    }

    func testRequestHandlerDeclinesAndCredentialsSetting() async throws {
        do {
            _ = try await engine.send(.get("/basic-auth/u/p").challengeHandler { _ in nil })
            XCTFail("expected a 401")
        } catch CourierError.httpStatus {}
        let response = try await engine.send(.get("/any-auth/u/p").credentials(Credentials(user: "u", password: "p",
                                                                                          schemes: .anySafe)))
        XCTAssertTrue(response.text?.contains("\"scheme\":\"Digest\"") ?? false)
        XCTAssertTrue(AuthSchemes.available.isSuperset(of: [.basic, .digest]))
    }

    func testProxiesAndTheProxyCode() async throws {
        let proxied = try makeEngine { $0 = $0.proxy(self.server.baseURL) }
        let echo = try await proxied.send(.get("http://site.test/echo"))
        XCTAssertTrue(echo.text?.contains("\"proxy_target\":\"http://site.test/echo\"") ?? false)
        do {
            _ = try await proxied.send(.get("http://proxy-auth.test/echo"))
            XCTFail("expected a 407")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .httpStatus)
            XCTAssertEqual(error.response?.status, 407)
        }
        _ = try await proxied.send(.get("http://proxy-auth.test/echo")
            .proxyCredentials(Credentials(user: "proxyuser", password: "proxypass", schemes: .basic)))
        do {
            _ = try await proxied.send(.get("https://site.test/"))
            XCTFail("expected a refused tunnel")
        } catch CourierError.proxy {}
        let socks = try await engine.send(.get("http://site.test/echo")
            .proxy(server.baseURL.replacingOccurrences(of: "http://", with: "socks5h://")))
        XCTAssertTrue(socks.text?.contains("\"socks\":\"site.test:80\"") ?? false)
        proxied.close()
    }
}
