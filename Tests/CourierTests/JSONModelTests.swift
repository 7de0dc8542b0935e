// JSONModelTests.swift — the JSON view, ModelDecoder (keys, nesting, arrays, optionals, numbers,
// dates, data, errors that name the key path), ModelEncoder (the same JSON the core writes), and the
// HTHTTPModel-style helpers. Decoded results are compared with Foundation's JSONDecoder.

import Courier
import Foundation
import XCTest

private struct Item: Codable, Equatable, JSONModel {
    let id: Int
    let title: String
}

private struct Owner: Codable, Equatable {
    let login: String
    let admin: Bool?
}

private struct Catalog: Codable, Equatable, JSONModel {
    enum CodingKeys: String, CodingKey {
        case name
        case items
        case owner
        case tags
        case price = "unit_price"
        case rating
        case note
        case counts
    }
    let name: String
    let items: [Item]
    let owner: Owner
    let tags: Set<String>
    let price: Double
    let rating: Float?
    let note: String?
    let counts: [String: Int]
}

private let catalogText = """
{"name":"shop","items":[{"id":1,"title":"one"},{"id":2,"title":"two"}],"owner":{"login":"ann","admin":null},
 "tags":["a","b"],"unit_price":12,"rating":4.5,"counts":{"x":1,"y":2}}
"""

/// A coding key made from any string (for custom key strategies).
private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

final class JSONModelTests: XCTestCase {
    // MARK: - JSON

