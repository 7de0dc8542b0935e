// HeaderEnumTests.swift — the Swift enums that keep their own raw values (a Swift enum's raw
// values must be literals) and the error codes, checked case by case against include/courier.h and
// its parts (include/courier/*.h),
// so a C value that moves or a C member that is added cannot go unnoticed. (Everything else uses
// the values CCore imports from the header directly.)

import Courier
import Foundation
import XCTest

final class HeaderEnumTests: XCTestCase {
    /// `typedef enum NAME { ... } NAME;` of the header and its parts: [NAME: [member: value]].
    private static let enums: [String: [String: Int32]] = {
        let include = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("include")
        let parts = (try? FileManager.default.contentsOfDirectory(at: include.appendingPathComponent("courier"),
                                                                   includingPropertiesForKeys: nil)) ?? []
        let files = [include.appendingPathComponent("courier.h")] + parts.filter { $0.pathExtension == "h" }
        guard var text = try? files.map({ try String(contentsOf: $0, encoding: .utf8) }).joined(separator: "\n")
        else { return [:] }
        text = text.replacingOccurrences(of: #"/\*[\s\S]*?\*/"#, with: "", options: .regularExpression)
        var out: [String: [String: Int32]] = [:]
        let enumPattern = try! NSRegularExpression(pattern: #"typedef enum (\w+) \{([^}]*)\} \1;"#)
        let memberPattern = try! NSRegularExpression(pattern: #"(COURIER_\w+)\s*=\s*(-?\d+)"#)
        let whole = NSRange(text.startIndex..., in: text)
        for match in enumPattern.matches(in: text, range: whole) {
            let name = String(text[Range(match.range(at: 1), in: text)!])
            let body = String(text[Range(match.range(at: 2), in: text)!])
            var members: [String: Int32] = [:]
            for m in memberPattern.matches(in: body, range: NSRange(body.startIndex..., in: body)) {
                members[String(body[Range(m.range(at: 1), in: body)!])] = Int32(body[Range(m.range(at: 2), in: body)!])
            }
            out[name] = members
        }
        return out
    }()

    /// `fromCache` -> `FROM_CACHE`.
    private func snake(_ name: String) -> String {
        var out = ""
        for ch in name {
            if ch.isUppercase, !out.isEmpty { out += "_" }
            out += ch.uppercased()
        }
        return out
    }

    /// Checks each case's raw value against the header's member PREFIX + NAME; with `complete`,
    /// also that every member of the C enum has its case.
    private func check(_ cases: [(String, Int32)], enum cName: String, prefix: String, complete: Bool,
                       file: StaticString = #filePath, line: UInt = #line) throws {
        let members = try XCTUnwrap(Self.enums[cName], "\(cName) not found in the header", file: file, line: line)
        for (name, raw) in cases {
            let member = prefix + snake(name)
            XCTAssertEqual(members[member], raw, "\(name): Swift \(raw), C \(member) = \(String(describing: members[member]))",
                           file: file, line: line)
        }
        if complete {
            let named = Set(cases.map { prefix + snake($0.0) })
            XCTAssertEqual(Set(members.keys).subtracting(named), [], "\(cName) members without a Swift case",
                           file: file, line: line)
        }
    }

    func testHeaderIsFound() {
        XCTAssertGreaterThan(Self.enums.count, 10)
    }

    func testLogLevelIsTheHeaders() throws {
        try check(LogLevel.allCases.map { ("\($0)", $0.rawValue) }, enum: "courier_log_level", prefix: "COURIER_LOG_",
                  complete: true)
    }

    func testLogComponentAndRotationAreTheHeaders() throws {
        try check(LogComponent.allCases.map { ("\($0)", $0.rawValue) }, enum: "courier_log_component",
                  prefix: "COURIER_LOG_", complete: true)
        try check(LogRotation.allCases.map { ("\($0)", $0.rawValue) }, enum: "courier_log_rotation",
                  prefix: "COURIER_LOG_ROTATE_", complete: true)
    }

    func testRequestEventKindIsTheHeaders() throws {
        try check(RequestEvent.Kind.allCases.map { (String(describing: $0), $0.rawValue) }, enum: "courier_event_kind",
                  prefix: "COURIER_EVENT_", complete: true)
    }

    func testJSONKindAndMappingTypesAreTheHeaders() throws {
        let kinds: [(String, JSON.Kind)] = [("object", .object), ("array", .array), ("string", .string),
                                            ("integer", .integer), ("real", .real), ("bool", .bool), ("null", .null)]
        try check(kinds.map { ($0.0, $0.1.rawValue) }, enum: "courier_json_type", prefix: "COURIER_JSON_", complete: false)
        let types: [(String, Mapping.ValueType)] = [("object", .object), ("array", .array), ("string", .string),
                                                    ("integer", .integer), ("real", .real), ("bool", .bool),
                                                    ("number", .number)]
        try check(types.map { ($0.0, $0.1.rawValue) }, enum: "courier_json_type", prefix: "COURIER_JSON_", complete: false)
    }

    func testErrorCodesAreTheHeaders() throws {
        let codes = try XCTUnwrap(Self.enums["courier_code"])
        let known = Set(CourierError.Code.allKnown.map(\.rawValue))
        XCTAssertEqual(known, Set(codes.filter { $0.key != "COURIER_OK" }.values), "CourierError.Code.allKnown")
        for code in CourierError.Code.allKnown {
            XCTAssertFalse(code.name.hasPrefix("unknown("), "\(code.rawValue) has no name")
            let member = codes.first { $0.value == code.rawValue }?.key ?? ""
            XCTAssertEqual("COURIER_E_" + snake(code.name).replacingOccurrences(of: "U_R_L", with: "URL")
                                                         .replacingOccurrences(of: "T_L_S", with: "TLS")
                                                         .replacingOccurrences(of: "A_P_I", with: "API")
                                                         .replacingOccurrences(of: "J_S_O_N", with: "JSON"),
                           member.replacingOccurrences(of: "PROTOCOL", with: "PROTOCOL_ERROR"),
                           "the name of \(member)")
        }
    }
}
