// ToolTests.swift — the `courier` tool run as a process (the binary SwiftPM builds beside the
// tests) over stores made by the facade in temporary directories.

import Courier
import Foundation
import XCTest

final class ToolTests: XCTestCase {
    /// The built `courier` executable, beside this test bundle.
    private func toolURL() throws -> URL {
        var directories = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            directories.append(bundle.bundleURL.deletingLastPathComponent())
        }
        for directory in directories {
            let url = directory.appendingPathComponent("courier")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw XCTSkip("the courier executable is not built beside the tests")
    }

    /// Runs the tool; returns its exit status and standard output.
    private func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = try toolURL()
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// `courier cache ls` said "stale until <a past time>" for an entry that had expired.
    func testCacheListSaysWhenAnEntryExpired() throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("courier-tool-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: store) }
        let hourAgo = Date().addingTimeInterval(-3600)
        var past = Configuration()
        past.storeDirectory = store
        past.clock = { hourAgo }
        let old = try Engine(configuration: past)
        try old.cache.put(key: "old-entry", body: Data("x".utf8), expiry: 60)
        old.close()
        var now = Configuration()
        now.storeDirectory = store
        let engine = try Engine(configuration: now)
        try engine.cache.put(key: "new-entry", body: Data("y".utf8), expiry: 3600)
        engine.close()

        let (status, output) = try run(["cache", "ls", "--store", store])
        XCTAssertEqual(status, 0, output)
        let lines = output.split(separator: "\n").map(String.init)
        let oldLine = try XCTUnwrap(lines.first { $0.hasSuffix("old-entry") }, output)
        let newLine = try XCTUnwrap(lines.first { $0.hasSuffix("new-entry") }, output)
        XCTAssertTrue(oldLine.contains(" expired at "), oldLine)
        XCTAssertFalse(oldLine.contains("until"), oldLine)
        XCTAssertTrue(newLine.contains(" fresh until "), newLine)
    }
}
