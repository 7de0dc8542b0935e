// CatalogTests.swift — the API catalogue as HLAPICenter has it (`API.home.feed` declared by a module
// extension, used by name), a catalogue file shared with C and Python, the API version segment,
// routes filled from Encodable values, error bodies mapped into an error model by a response
// descriptor, and a request's accepted statuses; over the loopback server.

import Courier
import Foundation
import XCTest

// The HLAPICenter+home pattern: a module extends the namespace with its APIs.
extension API {
    static let home = HomeAPIs()
}

struct HomeAPIs: APIModule {
    let feed = API("home.feed", .init(method: "POST", path: "/echo/feed", parameters: ["page": "1"],
                                      headers: ["X-Module": "home"], keyPath: "body"))
    let detail = API("home.detail", .init(path: "/echo/items/:id"))
    let stats = API("home.stats", .init(path: "/status/404", statusCodes: [200...299, 404...404]))
}

private struct User: Encodable, Sendable {
    let id: Int
    let name: String
    let tags: [Int]
}

private struct Lookup: Encodable, Sendable {
    let id: String
    let lang: String
}

final class CatalogTests: LoopbackTestCase {
    private func echoed(_ response: Response, _ key: String) -> String? { response.json?[key]?.string }

    func testModuleAPIsAreUsedByName() async throws {
        try engine.register(API.home)
        XCTAssertEqual(engine.apiNames, ["home.detail", "home.feed", "home.stats"])
        let response = try await engine.send(API.home.feed.parameters(["user_id": "7"]))
        XCTAssertEqual(response.result?.string, "page=1&user_id=7") // the declaration's key path
        let headers = response.json?["headers"]
        let sent = (0..<(headers?.count ?? 0)).compactMap { headers?[$0] }.first { $0[0]?.string == "X-Module" }
        XCTAssertEqual(sent?[1]?.string, "home")
        let detail = try await engine.send(API.home.detail.object(Lookup(id: "a b", lang: "fr")))
        XCTAssertEqual(echoed(detail, "path"), "/echo/items/a%20b")
        XCTAssertEqual(echoed(detail, "query"), "lang=fr")
        let stats = try await engine.send(API.home.stats) // 404 accepted by the declaration
        XCTAssertEqual(stats.status, 404)
        // In a batch and for the cache manager too: the engine makes the request.
        let both = await engine.batch([API.home.feed.request, API.home.detail.object(Lookup(id: "1", lang: "x"))])
        XCTAssertEqual(try both.map { try $0.get() }.compactMap { self.echoed($0, "path") }, ["/echo/feed", "/echo/items/1"])
        XCTAssertTrue(try engine.cache.key(for: API.home.feed.request).contains("/echo/feed"))
        await assertThrows(.unknownName) { try await self.engine.send(API("home.nope")) }
        XCTAssertThrowsError(try engine.register(API("bad", .init(method: "G T", path: "/x")))) {
            XCTAssertEqual(($0 as? CourierError)?.code, .catalog)
        }
    }

