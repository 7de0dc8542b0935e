// VersionTests.swift — the one version number (include/courier.h) is what the facade reports.
import Courier
import Foundation
import XCTest

final class VersionTests: XCTestCase {
    /// The header's COURIER_VERSION_MAJOR/MINOR/PATCH and COURIER_VERSION_STRING, read from the file.
    private func headerVersion() throws -> (string: String, parts: String) {
        let header = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("include/courier.h")
        let text = try String(contentsOf: header, encoding: .utf8)
        func define(_ name: String) -> String? {
            for line in text.split(separator: "\n") where line.hasPrefix("#define COURIER_VERSION_\(name) ") {
                return String(line.dropFirst("#define COURIER_VERSION_\(name) ".count))
                    .trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
            }
            return nil
        }
        let string = try XCTUnwrap(define("STRING"))
        let parts = try [define("MAJOR"), define("MINOR"), define("PATCH")].map { try XCTUnwrap($0) }
        return (string, parts.joined(separator: "."))
    }

    func testLibraryVersionIsTheHeaders() throws {
        let header = try headerVersion()
        XCTAssertEqual(header.string, header.parts, "COURIER_VERSION_STRING must be MAJOR.MINOR.PATCH")
        XCTAssertEqual(Engine.libraryVersion, header.string)
    }
}
