// FrozenCommand.swift — `courier frozen ls | show ID | rm ID | clear | replay`: inspect, remove and
// replay the frozen requests of a store directory (the one an app gives
// Configuration.storeDirectory), with --json for scripts. Every operation is the C core's journal
// through the Swift facade; looking never sends anything (the engine opens with replay paused).
import ArgumentParser
import Courier
import Foundation

struct FrozenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frozen",
        abstract: "Inspect, remove and replay the frozen requests of a store directory.",
        subcommands: [
            FrozenListCommand.self,
            FrozenShowCommand.self,
            FrozenRemoveCommand.self,
            FrozenClearCommand.self,
            FrozenReplayCommand.self,
        ]
    )
}

/// Options every frozen subcommand takes.
struct FrozenOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp(
        "The store directory (default: the store of --app-id, else $COURIER_STORE, else ~/.cache/courier).",
        valueName: "dir"))
    var store: String?

    @Option(name: .customLong("app-id"), help: ArgumentHelp(
        "Open the default store of the app with this id: the one its engines open without a store "
            + "directory ($XDG_DATA_HOME/<id>/courier, else ~/.local/share/<id>/courier).", valueName: "id"))
    var appID: String?

    @Option(name: .customLong("journal"), help: ArgumentHelp(
        "The journal's own store when the app names one: a directory, or a Redis URL "
            + "(redis://host:port/db, with #name for a named journal) shared by every engine naming it.",
        valueName: "dir|url"))
    var journal: String?

    @Flag(help: "Print JSON on stdout.")
    var json = false

    /// An engine on the store with automatic replay paused: nothing is sent unless asked.
    func openEngine() throws -> Engine {
        var configuration = storeConfiguration(store: store, appID: appID)
        configuration.frozenStore = journal
        configuration.frozenPaused = true
        // Looking at a store never creates one: a typo says "no store at PATH".
        configuration.storeMustExist = journal == nil
        return try Engine(configuration: configuration)
    }
}

/// Runs `body` with an engine, turning a CourierError into "error: ..." and exit status 1.
private func withEngine(_ options: FrozenOptions, _ body: (Engine) throws -> Void) throws {
    let engine: Engine
    do {
        engine = try options.openEngine()
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

/// The journal's own JSON of a frozen request, as an object.
private func jsonObject(_ frozen: FrozenRequest) -> Any {
    (try? JSONSerialization.jsonObject(with: Data(frozen.json.utf8))) ?? ["id": frozen.id]
}

private func iso(_ date: Date?) -> String {
    guard let date else { return "-" }
    return ISO8601DateFormatter().string(from: date)
}

private func policyName(_ policy: FreezePolicy) -> String {
    switch policy {
    case .never: return "never"
    case .auto: return "auto"
    case .manual: return "manual"
    }
}

struct FrozenListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the frozen requests, oldest first.")
    @OptionGroup var options: FrozenOptions

    func run() throws {
        try withEngine(options) { engine in
            let list = try engine.frozen.list()
            if options.json {
                try printJSON(list.map(jsonObject))
                return
            }
            for f in list {
                var state = f.claimed ? "in flight" : f.attempts == 0 ? "waiting" : "retry at \(iso(f.nextAttempt))"
                if let code = f.lastCode { state += " (last: \(code.name)\(f.lastStatus.map { " \($0)" } ?? ""))" }
                print("\(f.id)  \(policyName(f.policy))\(f.unordered ? ",unordered" : "")  \(f.method) \(f.url)  "
                      + "attempts \(f.attempts)  \(state)  expires \(iso(f.expires))")
            }
            if list.isEmpty { print("(none)") }
        }
    }
}

struct FrozenShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show one frozen request: headers, body, replay state.",
        discussion: "Exit status 1 when there is no such request.")
    @OptionGroup var options: FrozenOptions
    @Argument(help: "The freeze id.") var id: String

    func run() throws {
        try withEngine(options) { engine in
            guard let f = try engine.frozen.get(id) else {
                if options.json { try printJSON(["error": "not found", "id": id]) } else { printError("error: notFound: no frozen request '\(id)'") }
                throw ExitCode.failure
            }
            if options.json {
                try printJSON(jsonObject(f))
                return
            }
            print("id:              \(f.id)")
            print("request:         \(f.method) \(f.url)")
            print("host:            \(f.host)")
            print("policy:          \(policyName(f.policy))\(f.unordered ? ", unordered" : ", ordered")")
            print("resend policy:   \(f.resendPolicy)")
            print("idempotency key: \(f.idempotencyKey)")
            print("timeout:         \(f.timeout) s")
            print("created:         \(iso(f.created))")
            print("expires:         \(iso(f.expires))")
            print("attempts:        \(f.attempts)\(f.claimed ? " (one in flight)" : "")")
            print("last attempt:    \(iso(f.lastAttempt))\(f.lastCode.map { "  \($0.name)" } ?? "")\(f.lastStatus.map { " HTTP \($0)" } ?? "")")
            print("next attempt:    \(f.nextAttempt.map { iso($0) } ?? "at once")")
            print("headers:")
            for h in f.headers { print("  \(h.name): \(h.value)") }
            if let body = f.body {
                if let text = String(data: body, encoding: .utf8) { print("body (\(body.count) bytes):\n\(text)") }
                else { print("body: \(body.count) bytes of binary data") }
            } else {
                print("body:            (none)")
            }
        }
    }
}

