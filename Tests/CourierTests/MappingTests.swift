// MappingTests.swift — key paths, mappings, named results and envelopes on real requests to the
// loopback server, model sends (`engine.send(GetItem())` returns the model), JSON and form bodies,
// and MIME types decoded as JSON.

import Courier
import Foundation
import XCTest

private struct Item: Decodable, Equatable {
    let id: Int
    let title: String
}

private struct Data1: Decodable, Equatable {
    let id: Int
    let name: String
    let tags: [String]
    let items: [Item]
}

private struct GetData: ModelRequestable {
    typealias Model = Data1
    var path: String { "/json" }
    var keyPath: String? { "data" }
}

private struct GetTitles: ModelRequestable {
    struct Model: Decodable, Equatable { let itemId: Int; let title: String }
    var path: String { "/json" }
    var keyPath: String? { "data.items.1" }
    var mapping: Mapping? { Mapping().attribute("id", to: "itemId", .integer, required: true).attribute("title", .string) }
}

private struct NewItem: Codable, Sendable, Equatable {
    let title: String
    let count: Int
    let tags: [String]
}

final class MappingTests: LoopbackTestCase {
    func testSendAsModelFromKeyPath() async throws {
        let data = try await engine.send(.get("/json").keyPath("data"), as: Data1.self)
        XCTAssertEqual(data.name, "courier")
        XCTAssertEqual(data.items, [Item(id: 1, title: "one"), Item(id: 2, title: "two")])
        let items = try await engine.send(.get("/json").keyPath("data.items"), as: [Item].self)
        XCTAssertEqual(items.count, 2)
    }

