// TapeDecodingTests.swift — ModelDecoder over the C core's tape parser (courier_json_tape_parse):
// the same values as Foundation's JSONDecoder on varied and generated documents, the same error
// kinds and coding paths, parse errors as CourierError.json (malformed text, invalid UTF-8,
// duplicate keys, depth), and the same results from text, from a parsed JSON value and from a
// split parse.

import Courier
import Foundation
import XCTest

private enum Color: String, Codable, Equatable { case red, green }

private struct Scalars: Codable, Equatable {
    let i8: Int8, i16: Int16, i32: Int32, i64: Int64, int: Int
    let u8: UInt8, u16: UInt16, u32: UInt32, u64: UInt64, uint: UInt
    let f: Float, d: Double, whole: Double, negZero: Double, tiny: Double, huge: Double
    let yes: Bool, no: Bool
    let text: String, escaped: String, unicode: String, empty: String
    let color: Color
    let maybe: Int?, absent: String?, nullString: String?
}

private struct Node: Codable, Equatable {
    let name: String
    let value: Double?
    let count: Int
    let flags: [Bool]
    let tags: [String]
    let map: [String: Int]
    let matrix: [[Int]]
    let children: [Node]
}

/// A small deterministic generator (SplitMix64), so every run checks the same documents.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func randomString(_ rng: inout SplitMix) -> String {
    let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "é", "€", "😀", "\u{7f}", "key", "_"]
    return (0..<Int.random(in: 0...8, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
}

private func randomNode(_ rng: inout SplitMix, depth: Int) -> Node {
    let doubles: [Double] = [0, -0.0, 1.5, -2.25e-8, 1e300, 123456.789, 0.1, 9007199254740993, -1]
    return Node(
        name: randomString(&rng),
        value: Bool.random(using: &rng) ? doubles.randomElement(using: &rng)! : nil,
        count: Int.random(in: Int.min...Int.max, using: &rng) >> Int.random(in: 0...63, using: &rng),
        flags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in Bool.random(using: &rng) },
        tags: (0..<Int.random(in: 0...4, using: &rng)).map { _ in randomString(&rng) },
        map: Dictionary((0..<Int.random(in: 0...20, using: &rng)).map { ("k\($0)" + randomString(&rng), $0) },
                        uniquingKeysWith: { a, _ in a }),
        matrix: (0..<Int.random(in: 0...2, using: &rng)).map { _ in (0..<Int.random(in: 0...3, using: &rng)).map { $0 } },
        children: depth > 3 ? [] : (0..<Int.random(in: 0...3, using: &rng)).map { _ in randomNode(&rng, depth: depth + 1) })
}

/// The error's kind and coding path, for comparing two decoders' errors.
private func shape(_ error: Error) -> String {
    func path(_ c: DecodingError.Context) -> String { c.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".") }
    switch error as? DecodingError {
    case .typeMismatch(_, let c)?: return "typeMismatch@" + path(c)
    case .valueNotFound(_, let c)?: return "valueNotFound@" + path(c)
    case .keyNotFound(let k, let c)?: return "keyNotFound(\(k.stringValue))@" + path(c)
    case .dataCorrupted?: return "dataCorrupted" // Foundation on Linux leaves its path empty
    default: return "other: \(error)"
    }
}