struct FrozenRemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Remove one frozen request by its id.",
        discussion: "Exit status 1 when there is no such request.")
    @OptionGroup var options: FrozenOptions
    @Argument(help: "The freeze id.") var id: String

    func run() throws {
        try withEngine(options) { engine in
            let removed = try engine.frozen.remove(id)
            if options.json { try printJSON(["removed": removed ? 1 : 0]) } else { print(removed ? "removed" : "not found") }
            if !removed { throw ExitCode.failure }
        }
    }
}

struct FrozenClearCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every frozen request.")
    @OptionGroup var options: FrozenOptions

    func run() throws {
        try withEngine(options) { engine in
            let n = try engine.frozen.removeAll()
            if options.json { try printJSON(["removed": n]) } else { print("removed \(n) frozen requests") }
        }
    }
}

struct FrozenReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay", abstract: "Send the frozen requests now and report each answer.",
        discussion: """
            Sends every automatic request (with --manual, the ones waiting for the app too) whatever its \
            backoff, in order per host, and waits until nothing is left to send now. A final answer removes \
            a request; a retryable failure keeps it for later. Exit status 1 when a request failed.
            """)
    @OptionGroup var options: FrozenOptions
    @Flag(help: "Include the requests frozen with the manual policy.") var manual = false
    @Option(help: "Seconds to wait at most.") var timeout: Double = 60

    func run() throws {
        try withEngine(options) { engine in
            let events = FrozenLocked<[FrozenEvent]>([])
            let quiet = options.json
            let token = try engine.frozen.addObserver(for: [.resentSucceeded, .resentFailed, .expired, .deleted, .policyUnknown]) { event in
                events.mutate { $0.append(event) }
                guard !quiet else { return }
                switch event.kind {
                case .resentSucceeded:
                    print("sent     \(event.freezeID)  HTTP \(event.response?.status ?? 0)")
                case .resentFailed:
                    let why = event.error.map { describe($0) } ?? "failed"
                    print("\(event.isFinal ? "failed " : "retry  ")  \(event.freezeID)  \(why)")
                case .expired:
                    print("expired  \(event.freezeID)")
                case .deleted:
                    print("deleted  \(event.freezeID)  by its resend policy")
                case .policyUnknown:
                    print("kept     \(event.freezeID)  resend policy '\(event.request?.resendPolicy ?? "?")' not registered here")
                case .frozen:
                    break
                }
                fflush(stdout)
            }
            try engine.frozen.replay(manual: manual)
            let idle = engine.frozen.waitUntilIdle(timeout: timeout)
            token.cancel()
            let seen = events.get()
            let sent = seen.filter { $0.kind == .resentSucceeded }.count
            let failed = seen.filter { $0.kind == .resentFailed && $0.isFinal }.count
            let retry = seen.filter { $0.kind == .resentFailed && !$0.isFinal }.count
            let expired = seen.filter { $0.kind == .expired }.count
            let deleted = seen.filter { $0.kind == .deleted }.count
            let kept = seen.filter { $0.kind == .policyUnknown }.count
            let left = try engine.frozen.count()
            if options.json {
                try printJSON(["sent": sent, "failed": failed, "retry": retry, "expired": expired, "left": left,
                               "deleted": deleted, "kept_unknown_policy": kept,
                               "timed_out": !idle,
                               "events": seen.map { e -> [String: Any] in
                                   var o: [String: Any] = ["kind": "\(e.kind)", "id": e.freezeID, "final": e.isFinal]
                                   if let s = e.response?.status { o["status"] = s }
                                   if let err = e.error { o["code"] = err.code.name }
                                   return o
                               }] as [String: Any])
            } else {
                print("\(sent) sent, \(failed) failed, \(retry) to retry, \(expired) expired; \(left) left in the journal"
                      + (deleted > 0 ? "; \(deleted) deleted by their resend policy" : "")
                      + (kept > 0 ? "; \(kept) kept (resend policy not registered here)" : "")
                      + (idle ? "" : " (timed out)"))
            }
            if failed > 0 || !idle { throw ExitCode.failure }
        }
    }
}

/// A value shared with the journal thread.
final class FrozenLocked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&value) } }
}