    /// `keyPath:` on a response's decode is followed, as `JSONModel.init(json:keyPath:)` follows it
    /// (it used to only prefix error paths: `typeMismatch ... Expected Array at data.items`).
    func testResponseDecodeFollowsTheKeyPath() async throws {
        let response = try await engine.send(.get("/json"))
        let items = try response.decode([Item].self, keyPath: "data.items")
        XCTAssertEqual(items, [Item(id: 1, title: "one"), Item(id: 2, title: "two")])
        XCTAssertEqual(try response.decode(Item.self, keyPath: "data.items.1"), Item(id: 2, title: "two"))
        // Inside the result the request's own key path selected, and inside a named result.
        let nested = try await engine.send(.get("/json").keyPath("data").result("items", keyPath: "data.items"))
        XCTAssertEqual(try nested.decode([String].self, keyPath: "tags"), ["a", "b"])
        XCTAssertEqual(try nested.decode(Int.self, result: "items", keyPath: "1.id"), 2)
        do {
            _ = try response.decode([Item].self, keyPath: "data.nothing")
            XCTFail("decoded")
        } catch let DecodingError.valueNotFound(_, context) {
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["data", "nothing"])
        }
    }

    /// A JSONDecoder's settings decode a response (`using:`) and, set once on the configuration,
    /// every model send, from the core's parsed document.
    func testJSONDecoderSettingsDecodeResponsesAndSends() async throws {
        struct Event: Decodable, Equatable { let startsAt: Date; let userName: String }
        let body = #"{"data":{"starts_at":"2024-05-01T12:00:00Z","user_name":"ann"}}"#
        let json = JSONDecoder()
        json.keyDecodingStrategy = .convertFromSnakeCase
        json.dateDecodingStrategy = .iso8601
        let want = Event(startsAt: Date(timeIntervalSince1970: 1_714_564_800), userName: "ann")

        let plain = try makeEngine { $0.jsonTypes = ["text/plain"] } // /cache answers text/plain
        defer { plain.close() }
        let response = try await plain.send(.get("/cache").parameter("body", body))
        XCTAssertEqual(try response.decode(Event.self, keyPath: "data", using: json), want)
        XCTAssertThrowsError(try response.decode(Event.self, keyPath: "data")) // default strategies

        let configured = try makeEngine {
            $0.modelDecoder = ModelDecoder(json)
            $0.jsonTypes = ["text/plain"]
        }
        defer { configured.close() }
        let sent = try await configured.send(.get("/cache").parameter("body", body).keyPath("data"), as: Event.self)
        XCTAssertEqual(sent, want)
        struct GetEvent: ModelRequestable {
            typealias Model = Event
            let body: String
            var path: String { "/cache" }
            var parameters: [String: String] { ["body": body] }
            var keyPath: String? { "data" }
        }
        let modeled = try await configured.send(GetEvent(body: body))
        XCTAssertEqual(modeled, want)
        do {
            _ = try await plain.send(.get("/cache").parameter("body", body).keyPath("data"), as: Event.self)
            XCTFail("decoded with the default strategies")
        } catch is DecodingError {}
    }

    func testModelRequestable() async throws {
        let data = try await engine.send(GetData())
        XCTAssertEqual(data.id, 1)
        XCTAssertEqual(data.tags, ["a", "b"])
        let second = try await engine.send(GetTitles())
        XCTAssertEqual(second, GetTitles.Model(itemId: 2, title: "two"))
        // The plain Requestable send still returns the response.
        let response: Response = try await engine.send(Request(GetData()))
        XCTAssertEqual(response.status, 200)
    }

    func testResponseJSONAndResults() async throws {
        let item = Mapping().attribute("id", to: "itemId", .integer).attribute("title", .string)
        let response = try await engine.send(.get("/json").keyPath("data.items").mapping(item)
            .result("tags", keyPath: "data.tags").result("first", keyPath: "data.items.0", mapping: item)
            .result("maybe", keyPath: "data.absent", optional: true))
        XCTAssertEqual(response.json?["code"]?.int, 200)
        XCTAssertEqual(try response.result?.text(), #"[{"itemId":1,"title":"one"},{"itemId":2,"title":"two"}]"#)
        // The same results as text, written from the tape (courier_json_tape_dump), as the jansson
        // values write them.
        XCTAssertEqual(try response.resultText(), try response.result?.text())
        XCTAssertEqual(try response.resultText("first"), #"{"itemId":1,"title":"one"}"#)
        XCTAssertEqual(try response.resultText("first", formatting: .sortedKeys), try response.result("first")?.text(formatting: .sortedKeys))
        XCTAssertEqual(try response.resultText("tags"), #"["a","b"]"#)
        XCTAssertNil(try response.resultText("maybe"))
        XCTAssertNil(try response.resultText("unknown"))
        XCTAssertEqual(response.result("tags")?.elements.compactMap(\.string), ["a", "b"])
        XCTAssertEqual(response.result("first")?["itemId"]?.int, 1)
        XCTAssertNil(response.result("maybe"))
        struct Mapped: Decodable { let itemId: Int }
        XCTAssertEqual(try response.decode([Mapped].self).map(\.itemId), [1, 2])
        XCTAssertEqual(try response.decode([String].self, result: "tags"), ["a", "b"])
    }

    /// A response's results are decoded from the C core's tape (`courier_response_result_tape`:
    /// the key path, envelope and mapping applied there when the answer came), with the same values,
    /// absences and errors as before, and the jansson document still made on demand.
    func testDecodeReadsResultsOnTheTape() async throws {
        let item = Mapping().attribute("id", to: "itemId", .integer).attribute("title", .string)
        let response = try await engine.send(.get("/json").keyPath("data.items").mapping(item)
            .result("second", keyPath: "data.items.1", mapping: item).result("name", keyPath: "data.name")
            .result("maybe", keyPath: "data.absent", optional: true))
        struct Mapped: Decodable, Equatable { let itemId: Int; let title: String }
        XCTAssertEqual(try response.decode([Mapped].self), [Mapped(itemId: 1, title: "one"), Mapped(itemId: 2, title: "two")])
        XCTAssertEqual(try response.decode(Mapped.self, result: "second"), Mapped(itemId: 2, title: "two"))
        XCTAssertEqual(try response.decode(String.self, result: "name"), "courier")
        XCTAssertEqual(try response.decode(Int.self, keyPath: "1.itemId"), 2)
        XCTAssertThrowsError(try response.decode(String.self, result: "maybe")) {
            guard case DecodingError.valueNotFound = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try response.decode(String.self, result: "unknown")) {
            guard case DecodingError.valueNotFound = $0 else { return XCTFail("\($0)") }
        }
        // The whole document, made from the body on first ask, after the decodes.
        XCTAssertEqual(response.json?["data"]?["name"]?.string, "courier")
        XCTAssertEqual(try response.result?.text(), #"[{"itemId":1,"title":"one"},{"itemId":2,"title":"two"}]"#)

        // Nothing asked: the whole body, parsed into a tape on first ask; not JSON: the JSON error.
        let plain = try await engine.send(.get("/json"))
        XCTAssertEqual(try plain.decode(String.self, keyPath: "data.items.0.title"), "one")
        let html = try await engine.send(.get("/headers").parameter("Content-Type", "text/html"))
        XCTAssertThrowsError(try html.decode(String.self)) { XCTAssertEqual(($0 as? CourierError)?.code, .json) }
        XCTAssertThrowsError(try html.resultText()) { XCTAssertEqual(($0 as? CourierError)?.code, .json) }
    }

    func testMappingFailureNamesThePath() async throws {
        let wrong = Mapping().attribute("name", .integer)
        let error = await assertThrows(.mapping) { try await self.engine.send(.get("/json").keyPath("data").mapping(wrong)) }
        XCTAssertEqual(error?.response?.mappingFailure, MappingFailure(path: "data.name", expected: "integer", found: "string"))
        XCTAssertEqual(error?.httpStatus, 200)

        let absent = await assertThrows(.mapping) { try await self.engine.send(.get("/json").keyPath("data.nothing")) }
        XCTAssertEqual(absent?.response?.mappingFailure?.path, "data.nothing")
        XCTAssertEqual(absent?.response?.mappingFailure?.found, "nothing")

        do {
            _ = try await engine.send(.get("/json").keyPath("data.items"), as: [Data1].self)
            XCTFail("decoded")
        } catch let DecodingError.keyNotFound(key, context) {
            XCTAssertEqual(key.stringValue, "name")
            XCTAssertEqual(context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }, ["data", "items", "0"])
        }
    }

    func testEnvelope() async throws {
        let envelope = Envelope(code: "code", message: "message", data: "data").success(codes: [0, 200])
        let engine = try makeEngine {
            $0.envelope = envelope
            $0.jsonTypes.append("text/plain")
        }
        defer { engine.close() }
        let ok = try await engine.send(.get("/json"))
        XCTAssertEqual(ok.envelopeCode, 200)
        XCTAssertEqual(ok.envelopeMessage, "ok")
        XCTAssertEqual(ok.result?["name"]?.string, "courier")
        let model = try await engine.send(.get("/json"), as: Data1.self)
        XCTAssertEqual(model.id, 1)

        let failure = await assertThrows(.api) {
            try await engine.send(.get("/cache").parameter("body", #"{"code":4031,"message":"token expired"}"#))
        }
        XCTAssertEqual(failure?.response?.envelopeCode, 4031)
        XCTAssertEqual(failure?.response?.envelopeMessage, "token expired")
        XCTAssertTrue(failure?.message.contains("token expired") ?? false)

        // A request may opt out.
        let raw = try await engine.send(.get("/cache").parameter("body", #"{"code":1}"#).envelope(nil))
        XCTAssertEqual(raw.status, 200)

        // A custom rule.
        let odd = Envelope(code: nil, message: nil, data: nil).check { document, _, _ in document["odd"]?.bool != true }
        let strict = try makeEngine {
            $0.envelope = odd
            $0.jsonTypes = ["text/plain"]
        }
        defer { strict.close() }
        await assertThrows(.api) { try await strict.send(.get("/cache").parameter("body", #"{"odd":true}"#)) }
        _ = try await strict.send(.get("/cache").parameter("body", #"{"odd":false}"#))
    }

    func testNotJSON() async throws {
        let html = try await engine.send(.get("/headers").parameter("Content-Type", "text/html"))
        XCTAssertNil(html.json)
        XCTAssertThrowsError(try html.parseJSON()) { XCTAssertEqual(($0 as? CourierError)?.code, .json) }
        await assertThrows(.json) { try await self.engine.send(.get("/headers").parameter("Content-Type", "text/html").keyPath("x")) }
        let lenient = try makeEngine { $0.jsonTypes.append("text/html") }
        defer { lenient.close() }
        let parsed = try await lenient.send(.get("/headers").parameter("Content-Type", "text/html"))
        XCTAssertEqual(parsed.json?.kind, .object)
    }

    func testJSONAndFormBodies() async throws {
        let item = NewItem(title: "x", count: 2, tags: ["a", "b"])
        let json = try await engine.send(.post("/echo").jsonBody(item))
        let echoed = try XCTUnwrap(json.json?["body"]?.string)
        XCTAssertEqual(echoed, #"{"title":"x","count":2,"tags":["a","b"]}"#)
        XCTAssertEqual(try ModelDecoder().decode(NewItem.self, from: Data(echoed.utf8)), item)
        let headers = json.json?["headers"]?.elements ?? []
        XCTAssertTrue(headers.contains { $0[0]?.string?.lowercased() == "content-type" && $0[1]?.string == "application/json" })

        let form = try await engine.send(.post("/echo").formBody(item))
        XCTAssertEqual(form.json?["body"]?.string, "title=x&count=2&tags%5B%5D=a&tags%5B%5D=b")
        await assertThrows(.invalidArgument) { try await self.engine.send(.post("/echo").formBody([1, 2])) }
    }

    func testMappingApplyInSwift() throws {
        let node = Mapping().attribute("v", .integer, required: true).recursive("kids")
        let out = try node.apply(to: try JSON.parse(#"{"v":1,"x":0,"kids":[{"v":2,"kids":[]}]}"#))
        XCTAssertEqual(try out.text(), #"{"v":1,"kids":[{"v":2,"kids":[]}]}"#)
        XCTAssertThrowsError(try node.apply(to: try JSON.parse(#"{"v":"1"}"#))) { XCTAssertEqual(($0 as? CourierError)?.code, .mapping) }
        let coerced = Mapping().attribute("n", .integer, coercions: .numberFromString)
            .attribute("role", .string, coercions: .nullAsAbsent, default: try JSON.parse(#""guest""#))
        XCTAssertEqual(try coerced.apply(to: try JSON.parse(#"{"n":"5","role":null}"#)).text(), #"{"n":5,"role":"guest"}"#)
    }
}