    func testCatalogueFileServesSwift() async throws {
        let doc = """
        {"apis": {"shop": {"item": {"path": "/echo/items/:id", "key_path": "path"}}},
         "routes": [{"name": "user.photos", "path": "/echo/users/:id/photos"}]}
        """
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("apis-\(UUID().uuidString).json")
        try Data(doc.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        XCTAssertEqual(try engine.loadAPIs(contentsOf: url), 1)
        let item = try await engine.send(API("shop.item").object(Lookup(id: "9", lang: "en")))
        XCTAssertEqual(item.result?.string, "/echo/items/9")
        let photos = try await engine.send(Request.route("user.photos", object: Lookup(id: "u1", lang: "en")))
        XCTAssertEqual(echoed(photos, "path"), "/echo/users/u1/photos")
        XCTAssertThrowsError(try engine.loadAPIs(json: Data("{\"apis\":".utf8))) {
            XCTAssertEqual(($0 as? CourierError)?.code, .json)
        }
        XCTAssertThrowsError(try engine.loadAPIs(json: Data("{\"apis\":{\"a\":{\"path\":\"/x\",\"pth\":1}}}".utf8))) {
            XCTAssertEqual(($0 as? CourierError)?.code, .catalog)
        }
    }

    func testAPIVersionSegment() async throws {
        let versioned = try makeEngine {
            $0.baseURL = self.server.baseURL + "/echo"
            $0.apiVersion = "v5"
        }
        defer { versioned.close() }
        var response = try await versioned.send(.get("/s"))
        XCTAssertEqual(echoed(response, "path"), "/echo/v5/s")
        response = try await versioned.send(Request.get("/s").apiVersion(""))
        XCTAssertEqual(echoed(response, "path"), "/echo/s")
        let review = try makeEngine {
            $0.baseURL = self.server.baseURL + "/echo"
            $0.apiVersion = "v5"
            $0.apiReview = true
        }
        defer { review.close() }
        response = try await review.send(Request.get("/s").apiVersion("v6"))
        XCTAssertEqual(echoed(response, "path"), "/echo/v6r/s")
    }

    func testClassRoutesFillPatternsFromEncodables() async throws {
        let json = try makeEngine { $0.bodyEncoding = .json }
        defer { json.close() }
        try json.addRoute("/echo/users/:id", for: User.self)
        let response = try await json.send(Request.object("PUT", User(id: 7, name: "Ann", tags: [1, 2])))
        XCTAssertEqual(echoed(response, "path"), "/echo/users/7")
        XCTAssertEqual(echoed(response, "body"), "{\"name\":\"Ann\",\"tags\":[1,2]}")
        await assertThrows(.unknownName) { try await json.send(Request.object("GET", Lookup(id: "1", lang: "x"))) }
        await assertThrows(.routeParameter) {
            try await json.send(Request.get("/echo/things/:kind").object(Lookup(id: "1", lang: "x")))
        }
    }

    func testErrorBodyIsMappedIntoAnErrorModel() async throws {
        let model = Mapping().attribute("code", .integer, required: true).attribute("message", to: "errorMsg", .string)
        try engine.addResponseDescriptor(pathPattern: "/problem/:code", statusCodes: 400...499, keyPath: "error",
                                         mapping: model)
        let error = await assertThrows(.httpStatus) { try await self.engine.send(.get("/problem/404")) }
        XCTAssertEqual(error?.response?.status, 404)
        XCTAssertEqual(error?.response?.result?["code"]?.int, 40401)
        XCTAssertEqual(error?.response?.result?["errorMsg"]?.string, "problem 404")
        // No statuses given: the C core's default (200...299) holds a success.
        try engine.addResponseDescriptor(pathPattern: "/json", method: "GET", keyPath: "data.items")
        let items = try await engine.send(.get("/json")).result
        XCTAssertEqual(items?.count, 2)
        XCTAssertEqual(items?[1]?["title"]?.string, "two")
    }

    func testAcceptedStatusCodes() async throws {
        let response = try await engine.send(Request.get("/status/404").statusCodes(200...299, 404...404))
        XCTAssertEqual(response.status, 404)
        let error = await assertThrows(.httpStatus) { try await self.engine.send(Request.get("/status/200").statusCodes(201...201)) }
        XCTAssertEqual(error?.response?.status, 200)
        await assertThrows(.invalidArgument) { try await self.engine.send(Request.get("/").statusCodes(300...600)) }
    }

    /// Issue 28 bug 6: an API whose path has a parameter, sent without an object, was sent with
    /// the literal ":id"; it throws routeParameter.
    func testAPIPathParameterWithoutAnObjectThrows() async throws {
        let item = API("shop.item", .init(path: "/echo/items/:id"))
        try engine.register(item)
        await assertThrows(.routeParameter) { try await self.engine.send(item) }
        let filled = try await engine.send(item.object(Lookup(id: "7", lang: "en")))
        XCTAssertEqual(echoed(filled, "path"), "/echo/items/7")
    }
}
