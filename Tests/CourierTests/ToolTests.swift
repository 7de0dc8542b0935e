// ToolTests.swift — the `courier` tool run as a process (the binary SwiftPM builds beside the
// tests) over stores made by the facade in temporary directories.

import Courier
import Foundation
import XCTest

/// The built `courier` executable, beside this test bundle (other suites run it as a second process).
func courierToolURL() throws -> URL {
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
func runCourierTool(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let result = try runCourierToolCapturingErrors(arguments)
    return (result.status, result.output)
}

/// Runs the tool; returns its exit status, standard output and standard error.
func runCourierToolCapturingErrors(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
    let process = Process()
    process.executableURL = try courierToolURL()
    process.arguments = arguments
    let pipe = Pipe(), errorPipe = Pipe()
    process.standardOutput = pipe
    process.standardError = errorPipe
    try process.run()
    // Standard error is read on another thread so that neither pipe can fill and stall the tool.
    let errorData = LockedBox(Data())
    let reader = Thread { errorData.set(errorPipe.fileHandleForReading.readDataToEndOfFile()) }
    reader.start()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while !errorData.done { usleep(1000) }
    return (process.terminationStatus, String(decoding: data, as: UTF8.self),
            String(decoding: errorData.value, as: UTF8.self))
}

/// A value written once by another thread.
private final class LockedBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Data
    private var isSet = false
    init(_ value: Data) { stored = value }
    func set(_ value: Data) { lock.lock(); stored = value; isSet = true; lock.unlock() }
    var done: Bool { lock.lock(); defer { lock.unlock() }; return isSet }
    var value: Data { lock.lock(); defer { lock.unlock() }; return stored }
}

final class ToolTests: XCTestCase {
    private func toolURL() throws -> URL { try courierToolURL() }
    private func run(_ arguments: [String]) throws -> (status: Int32, output: String) { try runCourierTool(arguments) }

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

    /// `courier cache ls --app-id ID` and `courier frozen ls --app-id ID` open the default store of
    /// that app: the one its engines open without a store directory (the C core resolves both).
    func testStoreCommandsOpenAnAppsDefaultStore() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("courier-tool-xdg-\(UUID())").path
        let saved = ProcessInfo.processInfo.environment["XDG_DATA_HOME"]
        setenv("XDG_DATA_HOME", home, 1) // the tool inherits it
        defer {
            if let saved { setenv("XDG_DATA_HOME", saved, 1) } else { unsetenv("XDG_DATA_HOME") }
            try? FileManager.default.removeItem(atPath: home)
        }
        var configuration = Configuration()
        configuration.appID = "ToolTestApp"
        let engine = try Engine(configuration: configuration)
        XCTAssertTrue(engine.storeDirectory.hasPrefix(home), engine.storeDirectory)
        try engine.cache.put(key: "app-entry", body: Data("z".utf8), expiry: 3600)
        engine.close()

        let (status, output) = try run(["cache", "ls", "--app-id", "ToolTestApp"])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("app-entry"), output)
        // Another app's store does not exist: said, not made.
        let (otherStatus, other) = try run(["cache", "ls", "--app-id", "AnotherApp"])
        XCTAssertNotEqual(otherStatus, 0, other)
        XCTAssertFalse(other.contains("app-entry"), other)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home + "/AnotherApp"))
        let (statsStatus, stats) = try run(["cache", "stats", "--app-id", "ToolTestApp", "--json"])
        XCTAssertEqual(statsStatus, 0, stats)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(stats.utf8)) as? [String: Any], stats)
        XCTAssertEqual(object["store"] as? String, engine.storeDirectory)
        XCTAssertEqual(object["count"] as? Int, 1)
        let (frozenStatus, frozen) = try run(["frozen", "ls", "--app-id", "ToolTestApp", "--json"])
        XCTAssertEqual(frozenStatus, 0, frozen)
    }

    /// The commands that look at a store (cache, frozen, cookies) never create one: a store that
    /// does not exist is "no store at PATH" with a non-zero status, and the directory stays absent.
    /// `cookies set` is the one that may make a store.
    func testReadingCommandsSayNoStoreAndCreateNone() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("courier-typo-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: missing) }
        let commands: [[String]] = [
            ["cache", "stats"], ["cache", "ls"], ["cache", "verify"], ["cache", "purge"], ["cache", "clear"],
            ["frozen", "ls"], ["frozen", "show", "1"], ["frozen", "clear"], ["frozen", "replay"],
            ["cookies", "ls"], ["cookies", "clear"], ["hsts", "ls"], ["hsts", "clear"],
        ]
        for command in commands {
            let (status, output, errors) = try runCourierToolCapturingErrors(command + ["--store", missing])
            XCTAssertNotEqual(status, 0, "\(command): \(output)")
            XCTAssertTrue(errors.contains("no store at"), "\(command): \(errors)")
            XCTAssertTrue(errors.contains(missing), "\(command): \(errors)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: missing), "\(command) created the store")
        }
        let (status, output) = try run(["cookies", "set", "sid", "1", "--domain", "example.com", "--store", missing])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(FileManager.default.fileExists(atPath: missing))
        let (listStatus, list) = try run(["cookies", "ls", "--store", missing])
        XCTAssertEqual(listStatus, 0, list)
        XCTAssertTrue(list.contains("sid"), list)
    }

    /// `courier hsts preload FILE`, `ls` (text and --json) and `clear` on a store: what the facade's
    /// list then holds.
    func testHSTSPreloadListClear() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("courier-hsts-\(UUID())")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent("preload.txt")
        try ".example.org \"unlimited\"\n".write(to: file, atomically: true, encoding: .utf8)
        let store = dir.appendingPathComponent("store").path
        let (status, output) = try run(["hsts", "preload", file.path, "--store", store])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("added 1"), output)
        let (listStatus, list) = try run(["hsts", "ls", "--store", store, "--json"])
        XCTAssertEqual(listStatus, 0, list)
        let hosts = try JSONSerialization.jsonObject(with: Data(list.utf8)) as? [[String: Any]]
        XCTAssertEqual(hosts?.first?["host"] as? String, "example.org")
        XCTAssertEqual(hosts?.first?["include_subdomains"] as? Bool, true)
        let (clearStatus, cleared) = try run(["hsts", "clear", "--store", store])
        XCTAssertEqual(clearStatus, 0, cleared)
        XCTAssertTrue(cleared.contains("removed 1"), cleared)
        var configuration = Configuration()
        configuration.storeDirectory = store
        let engine = try Engine(configuration: configuration)
        XCTAssertEqual(try engine.hsts.all(), [])
        engine.close()
    }
}
