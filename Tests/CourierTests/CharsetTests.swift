// CharsetTests.swift — parameters in GBK and Shift_JIS as the loopback server receives them, byte
// for byte, and a response's text decoded by its charset.

import Courier
import Foundation
import XCTest

final class CharsetTests: LoopbackTestCase {
    func testEngineCharsetWritesGBKQueryBytes() async throws {
        let gbk = try makeEngine { $0.parameterCharset = "GBK" }
        defer { gbk.close() }
        var echo = try Echo(try await gbk.send(.get("/echo").parameter("q", "中文")))
        XCTAssertEqual(echo.query, "q=%D6%D0%CE%C4")
        // The request's charset replaces the engine's, UTF-8 included.
        echo = try Echo(try await gbk.send(.get("/echo").parameter("q", "日本").parameterCharset("Shift_JIS")))
        XCTAssertEqual(echo.query, "q=%93%FA%96%7B")
        echo = try Echo(try await gbk.send(.get("/echo").parameter("q", "中").parameterCharset("UTF-8")))
        XCTAssertEqual(echo.query, "q=%E4%B8%AD")
    }

    func testFormBodyInGBKSaysItsCharset() async throws {
        let echo = try Echo(try await engine.send(.post("/echo").parameter("city", "北京").parameterCharset("GBK")))
        XCTAssertEqual(echo.body, "city=%B1%B1%BE%A9")
        XCTAssertEqual(echo.header("Content-Type"), "application/x-www-form-urlencoded; charset=GBK")
    }

    func testBadCharsetsAreCodes() async throws {
        XCTAssertThrowsError(try makeEngine { $0.parameterCharset = "x-klingon" }) {
            XCTAssertEqual(($0 as? CourierError)?.code, .unknownCharset)
        }
        do {
            _ = try await engine.send(.get("/echo").parameter("name", "中").parameterCharset("ISO-8859-1"))
            XCTFail("sent")
        } catch CourierError.charset {
        }
    }

    func testTextIsDecodedByTheResponseCharset() async throws {
        let gbk = try await engine.send(.get("/text").parameter("type", "text/plain; charset=GBK")
            .parameter("hex", "d6d0cec4"))
        XCTAssertEqual(gbk.body, Data([0xD6, 0xD0, 0xCE, 0xC4]))
        XCTAssertEqual(gbk.text, "中文")
        let unnamed = try await engine.send(.get("/text").parameter("type", "text/plain").parameter("hex", "93fa967b"))
        XCTAssertNil(unnamed.text, "not UTF-8")
        XCTAssertEqual(try unnamed.decodedText(defaultCharset: "Shift_JIS"), "日本")
        XCTAssertThrowsError(try unnamed.decodedText()) { XCTAssertEqual(($0 as? CourierError)?.code, .charset) }
        // A response made in Swift decodes the same way.
        let made = Response(status: 200, headers: [("Content-Type", "text/plain; charset=gbk")],
                            body: Data([0xD6, 0xD0]))
        XCTAssertEqual(made.text, "中")
        let unknown = Response(status: 200, headers: [("Content-Type", "text/plain; charset=x-klingon")], body: Data())
        XCTAssertThrowsError(try unknown.decodedText()) {
            XCTAssertEqual(($0 as? CourierError)?.code, .unknownCharset)
        }
    }
}