final class TapeDecodingTests: XCTestCase {
    func testScalarsDecodeLikeJSONDecoder() throws {
        let text = #"""
        {"i8":-128,"i16":32767,"i32":-2147483648,"i64":-9223372036854775808,"int":9007199254740993,
         "u8":255,"u16":65535,"u32":4294967295,"u64":9223372036854775807,"uint":0,
         "f":1.5,"d":-2.5e-300,"whole":3,"negZero":-0.0,"tiny":5e-324,"huge":1.7976931348623157e308,
         "yes":true,"no":false,
         "text":"plain","escaped":"q\"b\\s\/n\n\t\u0001\u00e9\ud83d\ude00","unicode":"żółć 😀 日本","empty":"",
         "color":"green","maybe":null,"nullString":null}
        """#
        let data = Data(text.utf8)
        let ours = try ModelDecoder().decode(Scalars.self, from: data)
        XCTAssertEqual(ours, try JSONDecoder().decode(Scalars.self, from: data))
        XCTAssertEqual(ours.escaped, "q\"b\\s/n\n\t\u{1}é😀")
        XCTAssertEqual(ours.negZero.sign, .minus)
        XCTAssertEqual(ours.u64, UInt64(Int64.max))
        // Integers beyond int64 are kept as text by the parser, not rounded: UInt64 gets them exactly.
        let max = Data("18446744073709551615".utf8)
        XCTAssertEqual(try ModelDecoder().decode(UInt64.self, from: max), .max)
        XCTAssertEqual(try ModelDecoder().decode(UInt64.self, from: max), try JSONDecoder().decode(UInt64.self, from: max))
        XCTAssertEqual(ours.int, 9007199254740993)
    }

    func testGeneratedDocumentsDecodeLikeJSONDecoder() throws {
        var rng = SplitMix(state: 42)
        let encoder = JSONEncoder()
        for round in 0..<40 {
            let nodes = (0..<Int.random(in: 1...6, using: &rng)).map { _ in randomNode(&rng, depth: 0) }
            encoder.outputFormatting = round % 2 == 0 ? [] : [.prettyPrinted, .sortedKeys]
            let data = try encoder.encode(nodes)
            let ours = try ModelDecoder().decode([Node].self, from: data)
            XCTAssertEqual(ours, try JSONDecoder().decode([Node].self, from: data), "round \(round)")
            XCTAssertEqual(ours, nodes, "round \(round)")
            // The same from a parsed JSON value (the response path) and from a split parse.
            XCTAssertEqual(try ModelDecoder().decode([Node].self, from: try JSON.parse(data)), nodes)
            var split = ModelDecoder()
            split.parseThreads = 2
            XCTAssertEqual(try split.decode([Node].self, from: data), nodes)
        }
    }

    func testMembersInAnyOrderAndUnknownKeys() throws {
        struct Point: Codable, Equatable { let x: Int; let y: Int; let z: Int? }
        for text in [#"{"z":3,"y":2,"x":1}"#, #"{"extra":[1,{"x":9}],"y":2,"x":1,"more":{}}"#, #"{"y":2,"x":1,"z":null}"#] {
            let data = Data(text.utf8)
            XCTAssertEqual(try ModelDecoder().decode(Point.self, from: data), try JSONDecoder().decode(Point.self, from: data), text)
        }
        // An object of many members, read out of order.
        let keys = (0..<200).map { "key\($0)" }
        let data = Data(("{" + keys.reversed().map { "\"\($0)\":\($0.dropFirst(3))" }.joined(separator: ",") + "}").utf8)
        let ours = try ModelDecoder().decode([String: Int].self, from: data)
        XCTAssertEqual(ours, try JSONDecoder().decode([String: Int].self, from: data))
        XCTAssertEqual(ours.count, 200)
    }

    func testErrorsMatchJSONDecoder() throws {
        struct Inner: Codable { let id: Int; let name: String }
        struct Outer: Codable { let items: [Inner]; let flag: Bool }
        let cases = [
            #"{"items":[{"id":1,"name":"a"},{"id":"2","name":"b"}],"flag":true}"#,
            #"{"items":[{"id":1,"name":"a"},{"name":"b"}],"flag":true}"#,
            #"{"items":[{"id":1,"name":null}],"flag":true}"#,
            #"{"items":[{"id":1.5,"name":"a"}],"flag":true}"#,
            #"{"items":{},"flag":true}"#,
            #"{"items":[],"flag":1}"#,
            #"{"items":[]}"#,
            #"[]"#,
        ]
        for text in cases {
            let data = Data(text.utf8)
            var ours = "", theirs = ""
            XCTAssertThrowsError(try ModelDecoder().decode(Outer.self, from: data)) { ours = shape($0) }
            XCTAssertThrowsError(try JSONDecoder().decode(Outer.self, from: data)) { theirs = shape($0) }
            XCTAssertEqual(ours, theirs, text)
        }
        // Ours names the path of a number that does not fit.
        XCTAssertThrowsError(try ModelDecoder().decode(Outer.self, from: Data(cases[3].utf8))) { error in
            guard case DecodingError.dataCorrupted(let context)? = error as? DecodingError else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }, ["items", "0", "id"])
        }
    }

    func testBadTextIsACourierJSONError() {
        let bad: [Data] = [
            Data("{".utf8), Data("[1,]".utf8), Data(#"{"a":1,"a":2}"#.utf8),
            Data(), Data([0x5B, 0x22, 0xFF, 0x22, 0x5D]), // ["\xff"]
            Data(#"["\ud800"]"#.utf8), Data("[01]".utf8), Data("[1,2]x".utf8), Data(#"["a\u0000"]"#.utf8),
            Data((String(repeating: "[", count: 600) + String(repeating: "]", count: 600)).utf8),
        ]
        for data in bad {
            XCTAssertThrowsError(try ModelDecoder().decode([Int].self, from: data), String(decoding: data, as: UTF8.self)) { error in
                XCTAssertEqual((error as? CourierError)?.code, .json, "\(error)")
            }
        }
        XCTAssertThrowsError(try ModelDecoder().decode([Int].self, from: Data("[1,".utf8))) { error in
            XCTAssertTrue("\(error)".contains("byte 3"), "\(error)")
        }
    }

    /// Issue 28, bug 4: numbers beyond Int64 and Double are valid JSON. A model that reads other
    /// fields decodes; the big value decodes into UInt64 and Decimal exactly and into Double where
    /// it is representable; into Int it throws a DecodingError, as JSONDecoder does.
    func testNumbersBeyondInt64AndDouble() throws {
        struct A: Codable, Equatable { let a: Int }
        struct U: Codable, Equatable { let b: UInt64 }
        struct D: Codable, Equatable { let b: Decimal }
        struct R: Codable, Equatable { let b: Double }
        struct I: Codable, Equatable { let b: Int }
        let data = Data(#"{"a":1,"b":18446744073709551615,"c":-9223372036854775809,"d":1e400}"#.utf8)
        XCTAssertEqual(try ModelDecoder().decode(A.self, from: data), A(a: 1))
        XCTAssertEqual(try ModelDecoder().decode(U.self, from: data), U(b: .max))
        XCTAssertEqual(try ModelDecoder().decode(D.self, from: data), D(b: Decimal(string: "18446744073709551615")!))
        XCTAssertEqual(try ModelDecoder().decode(R.self, from: data), R(b: 18446744073709551615.0))
        let plain = Data(#"{"a":1,"b":18446744073709551615}"#.utf8) // what JSONDecoder reads too
        XCTAssertEqual(try ModelDecoder().decode(A.self, from: plain), try JSONDecoder().decode(A.self, from: plain))
        XCTAssertEqual(try ModelDecoder().decode(U.self, from: plain), try JSONDecoder().decode(U.self, from: plain))
        var ours = "", theirs = ""
        XCTAssertThrowsError(try ModelDecoder().decode(I.self, from: plain)) { ours = shape($0) }
        XCTAssertThrowsError(try JSONDecoder().decode(I.self, from: plain)) { theirs = shape($0) }
        XCTAssertEqual(ours, theirs)
        XCTAssertEqual(ours, "dataCorrupted")
        // Below Int64.min: not an Int64 nor a UInt64, a Double.
        struct C64: Codable { let c: Int64 }
        struct CU: Codable { let c: UInt64 }
        struct CD: Codable { let c: Double }
        XCTAssertThrowsError(try ModelDecoder().decode(C64.self, from: data)) { XCTAssertEqual(shape($0), "dataCorrupted") }
        XCTAssertThrowsError(try ModelDecoder().decode(CU.self, from: data)) { XCTAssertEqual(shape($0), "dataCorrupted") }
        XCTAssertEqual(try ModelDecoder().decode(CD.self, from: data).c, -9223372036854775809.0)
        // Beyond Double: an error only where it is read as a Double.
        struct DD: Codable { let d: Double }
        struct DF: Codable { let d: Float }
        XCTAssertThrowsError(try ModelDecoder().decode(DD.self, from: data)) { error in
            guard case DecodingError.dataCorrupted(let context)? = error as? DecodingError else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["d"])
            XCTAssertTrue(context.debugDescription.contains("1e400"), context.debugDescription)
        }
        XCTAssertThrowsError(try ModelDecoder().decode(DF.self, from: data)) { XCTAssertEqual(shape($0), "dataCorrupted") }
        XCTAssertEqual(try ModelDecoder().decode([String: Decimal].self, from: Data(#"{"x":123456789012345678901234567890}"#.utf8)),
                       ["x": Decimal(string: "123456789012345678901234567890")!])
        // From a parsed JSON value (the tape made from it keeps the text).
        let json = try JSON.parse(data)
        XCTAssertEqual(try ModelDecoder().decode(U.self, from: json), U(b: .max))
        // A UTF-8 byte order mark before the document is ignored.
        XCTAssertEqual(try ModelDecoder().decode(A.self, from: Data([0xEF, 0xBB, 0xBF]) + plain), A(a: 1))
    }

    /// The JSON value keeps numbers beyond Int64 and Double: exact text, UInt64, Double where it fits.
    func testJSONValueNumbersBeyondInt64AndDouble() throws {
        let json = try JSON.parse(#"{"a":1,"b":18446744073709551615,"c":-9223372036854775809,"d":1e400,"e":2.5}"#)
        XCTAssertEqual(json["a"]?.int, 1)
        XCTAssertEqual(json["b"]?.kind, .real)
        XCTAssertEqual(json["b"]?.uint64, .max)
        XCTAssertNil(json["b"]?.int)
        XCTAssertNil(json["b"]?.string)
        XCTAssertEqual(json["b"]?.numberText, "18446744073709551615")
        XCTAssertEqual(json["b"]?.double, 18446744073709551615.0)
        XCTAssertNil(json["c"]?.uint64)
        XCTAssertEqual(json["c"]?.numberText, "-9223372036854775809")
        XCTAssertNil(json["d"]?.double) // beyond Double
        XCTAssertEqual(json["d"]?.numberText, "1e400")
        XCTAssertNil(json["e"]?.numberText)
        XCTAssertEqual(json["e"]?.double, 2.5)
        XCTAssertNil(json["e"]?.int)
        XCTAssertEqual(json["a"]?.uint64, 1)
        XCTAssertEqual(try json.text(), #"{"a":1,"b":18446744073709551615,"c":-9223372036854775809,"d":1e400,"e":2.5}"#)
        XCTAssertTrue(try json.copy().isEqual(to: json))
        XCTAssertEqual(try JSON.parse(Data([0xEF, 0xBB, 0xBF]) + Data("[7]".utf8))[0]?.int, 7)
        XCTAssertEqual(CourierError.Code.numberRange.rawValue, -56)
    }

    /// Both parse paths (a JSON value, the decoder's tape) report a malformed text at one position.
    func testOneErrorPositionOnBothPaths() {
        let data = Data(#"{"a":1,"b":tru}"#.utf8)
        var parsed = "", decoded = ""
        XCTAssertThrowsError(try JSON.parse(data)) { parsed = ($0 as? CourierError)?.message ?? "\($0)" }
        XCTAssertThrowsError(try ModelDecoder().decode([String: Int].self, from: data)) {
            XCTAssertEqual(($0 as? CourierError)?.code, .json)
            decoded = ($0 as? CourierError)?.message ?? "\($0)"
        }
        XCTAssertEqual(parsed, decoded)
        XCTAssertTrue(parsed.contains("byte 11"), parsed)
    }

    func testKeyPathsIntoTheTape() throws {
        let data = Data(#"{"data":{"list":[{"id":1,"name":"a"},{"id":2,"name":"b"}],"n":null}}"#.utf8)
        struct Inner: Codable, Equatable { let id: Int; let name: String }
        XCTAssertEqual(try ModelDecoder().decode(Inner.self, from: data, keyPath: "data.list.1"), Inner(id: 2, name: "b"))
        XCTAssertEqual(try ModelDecoder().decode(Int.self, from: data, keyPath: "data.list.0.id"), 1)
        XCTAssertThrowsError(try ModelDecoder().decode(Inner.self, from: data, keyPath: "data.list.2")) { error in
            guard case DecodingError.valueNotFound(_, let context)? = error as? DecodingError else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["data", "list", "2"])
        }
        XCTAssertThrowsError(try ModelDecoder().decode(Inner.self, from: data, keyPath: "data.n")) { error in
            guard case DecodingError.typeMismatch(_, let context)? = error as? DecodingError else {
                guard case DecodingError.valueNotFound(_, let context)? = error as? DecodingError else { return XCTFail("\(error)") }
                XCTAssertEqual(context.codingPath.map(\.stringValue), ["data", "n"])
                return
            }
            XCTFail("\(context)")
        }
    }
}
