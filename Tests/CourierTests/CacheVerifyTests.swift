// CacheVerifyTests.swift — `engine.cache.verify()` through the Swift facade: a consistent store's
// report agrees with the totals, and a store damaged on purpose (a byte of a stored body flipped
// in data.mdb) is reported, not thrown.

import Courier
import Foundation
import XCTest

final class CacheVerifyTests: XCTestCase {
    func testVerifyReportsAConsistentStoreAndADamagedOne() throws {
        let dir = NSTemporaryDirectory() + "courier-verify-tests-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var configuration = Configuration()
        configuration.storeDirectory = dir
        var engine = try Engine(configuration: configuration)
        for i in 0..<50 {
            try engine.cache.put(key: "GET http://verify.test/\(i)", body: Data("MARK\(i)-".utf8) + Data(repeating: 0x61, count: 300))
        }
        let report = try engine.cache.verify()
        let size = try engine.cache.size()
        XCTAssertTrue(report.isConsistent)
        XCTAssertEqual(report.entries, 50)
        XCTAssertEqual(report.entries, size.count)
        XCTAssertEqual(report.bytes, size.bytes)
        XCTAssertEqual(report.problems, 0)
        XCTAssertGreaterThan(report.fileBytes, 0)
        engine.close()

        // Flip one byte of the body stored for key 7.
        let path = dir + "/cache/data.mdb"
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        // Every copy of the page (LMDB leaves old copies in free pages): the live one among them.
        let mark = Data("MARK7-".utf8)
        var from = data.startIndex
        while let r = data.range(of: mark, in: from..<data.endIndex) {
            data[r.upperBound + 10] ^= 0x20
            from = r.upperBound
        }
        try data.write(to: URL(fileURLWithPath: path))

        engine = try Engine(configuration: configuration)
        defer { engine.close() }
        let damaged = try engine.cache.verify()
        XCTAssertFalse(damaged.isConsistent)
        XCTAssertEqual(damaged.damaged, 1)
        XCTAssertEqual(damaged.problems, 1)
        XCTAssertEqual(CourierError.Code.cacheInconsistent.rawValue, -40)
    }
}
