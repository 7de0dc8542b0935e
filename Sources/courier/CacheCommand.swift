// CacheCommand.swift — `courier cache stats | ls | rm KEY | purge | clear | verify`: inspect and clear the
// response cache of a store directory (the one an app gives Configuration.storeDirectory), with
// --json for scripts. Every operation is the C core's manager through the Swift facade.
import ArgumentParser
import Courier
import Foundation

struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Inspect and clear the response cache of a store directory.",
        subcommands: [
            CacheStatsCommand.self,
            CacheListCommand.self,
            CacheRemoveCommand.self,
            CachePurgeCommand.self,
            CacheClearCommand.self,
            CacheVerifyCommand.self,
        ]
    )
}

/// Options every cache subcommand takes (and `courier cookies`).
struct CacheOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp(
        "The store directory (default: the store of --app-id, else $COURIER_STORE, else ~/.cache/courier).",
        valueName: "dir"))
    var store: String?

    @Option(name: .customLong("app-id"), help: ArgumentHelp(
        "Open the default store of the app with this id: the one its engines open without a store "
            + "directory ($XDG_DATA_HOME/<id>/courier, else ~/.local/share/<id>/courier).", valueName: "id"))
    var appID: String?

    @Option(name: .customLong("cache-store"), help: ArgumentHelp(
        "The cache's own store, as an app's Configuration.cacheStore names it: a directory or a "
            + "redis://[[user]:password@]host[:port][/db] URL (default: $COURIER_CACHE_STORE, else the "
            + "store directory's cache).", valueName: "dir-or-url"))
    var cacheStore: String?

    @Flag(help: "Print JSON on stdout.")
    var json = false

    /// The cache store in effect: --cache-store, else $COURIER_CACHE_STORE, else nil (the store's).
    var effectiveCacheStore: String? {
        if let cacheStore { return cacheStore }
        if let env = ProcessInfo.processInfo.environment["COURIER_CACHE_STORE"], !env.isEmpty { return env }
        return nil
    }

    /// An engine on the store (it opens the cache on first use; nothing is sent). A command that
    /// looks at a store never creates one: the store directory must exist when what the command
    /// reads lives there (`storeMustExist` nil: when the cache is the store directory's own; the
    /// cookie commands say so themselves, `cookies set` creating the store).
    func openEngine(storeMustExist: Bool? = nil) throws -> Engine {
        var configuration = storeConfiguration(store: store, appID: appID)
        configuration.cacheStore = effectiveCacheStore
        configuration.storeMustExist = storeMustExist ?? (effectiveCacheStore == nil)
        return try Engine(configuration: configuration)
    }

    /// Where the cache is, for the output: the cache store (a Redis URL without its password), else
    /// the store directory's cache.
    func cacheLocation(_ engine: Engine) -> String {
        guard let cacheStore = effectiveCacheStore else { return engine.storeDirectory + "/cache" }
        guard cacheStore.lowercased().hasPrefix("redis"), let at = cacheStore.firstIndex(of: "@"),
              let scheme = cacheStore.range(of: "://") else { return cacheStore }
        return String(cacheStore[..<scheme.upperBound]) + "***" + String(cacheStore[at...])
    }
}

/// The configuration of the store a `cache`, `frozen` or `cookies` command opens: `--store`, else
/// the default store of `--app-id` (the C core resolves it exactly as for the app's own engines),
/// else $COURIER_STORE, else ~/.cache/courier.
func storeConfiguration(store: String?, appID: String?) -> Configuration {
    var configuration = Configuration()
    if let store {
        configuration.storeDirectory = store
    } else if let appID {
        configuration.appID = appID
    } else if let env = ProcessInfo.processInfo.environment["COURIER_STORE"], !env.isEmpty {
        configuration.storeDirectory = env
    } else {
        configuration.storeDirectory =
            FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/courier").path
    }
    return configuration
}

/// Runs `body` with an engine, turning a CourierError into "error: ..." and exit status 1 (`courier
/// cache` and `courier cookies`).
func withEngine(_ options: CacheOptions, storeMustExist: Bool? = nil, _ body: (Engine) throws -> Void) throws {
    let engine: Engine
    do {
        engine = try options.openEngine(storeMustExist: storeMustExist)
    } catch {
        printError("error: \(describe(error))")
        throw ExitCode.failure
    }
    defer { engine.close() }
    do {
        try body(engine)
    } catch let exit as ExitCode {
        throw exit
    } catch {
        printError("error: \(describe(error))")
        throw ExitCode.failure
    }
}

private func printJSON(_ object: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    writeOut(data + Data("\n".utf8))
}

private func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

private func iso(_ date: Date) -> String {
    let f = ISO8601DateFormatter()
    return f.string(from: date)
}