    func testJSONAccessorsAndKeyPaths() throws {
        let json = try JSON.parse(catalogText)
        XCTAssertEqual(json.kind, .object)
        XCTAssertEqual(json["name"]?.string, "shop")
        XCTAssertEqual(json["items.1.title"]?.string, "two")
        XCTAssertEqual(json["items"]?.count, 2)
        XCTAssertEqual(json["items"]?[0]?["id"]?.int, 1)
        XCTAssertEqual(json["unit_price"]?.double, 12)
        XCTAssertEqual(json["unit_price"]?.kind, .integer)
        XCTAssertEqual(json["owner.admin"]?.isNull, true)
        XCTAssertNil(json["missing"])
        XCTAssertNil(json["items.9"])
        XCTAssertEqual(json.keys, ["name", "items", "owner", "tags", "unit_price", "rating", "counts"])
        XCTAssertEqual(json["tags"]?.elements.compactMap(\.string), ["a", "b"])
        XCTAssertEqual(try json["counts"]?.text(), #"{"x":1,"y":2}"#)
        XCTAssertEqual(try json["counts"]?.text(formatting: .prettyPrinted), "{\n  \"x\": 1,\n  \"y\": 2\n}")
        let copy = try json.copy()
        XCTAssertTrue(copy.isEqual(to: json))
    }

    func testParseErrorsAreCourierErrors() {
        for bad in ["{", "[1,]", #"{"a":1,"a":2}"#, "", "[1e999,]"] {
            XCTAssertThrowsError(try JSON.parse(bad), bad) { error in
                XCTAssertEqual((error as? CourierError)?.code, .json, bad)
            }
        }
        // Numbers beyond int64 and double are valid JSON (kept as text), not parse errors.
        XCTAssertEqual(try JSON.parse("1e999").numberText, "1e999")
        XCTAssertEqual(try JSON.parse("123456789012345678901234567890").numberText, "123456789012345678901234567890")
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        XCTAssertThrowsError(try JSON.parse(Data(deep.utf8))) { XCTAssertEqual(($0 as? CourierError)?.code, .json) }
        XCTAssertNoThrow(try JSON.parse(Data(deep.utf8), maxDepth: 1000))
    }

    // MARK: - Decoding

    func testDecodesLikeJSONDecoder() throws {
        let data = Data(catalogText.utf8)
        let ours = try ModelDecoder().decode(Catalog.self, from: data)
        let foundation = try JSONDecoder().decode(Catalog.self, from: data)
        XCTAssertEqual(ours, foundation)
        XCTAssertEqual(ours.items, [Item(id: 1, title: "one"), Item(id: 2, title: "two")])
        XCTAssertNil(ours.owner.admin)
        XCTAssertNil(ours.note)
        XCTAssertEqual(ours.price, 12)
        XCTAssertEqual(ours.counts, ["x": 1, "y": 2])
    }

    func testKeyPathAndArrays() throws {
        let data = Data(#"{"data":{"items":[{"id":1,"title":"one"},{"id":2,"title":"two"}]}}"#.utf8)
        let items = try ModelDecoder().decode([Item].self, from: data, keyPath: "data.items")
        XCTAssertEqual(items.map(\.id), [1, 2])
        let second = try ModelDecoder().decode(Item.self, from: data, keyPath: "data.items.1")
        XCTAssertEqual(second.title, "two")
        XCTAssertThrowsError(try ModelDecoder().decode(Item.self, from: data, keyPath: "data.nothing")) { error in
            guard case DecodingError.valueNotFound(_, let context)? = error as? DecodingError else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["data", "nothing"])
        }
    }

    func testErrorsNameTheKeyPath() throws {
        let data = Data(#"{"data":{"items":[{"id":1,"title":"one"},{"id":"2","title":"two"}]}}"#.utf8)
        XCTAssertThrowsError(try ModelDecoder().decode([Item].self, from: data, keyPath: "data.items")) { error in
            guard case DecodingError.typeMismatch(_, let context)? = error as? DecodingError else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }, ["data", "items", "1", "id"])
            XCTAssertTrue(context.debugDescription.contains("data.items.1.id"), context.debugDescription)
        }
        let missing = Data(#"[{"id":1}]"#.utf8)
        XCTAssertThrowsError(try ModelDecoder().decode([Item].self, from: missing)) { error in
            guard case DecodingError.keyNotFound(let key, let context)? = error as? DecodingError else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(key.stringValue, "title")
            XCTAssertEqual(context.codingPath.count, 1)
        }
        XCTAssertThrowsError(try ModelDecoder().decode(Item.self, from: Data("{".utf8))) { error in
            XCTAssertEqual((error as? CourierError)?.code, .json)
        }
    }

    func testNumbers() throws {
        struct Numbers: Decodable, Equatable {
            let small: Int8
            let whole: Int
            let real: Double
            let realWhole: Int
            let big: UInt64
            let f: Float
        }
        let n = try ModelDecoder().decode(Numbers.self, from: Data(
            #"{"small":-128,"whole":9007199254740993,"real":0.1,"realWhole":3.0,"big":9223372036854775807,"f":1.5}"#.utf8))
        XCTAssertEqual(n, Numbers(small: -128, whole: 9007199254740993, real: 0.1, realWhole: 3, big: 9223372036854775807, f: 1.5))
        XCTAssertThrowsError(try ModelDecoder().decode(Numbers.self, from: Data(
            #"{"small":200,"whole":1,"real":0,"realWhole":1,"big":1,"f":1}"#.utf8))) { error in
            guard case DecodingError.dataCorrupted(let context)? = error as? DecodingError else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["small"])
        }
        XCTAssertThrowsError(try ModelDecoder().decode(Numbers.self, from: Data(
            #"{"small":1,"whole":1.5,"real":0,"realWhole":1,"big":1,"f":1}"#.utf8)))
        // Numeric strings only when allowed.
        struct Loose: Decodable { let n: Int; let s: String }
        let text = Data(#"{"n":"42","s":7}"#.utf8)
        XCTAssertThrowsError(try ModelDecoder().decode(Loose.self, from: text))
        var loose = ModelDecoder()
        loose.allowsNumericStrings = true
        let l = try loose.decode(Loose.self, from: text)
        XCTAssertEqual(l.n, 42)
        XCTAssertEqual(l.s, "7")
    }

    func testDatesDataURLsAndSnakeCase() throws {
        struct Event: Codable, Equatable {
            let startsAt: Date
            let payload: Data
            let link: URL
            let userName: String
        }
        let text = Data(#"{"starts_at":"2024-05-01T12:00:00Z","payload":"aGk=","link":"https://example.org/a","user_name":"ann"}"#.utf8)
        var decoder = ModelDecoder()
        decoder.dateDecodingStrategy = .iso8601
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let event = try decoder.decode(Event.self, from: text)
        XCTAssertEqual(event.startsAt, Date(timeIntervalSince1970: 1_714_564_800))
        XCTAssertEqual(event.payload, Data("hi".utf8))
        XCTAssertEqual(event.link.host, "example.org")
        XCTAssertEqual(event.userName, "ann")
        let foundation: JSONDecoder = {
            let d = JSONDecoder()
            d.dateDecodingStrategy = .iso8601
            d.keyDecodingStrategy = .convertFromSnakeCase
            return d
        }()
        XCTAssertEqual(try foundation.decode(Event.self, from: text), event)

        var seconds = ModelDecoder()
        seconds.dateDecodingStrategy = .millisecondsSince1970
        struct Stamp: Decodable { let at: Date }
        XCTAssertEqual(try seconds.decode(Stamp.self, from: Data(#"{"at":1500}"#.utf8)).at, Date(timeIntervalSince1970: 1.5))

        // Round trip through the encoder with the same strategies.
        var encoder = ModelEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = .sortedKeys
        let back = try encoder.encode(event)
        XCTAssertEqual(String(decoding: back, as: UTF8.self),
                       #"{"link":"https://example.org/a","payload":"aGk=","starts_at":"2024-05-01T12:00:00Z","user_name":"ann"}"#)
        XCTAssertEqual(try decoder.decode(Event.self, from: back), event)
    }

    /// An app's JSONDecoder settings carry over to the tape decoder: snake_case keys, ISO-8601
    /// and seconds dates, custom keys, base64 data, non-conforming floats and userInfo.
    func testJSONDecoderSettingsCarryOver() throws {
        struct Event: Decodable, Equatable {
            let startsAt: Date
            let userName: String
        }
        let iso = JSONDecoder()
        iso.keyDecodingStrategy = .convertFromSnakeCase
        iso.dateDecodingStrategy = .iso8601
        let text = Data(#"{"starts_at":"2024-05-01T12:00:00Z","user_name":"ann"}"#.utf8)
        let event = try ModelDecoder(iso).decode(Event.self, from: text)
        XCTAssertEqual(event, Event(startsAt: Date(timeIntervalSince1970: 1_714_564_800), userName: "ann"))
        XCTAssertEqual(try iso.decode(Event.self, from: text), event)

        let seconds = JSONDecoder()
        seconds.keyDecodingStrategy = .convertFromSnakeCase
        seconds.dateDecodingStrategy = .secondsSince1970
        let stamped = Data(#"{"starts_at":1714564800.5,"user_name":"bo"}"#.utf8)
        XCTAssertEqual(try ModelDecoder(seconds).decode(Event.self, from: stamped),
                       Event(startsAt: Date(timeIntervalSince1970: 1_714_564_800.5), userName: "bo"))
        XCTAssertThrowsError(try ModelDecoder().decode(Event.self, from: stamped)) // default keys: no starts_at

        // A formatter (read through the JSONDecoder itself) and a custom date reader.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(secondsFromGMT: 0)
        formatter.dateFormat = "yyyy-MM-dd"
        let formatted = JSONDecoder()
        formatted.dateDecodingStrategy = .formatted(formatter)
        struct Day: Decodable { let day: Date }
        XCTAssertEqual(try ModelDecoder(formatted).decode(Day.self, from: Data(#"{"day":"2024-05-01"}"#.utf8)).day,
                       Date(timeIntervalSince1970: 1_714_521_600))
        let custom = JSONDecoder()
        custom.dateDecodingStrategy = .custom { decoder in
            Date(timeIntervalSince1970: try decoder.singleValueContainer().decode(Double.self) * 86_400)
        }
        XCTAssertEqual(try ModelDecoder(custom).decode(Day.self, from: Data(#"{"day":2}"#.utf8)).day,
                       Date(timeIntervalSince1970: 172_800))

        // Custom keys, non-conforming floats, data and userInfo.
        struct Reading: Decodable { let value: Double; let low: Float; let raw: Data; let unit: String }
        let key = CodingUserInfoKey(rawValue: "unit")!
        let lenient = JSONDecoder()
        lenient.keyDecodingStrategy = .custom { path in
            let last = path.last!.stringValue
            return AnyKey(stringValue: last.hasPrefix("x-") ? String(last.dropFirst(2)) : last)
        }
        lenient.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf",
                                                                          nan: "nan")
        lenient.dataDecodingStrategy = .base64
        lenient.userInfo[key] = "kPa"
        struct Unit: Decodable {
            let unit: String
            init(from decoder: any Decoder) throws { unit = decoder.userInfo[CodingUserInfoKey(rawValue: "unit")!] as? String ?? "" }
        }
        let reading = Data(#"{"x-value":"inf","x-low":"-inf","x-raw":"aGk=","x-unit":0}"#.utf8)
        struct Wrapped: Decodable { let value: Double; let low: Float; let raw: Data; let unit: Unit }
        let decoded = try ModelDecoder(lenient).decode(Wrapped.self, from: reading)
        XCTAssertEqual(decoded.value, .infinity)
        XCTAssertEqual(decoded.low, -.infinity)
        XCTAssertEqual(decoded.raw, Data("hi".utf8))
        XCTAssertEqual(decoded.unit.unit, "kPa")
        XCTAssertTrue(try ModelDecoder(lenient).decode([Double].self, from: Data(#"["nan"]"#.utf8))[0].isNaN)
        XCTAssertThrowsError(try ModelDecoder().decode([Double].self, from: Data(#"["nan"]"#.utf8)))
        _ = Reading.self
    }

    func testEnumsNestedContainersAndClasses() throws {
        enum Kind: String, Codable { case a, b }
        struct Node: Codable, Equatable {
            let kind: Kind
            let children: [Node]
            let pair: [Int]
        }
        let text = Data(#"{"kind":"a","children":[{"kind":"b","children":[],"pair":[3,4]}],"pair":[1,2]}"#.utf8)
        let node = try ModelDecoder().decode(Node.self, from: text)
        XCTAssertEqual(node.children.first?.kind, .b)
        XCTAssertEqual(try JSONDecoder().decode(Node.self, from: text), node)
        XCTAssertEqual(try ModelDecoder().decode(Node.self, from: try ModelEncoder().encode(node)), node)

        class Base: Codable { var id = 1 }
        final class Derived: Base {
            var extra = "x"
            enum K: CodingKey { case extra }
            override init() { super.init() }
            required init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: K.self)
                extra = try c.decode(String.self, forKey: .extra)
                try super.init(from: try c.superDecoder())
            }
            override func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: K.self)
                try c.encode(extra, forKey: .extra)
                try super.encode(to: c.superEncoder())
            }
        }
        let d = Derived()
        d.id = 5
        let encoded = try ModelEncoder().encode(d)
        XCTAssertEqual(String(decoding: encoded, as: UTF8.self), #"{"extra":"x","super":{"id":5}}"#)
        let decoded = try ModelDecoder().decode(Derived.self, from: encoded)
        XCTAssertEqual(decoded.id, 5)
    }

    func testSplitParseDecodesTheSame() throws {
        let items = (0..<6000).map { Item(id: $0, title: "item, [\($0)] \"quoted\"") }
        let data = try ModelEncoder().encode(items)
        XCTAssertGreaterThan(data.count, 256 * 1024)
        var split = ModelDecoder()
        split.parseThreads = 0
        XCTAssertEqual(try split.decode([Item].self, from: data), items)
        split.parseThreads = 3
        XCTAssertEqual(try split.decode([Item].self, from: data), items)
        XCTAssertEqual(try ModelDecoder().decode([Item].self, from: data), items)
    }

    // MARK: - Encoding

    func testEncoderWritesTheCoresJSON() throws {
        let catalog = try ModelDecoder().decode(Catalog.self, from: Data(catalogText.utf8))
        var encoder = ModelEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = try encoder.encode(catalog)
        // Same value as Foundation reads it back, and the core's number format (12.0 is a real).
        XCTAssertEqual(try JSONDecoder().decode(Catalog.self, from: data), catalog)
        let json = try JSON.parse(data)
        XCTAssertEqual(json["unit_price"]?.kind, .real)
        XCTAssertTrue(String(decoding: data, as: UTF8.self).contains(#""unit_price":12.0"#))
        XCTAssertNil(json["note"], "nil optionals are left out")
        XCTAssertThrowsError(try ModelEncoder().encode(["x": Double.nan])) { error in
            guard case EncodingError.invalidValue? = error as? EncodingError else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(String(decoding: try ModelEncoder().encode([1, 2]), as: UTF8.self), "[1,2]")
        XCTAssertEqual(String(decoding: try ModelEncoder().encode("a/b"), as: UTF8.self), #""a/b""#)
        XCTAssertEqual(String(decoding: try ModelEncoder().encode(UInt64.max), as: UTF8.self), "1.8446744073709552e+19")
    }

    // MARK: - Model helpers

    func testModelHelpers() throws {
        let item = try Item(json: #"{"id":3,"title":"three"}"#)
        XCTAssertEqual(item, Item(id: 3, title: "three"))
        XCTAssertEqual(try Item(json: Data(#"{"data":{"id":4,"title":"x"}}"#.utf8), keyPath: "data").id, 4)
        XCTAssertEqual(try Item.models(json: #"[{"id":1,"title":"a"},{"id":2,"title":"b"}]"#).count, 2)
        XCTAssertEqual(try item.jsonString(), #"{"id":3,"title":"three"}"#)
        let object = try XCTUnwrap(try item.jsonObject() as? [String: Any])
        XCTAssertEqual(object["id"] as? Int64, 3)
        XCTAssertEqual(object["title"] as? String, "three")
        XCTAssertEqual(try Item(jsonObject: ["id": 9, "title": "nine"]), Item(id: 9, title: "nine"))
        XCTAssertEqual(try Item(json: try item.json()), item)
        let flags = try JSON(object: ["on": true, "n": 1, "r": 1.5, "none": NSNull(), "list": ["a"]])
        XCTAssertEqual(flags["on"]?.kind, .bool)
        XCTAssertEqual(flags["n"]?.kind, .integer)
        XCTAssertEqual(flags["r"]?.kind, .real)
        XCTAssertEqual(flags["none"]?.isNull, true)
        XCTAssertThrowsError(try JSON(object: ["d": Date()])) { XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument) }
        let catalog = try Catalog(json: catalogText)
        XCTAssertEqual(try Catalog(json: try catalog.jsonData()), catalog)
    }
}
