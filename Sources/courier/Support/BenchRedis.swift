// BenchRedis.swift — the Redis a `courier bench ... --backend redis` measures: the one given with
// --redis-url, else a redis-server of its own from scripts/redis-fixture (AOF, appendfsync always),
// or with --backend redis-cluster a Redis Cluster of its own (`redis-fixture cluster`: 3 masters
// with a replica each), stopped after. Shared by `bench cache` and `bench frozen`.
import ArgumentParser
import Foundation

/// The repository's root, for scripts/redis-fixture and the Python side (from this file's path,
/// else the working directory).
func repositoryRoot() -> URL {
    let fromSource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    if FileManager.default.fileExists(atPath: fromSource.appendingPathComponent("scripts/redis-fixture").path) {
        return fromSource
    }
    return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
}

/// Runs a script with bash and returns its exit status and stdout. (popen, not Foundation's
/// Process: its waitUntilExit never returned here once the script had left a daemon behind.)
func runScript(_ args: [String]) throws -> (status: Int32, output: String) {
    let quoted = args.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    guard let pipe = popen("bash " + quoted, "r") else { throw ExitCode.failure }
    var output = ""
    var buffer = [CChar](repeating: 0, count: 4096)
    while fgets(&buffer, Int32(buffer.count), pipe) != nil { output += String(cString: buffer) }
    let status = pclose(pipe)
    return (status == 0 ? 0 : 1, output)
}

/// A Redis to measure: `url` as given, or a redis-server of its own.
struct BenchRedis {
    let url: String
    private let fixtureDir: String?
    /// The fixture's directory when it started its own (a cluster's nodes are in node0...node5), else nil.
    var fixtureDirectory: String? { fixtureDir }

    /// - Parameters:
    ///   - given: --redis-url, or nil for a server of its own.
    ///   - appendfsync: That server's `appendfsync` (REDIS_FIXTURE_APPENDFSYNC), nil: the fixture's.
    ///   - cluster: Start a Redis Cluster of its own (3 masters, a replica each) instead of one server.
    init(url given: String?, appendfsync: String? = nil, cluster: Bool = false) throws {
        if let given {
            url = given
            fixtureDir = nil
            return
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("courier-bench-redis-\(UUID())").path
        if let appendfsync { setenv("REDIS_FIXTURE_APPENDFSYNC", appendfsync, 1) }
        let started = try runScript([Self.fixture, cluster ? "cluster" : "start", dir])
        guard started.status == 0 else {
            printError("error: redis-server did not start (scripts/redis-fixture; scripts/setup installs it)")
            throw ExitCode.failure
        }
        fixtureDir = dir
        url = started.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static var fixture: String { repositoryRoot().appendingPathComponent("scripts/redis-fixture").path }

    /// Stops the server it started (nothing for a given URL).
    func stop() {
        guard let dir = fixtureDir else { return }
        _ = try? runScript([Self.fixture, "stop", dir])
        try? FileManager.default.removeItem(atPath: dir)
    }
}