struct CacheStatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "Total size and entry count.")
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options) { engine in
            let stats = try engine.cache.stats()
            if options.json {
                try printJSON(["store": engine.storeDirectory, "cache": options.cacheLocation(engine),
                               "bytes": stats.bytes, "count": stats.count, "max_bytes": stats.maxBytes] as [String: Any])
            } else {
                print("store:   \(options.cacheLocation(engine))")
                print("entries: \(stats.count)")
                print("size:    \(bytesText(stats.bytes)) (\(stats.bytes) bytes) of \(bytesText(stats.maxBytes))")
            }
        }
    }
}

struct CacheListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the entries.")
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options) { engine in
            let entries = try engine.cache.entries().sorted { $0.created < $1.created }
            if options.json {
                try printJSON(entries.map {
                    ["key": $0.key, "url": $0.url, "id": $0.id, "status": $0.status, "size": $0.size,
                     "created_ms": millis($0.created), "expires_ms": millis($0.expires)] as [String: Any]
                })
                return
            }
            let now = Date()
            for e in entries {
                // An entry past its expiry is no longer "until" anything: say since when it expired.
                let state = e.expires > now ? "fresh until \(iso(e.expires))" : "expired at \(iso(e.expires))"
                let key = e.key.replacingOccurrences(of: "\n", with: "\\n")
                print("\(e.id.prefix(12))  \(e.status)  \(String(format: "%9@", bytesText(e.size) as NSString))  "
                      + "\(iso(e.created))  \(state)  \(key)")
            }
            if entries.isEmpty { print("(empty)") }
        }
    }
}

struct CacheRemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Remove one entry by its key text (as `courier cache ls` shows it).",
        discussion: "Exit status 1 when there is no such entry. Write a line break in a key as \\n.")
    @OptionGroup var options: CacheOptions
    @Argument(help: "The key text.") var key: String

    func run() throws {
        try withEngine(options) { engine in
            let removed = try engine.cache.remove(key: key.replacingOccurrences(of: "\\n", with: "\n"))
            if options.json { try printJSON(["removed": removed ? 1 : 0]) }
            else { print(removed ? "removed" : "not found") }
            if !removed { throw ExitCode.failure }
        }
    }
}

struct CachePurgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "purge", abstract: "Remove the expired entries.")
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options) { engine in
            let n = try engine.cache.removeExpired()
            if options.json { try printJSON(["removed": n]) } else { print("removed \(n) expired entries") }
        }
    }
}

struct CacheClearCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every entry.")
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options) { engine in
            let n = try engine.cache.removeAll()
            if options.json { try printJSON(["removed": n]) } else { print("removed \(n) entries") }
        }
    }
}

extension CacheVerifyReport {
    /// The report as JSON-ready members (also in `courier stress cache --json`).
    var jsonObject: [String: Any] {
        ["consistent": isConsistent, "entries": entries, "bytes": bytes, "total_entries": totalEntries,
         "total_bytes": totalBytes, "damaged": damaged, "orphan_index": orphanIndex, "missing_index": missingIndex,
         "totals_mismatch": totalsMismatch, "problems": problems, "file_bytes": fileBytes, "map_bytes": mapBytes,
         "used_bytes": usedBytes, "unreadable": unreadable, "moved_aside": movedAside, "tree_bytes": treeBytes,
         "free_bytes": freeBytes]
    }

    /// One line for people.
    var summary: String {
        let state = isConsistent ? "consistent" : "INCONSISTENT (\(problems) problems)"
        return "\(state): \(entries) entries, \(bytes) bytes (totals \(totalEntries), \(totalBytes)); "
            + "\(damaged) damaged, \(orphanIndex) orphan index records, \(missingIndex) without index"
            + (totalsMismatch ? ", totals differ from the scan" : "") + (unreadable ? ", unreadable pages" : "")
            + (movedAside ? "; the store was unusable at open and was moved aside" : "")
    }
}

struct CacheVerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Check the store: every entry whole, the index and the totals.",
        discussion: """
            Reads the whole store in one snapshot (writers are not blocked): every entry decodes and its \
            checksum matches, every entry has its index records and every index record its entry, and the \
            store's totals equal the scan. Exit status 1 when anything is inconsistent (or the store cannot \
            be read), 0 otherwise.
            """)
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options) { engine in
            let report = try engine.cache.verify()
            if options.json {
                var object = report.jsonObject
                object["store"] = engine.storeDirectory
                object["cache"] = options.cacheLocation(engine)
                try printJSON(object)
            } else {
                print("store:   \(options.cacheLocation(engine))")
                print(report.summary)
                print("file:    \(bytesText(report.fileBytes)) on disk, \(bytesText(report.usedBytes)) in use "
                      + "(trees \(bytesText(report.treeBytes)), free list \(bytesText(report.freeBytes))), "
                      + "map \(bytesText(report.mapBytes))")
            }
            if !report.isConsistent { throw ExitCode.failure }
        }
    }
}
