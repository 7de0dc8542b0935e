// ConfigurationTests.swift — the defaults, and settings the C core refuses when an engine opens.

import Courier
import Foundation
import XCTest

final class ConfigurationTests: XCTestCase {
    func testDefaults() {
        let configuration = Configuration()
        XCTAssertNil(configuration.baseURL)
        XCTAssertTrue(configuration.headers.isEmpty)
        XCTAssertTrue(configuration.parameters.isEmpty)
        XCTAssertEqual(configuration.timeout, 60)
        XCTAssertNil(configuration.userAgent)
        XCTAssertEqual(configuration.maxConnectionsPerHost, 5)
        XCTAssertEqual(configuration.maxConnections, 64)
        XCTAssertEqual(configuration.bodyEncoding, .form)
        XCTAssertEqual(configuration.maxResponseBytes, 64 * 1024 * 1024)
        XCTAssertNil(configuration.caFile)
        XCTAssertNil(configuration.pinnedPublicKey)
        XCTAssertFalse(configuration.insecure)
        XCTAssertNil(configuration.storeDirectory)
        XCTAssertNil(configuration.validator)
        XCTAssertEqual(Configuration(baseURL: "http://h").baseURL, "http://h")
    }

    override class func setUp() {
        super.setUp()
        _ = LoopbackTestCase.dataHome // the default store goes under a temporary XDG_DATA_HOME
    }

    func testTheDefaultEngineOpensAndCloses() throws {
        let engine = try Engine()
        // The durable default store: $XDG_DATA_HOME/<program name>/courier.
        XCTAssertTrue(engine.storeDirectory.hasPrefix(LoopbackTestCase.dataHome + "/"), engine.storeDirectory)
        XCTAssertTrue(engine.storeDirectory.hasSuffix("/courier"), engine.storeDirectory)
        XCTAssertNil(engine.configuration.baseURL)
        engine.close()
    }

    /// Feature settings are settable properties (`configuration.frozenReplay(backoffBase: 0.5)`
    /// used to compile, warn about an unused result and change nothing): set, replace, nest, reset.
    func testFeatureSettingsAreProperties() throws {
        var configuration = Configuration()
        configuration.temporaryStore = true
        XCTAssertNil(configuration.cacheMaxBytes)
        configuration.cacheMaxBytes = 1 << 20
        configuration.cacheMaxBytes = 2 << 20 // replaces
        XCTAssertEqual(configuration.cacheMaxBytes, 2 << 20)
        configuration.frozenReplay = FrozenReplay(concurrency: 2, backoffBase: 0.5)
        configuration.frozenReplay.backoffMax = 30
        XCTAssertEqual(configuration.frozenReplay, FrozenReplay(concurrency: 2, backoffBase: 0.5, backoffMax: 30))
        configuration.cachePolicy = .cacheFirst
        configuration.frozenPaused = true
        configuration.jsonOptions.maxDepth = 64
        configuration.reachability = ReachabilitySettings(fromErrors: true, interval: 1)
        XCTAssertEqual(configuration.cachePolicy, .cacheFirst)
        XCTAssertTrue(configuration.frozenPaused)
        XCTAssertEqual(configuration.jsonOptions, JSONOptions(maxDepth: 64))
        XCTAssertEqual(configuration.reachability?.interval, 1)
        let engine = try Engine(configuration: configuration)
        XCTAssertEqual(try engine.cache.stats().maxBytes, 2 << 20) // the C core got it
        engine.close()
        configuration.cacheMaxBytes = nil
        XCTAssertNil(configuration.cacheMaxBytes)
        configuration.frozenReplay = FrozenReplay(concurrency: -1) // refused by the C core at open
        XCTAssertThrowsError(try Engine(configuration: configuration)) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
        }
    }

    private func assertRefused(_ code: CourierError.Code, file: StaticString = #filePath, line: UInt = #line,
                               _ change: (inout Configuration) -> Void) {
        var configuration = Configuration()
        change(&configuration)
        XCTAssertThrowsError(try Engine(configuration: configuration), file: file, line: line) { error in
            XCTAssertEqual((error as? CourierError)?.code, code, "\(error)", file: file, line: line)
        }
    }

    func testRefusedSettings() {
        assertRefused(.invalidURL) { $0.baseURL = "not a url" }
        assertRefused(.invalidURL) { $0.baseURL = "ftp://example.com" }
        assertRefused(.invalidHeader) { $0.headers = [("X-A", "1\r\n2")] }
        assertRefused(.invalidHeader) { $0.headers = [("Bad Name", "1")] }
        assertRefused(.invalidHeader) { $0.userAgent = "a\nb" }
        assertRefused(.invalidArgument) { $0.timeout = 0 }
        assertRefused(.invalidArgument) { $0.timeout = -.infinity }
        assertRefused(.invalidArgument) { $0.maxConnections = 0 }
        assertRefused(.invalidArgument) { $0.maxConnectionsPerHost = -1 }
        assertRefused(.invalidArgument) { $0.maxResponseBytes = 0 }
        assertRefused(.invalidArgument) { $0.storeDirectory = "" }
    }

    func testAStoreDirectoryThatCannotBeMadeIsAStoreError() throws {
        let file = NSTemporaryDirectory() + "courier-facade-file-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        defer { try? FileManager.default.removeItem(atPath: file) }
        var configuration = Configuration()
        configuration.storeDirectory = file + "/store"
        XCTAssertThrowsError(try Engine(configuration: configuration)) { error in
            let error = error as? CourierError
            XCTAssertEqual(error?.code, .store)
            XCTAssertNotNil(error?.osError)
        }
    }
}
