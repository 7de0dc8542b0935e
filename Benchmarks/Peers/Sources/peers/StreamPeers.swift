// StreamPeers.swift — `peers ws` and `peers sse`: Courier's Swift facade beside the Swift clients
// users would pick instead, against the C test server (BenchServer.testServer: /ws/echo and /sse,
// a thread per connection, in this process), side by side in one run, the order rotating from run
// to run. Medians of the runs; each ratio is the median of the per-run ratios.
//   ws:  round trips of a 1 KiB binary message (send, then wait for its echo), on 1 connection and
//        on --connections at once: Courier's `engine.webSocket` (send / receive, a task per
//        connection) on the global executor and on the engine's (`courier_swift_worker`:
//        `withTaskExecutorPreference(engine.taskExecutor)`, the tasks on the worker that reads the
//        echo) vs websocket-kit (vapor/websocket-kit over swift-nio) driven two ways: from its
//        event loop (the next message sent from the onBinary callback: NIO's own pace; paired with
//        both Courier clients) and from Swift concurrency (async send, the echo handed to the task
//        by an AsyncStream; paired with the default). Target: Courier >= 1x websocket-kit.
//   sse: --events events of one /sse response by Courier's `engine.events(for:)`. No Swift peer:
//        mattt/EventSource 1.1.1 (its only release) does not build on Linux (URLSession.bytes), and a
//        package's files are not committed here.
import ArgumentParser
import AsyncHTTPClient
import Courier
import CourierBenchmarks
import Foundation
import NIOCore
import NIOPosix
import WebSocketKit

/// CPU seconds of this process so far (every thread).
private func processCPU() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

private func log(_ line: String) {
    FileHandle.standardError.write((line + "\n").data(using: .utf8)!)
}

/// The embedded test server, and its base URL without the path.
private func startTestServer() throws -> (BenchServer, port: Int) {
    let server = try BenchServer.testServer()
    guard let port = URL(string: server.url)?.port else { throw ValidationError("no port in \(server.url)") }
    return (server, port)
}

/// Runs every client `runs` times (order rotating); per client, rates (items / s) and CPU us per item.
private func measure(_ names: [String], runs: Int, count: Int,
                     _ body: (String) async throws -> Double) async throws -> (rates: [String: [Double]], cpu: [String: [Double]]) {
    var rates: [String: [Double]] = [:], cpu: [String: [Double]] = [:]
    for run in 0..<max(1, runs) {
        for i in 0..<names.count {
            let name = names[(i + run) % names.count]
            let c0 = processCPU()
            let seconds = try await body(name)
            let used = processCPU() - c0
            rates[name, default: []].append(Double(count) / seconds)
            cpu[name, default: []].append(used / Double(count) * 1e6)
            log("run \(run + 1)/\(runs) \(name): \(Int(Double(count) / seconds))/s")
        }
    }
    return (rates, cpu)
}

private func summarize(_ prefix: String, _ m: (rates: [String: [Double]], cpu: [String: [Double]]),
                       pairs: [(String, String)], into result: inout [String: Any]) {
    for (name, values) in m.rates {
        result["\(prefix)_\(name)"] = (median(values) * 10).rounded() / 10
        result["\(prefix)_\(name)_runs"] = values.map { ($0 * 10).rounded() / 10 }
        result["\(prefix)_\(name)_cpu_us"] = (median(m.cpu[name] ?? []) * 100).rounded() / 100
    }
    for (mine, peer) in pairs {
        let a = m.rates[mine] ?? [], b = m.rates[peer] ?? []
        result["\(prefix)_\(mine)_vs_\(peer)"] = (median(zip(a, b).map { $0 / $1 }) * 100).rounded() / 100
    }
}

private func printResult(_ result: [String: Any], json: Bool, runs: Int) throws {
    if json {
        let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
        return
    }
    print("".padding(toLength: 34, withPad: " ", startingAt: 0) + "   per second   CPU us each   (median of \(runs) runs)")
    for key in result.keys.sorted() where !key.hasSuffix("_runs") && !key.hasSuffix("_cpu_us") && !key.contains("_vs_") {
        guard let v = result[key] as? Double, let c = result[key + "_cpu_us"] as? Double else { continue }
        print(key.padding(toLength: 34, withPad: " ", startingAt: 0) + String(format: "%13.0f %13.1f", v, c))
    }
    for key in result.keys.sorted() where key.contains("_vs_") {
        print(key.padding(toLength: 60, withPad: " ", startingAt: 0) + String(format: "%.2fx", result[key] as? Double ?? 0))
    }
}

// MARK: - WebSocket

struct PeersWebSocket: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ws",
        abstract: "WebSocket echo of 1 KiB messages: Courier Swift vs websocket-kit (target: Courier >= 1x).",
        discussion: "Against the C test server's /ws/echo (in this process). Connections are opened before the clock "
            + "starts; the round trips are shared among them. Progress goes to stderr."
    )

    @Option(help: "Round trips per client and run.") var messages = 5000
    @Option(help: "Connections of the parallel case.") var connections = 32
    @Option(help: "Runs; medians are reported.") var runs = 5
    @Option(help: "Untimed round trips per connection before each timed run.") var warmup = 50
    @Option(help: "Only these clients, comma-separated (for a profile of one), e.g. courier_swift.")
    var clients: String?
    @Flag(help: "Print one JSON object.") var json = false

    static let message = [UInt8]((0..<1024).map { UInt8($0 % 251) })

    func run() async throws {
        let (server, port) = try startTestServer()
        defer { server.stop() }
        let url = "ws://127.0.0.1:\(port)/ws/echo"
        var configuration = Configuration()
        configuration.temporaryStore = true
        configuration.maxConnectionsPerHost = max(6, connections)
        configuration.maxConnections = max(64, connections)
        let engine = try Engine(configuration: configuration)
        defer { engine.close() }
        let group = MultiThreadedEventLoopGroup.singleton
        var result: [String: Any] = [:]
        let all = ["courier_swift", "courier_swift_worker", "websocketkit_eventloop", "websocketkit_async"]
        let chosen = clients.map { $0.split(separator: ",").map(String.init) } ?? all
        let names = all.filter { chosen.contains($0) }
        guard !names.isEmpty else { throw ValidationError("--clients: none of \(all.joined(separator: ", "))") }
        for conns in [1, connections] {
            let m = try await measure(names, runs: runs, count: messages) { name in
                switch name {
                case "courier_swift": return try await courier(engine, url: url, connections: conns)
                case "courier_swift_worker":
                    guard #available(macOS 15.0, *) else { throw ValidationError("engine.taskExecutor needs macOS 15") }
                    return try await withTaskExecutorPreference(engine.taskExecutor) {
                        try await courier(engine, url: url, connections: conns)
                    }
                case "websocketkit_eventloop": return try await kitEventLoop(group, url: url, connections: conns)
                default: return try await kitAsync(group, url: url, connections: conns)
                }
            }
            summarize("ws\(conns)", m, pairs: [("courier_swift", "websocketkit_eventloop"), ("courier_swift", "websocketkit_async"),
                                               ("courier_swift_worker", "websocketkit_eventloop")],
                      into: &result)
        }
        result["messages"] = messages
        result["message_bytes"] = Self.message.count
        result["connections"] = connections
        result["runs"] = runs
        result["server"] = "courier test server (C, a thread per connection, in this process)"
        try printResult(result, json: json, runs: runs)
    }

    /// The round trips of a run, spread over the connections.
    private func shares(_ connections: Int) -> [Int] {
        (0..<connections).map { messages / connections + ($0 < messages % connections ? 1 : 0) }
    }

    private func courier(_ engine: Engine, url: String, connections: Int) async throws -> Double {
        var sockets: [Courier.WebSocket] = []
        for _ in 0..<connections { sockets.append(try await engine.webSocket(.get(url))) }
        let message = Data(Self.message)
        func echo(_ ws: Courier.WebSocket, _ n: Int) async throws {
            for _ in 0..<n {
                try await ws.send(.data(message))
                guard case .data(let back) = try await ws.receive(), back.count == message.count else {
                    throw ValidationError("courier_swift: a wrong echo")
                }
            }
        }
        func all(_ counts: [Int]) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (ws, n) in zip(sockets, counts) { group.addTask { try await echo(ws, n) } }
                try await group.waitForAll()
            }
        }
        try await all(Array(repeating: warmup, count: connections))
        let t0 = Date()
        try await all(shares(connections))
        let seconds = Date().timeIntervalSince(t0)
        for ws in sockets {
            try ws.close()
            do { for try await _ in ws {} } catch {}
        }
        return seconds
    }

    /// websocket-kit at NIO's own pace: each echo arrives on the connection's event loop, where the
    /// next message is sent at once.
    private func kitEventLoop(_ group: any EventLoopGroup, url: String, connections: Int) async throws -> Double {
        final class Loop: @unchecked Sendable { // touched only on its connection's event loop
            var remaining = 0
            var promise: EventLoopPromise<Void>?
        }
        var sockets: [(WebSocketKit.WebSocket, Loop)] = []
        for _ in 0..<connections {
            let loop = Loop()
            let ws = try await connectKit(group, url: url) { ws in
                ws.onBinary { ws, buffer in
                    guard buffer.readableBytes == Self.message.count else {
                        loop.promise?.fail(ValidationError("websocketkit: a wrong echo"))
                        return
                    }
                    loop.remaining -= 1
                    if loop.remaining > 0 { ws.send(Self.message) } else { loop.promise?.succeed(()) }
                }
            }
            sockets.append((ws, loop))
        }
        func all(_ counts: [Int]) async throws {
            var futures: [EventLoopFuture<Void>] = []
            for ((ws, loop), n) in zip(sockets, counts) where n > 0 {
                let promise = ws.eventLoop.makePromise(of: Void.self)
                ws.eventLoop.execute {
                    loop.remaining = n
                    loop.promise = promise
                    ws.send(Self.message)
                }
                futures.append(promise.futureResult)
            }
            for f in futures { try await f.get() }
        }
        try await all(Array(repeating: warmup, count: connections))
        let t0 = Date()
        try await all(shares(connections))
        let seconds = Date().timeIntervalSince(t0)
        for (ws, _) in sockets { try? await ws.close(code: .normalClosure).get() }
        return seconds
    }

    /// websocket-kit from Swift concurrency: `try await ws.send`, the echo handed over by an AsyncStream.
    private func kitAsync(_ group: any EventLoopGroup, url: String, connections: Int) async throws -> Double {
        var sockets: [(WebSocketKit.WebSocket, AsyncStream<ByteBuffer>)] = []
        for _ in 0..<connections {
            let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream()
            let ws = try await connectKit(group, url: url) { ws in
                ws.onBinary { _, buffer in continuation.yield(buffer) }
                ws.onClose.whenComplete { _ in continuation.finish() }
            }
            sockets.append((ws, stream))
        }
        func echo(_ ws: WebSocketKit.WebSocket, _ stream: AsyncStream<ByteBuffer>, _ n: Int) async throws {
            var it = stream.makeAsyncIterator()
            for _ in 0..<n {
                try await ws.send(Self.message)
                guard let back = await it.next(), back.readableBytes == Self.message.count else {
                    throw ValidationError("websocketkit_async: a wrong echo")
                }
            }
        }
        func all(_ counts: [Int]) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for ((ws, stream), n) in zip(sockets, counts) { group.addTask { try await echo(ws, stream, n) } }
                try await group.waitForAll()
            }
        }
        try await all(Array(repeating: warmup, count: connections))
        let t0 = Date()
        try await all(shares(connections))
        let seconds = Date().timeIntervalSince(t0)
        for (ws, _) in sockets { try? await ws.close(code: .normalClosure).get() }
        return seconds
    }

    /// Connects, runs `setUp` on the socket before any frame can arrive, and returns it.
    private func connectKit(_ group: any EventLoopGroup, url: String,
                            setUp: @escaping @Sendable (WebSocketKit.WebSocket) -> Void) async throws -> WebSocketKit.WebSocket {
        let promise = group.any().makePromise(of: WebSocketKit.WebSocket.self)
        WebSocketKit.WebSocket.connect(to: url, on: group) { ws in
            setUp(ws)
            promise.succeed(ws)
        }.whenFailure { promise.fail($0) }
        return try await promise.futureResult.get()
    }
}

// MARK: - Server-sent events

struct PeersSSE: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sse",
        abstract: "Server-sent events per second delivered to Swift by Courier's engine.events(for:).",
        discussion: "Reads --events events of one response of the C test server's /sse (in this process), "
            + "written as fast as the client reads. No Swift peer: mattt/EventSource 1.1.1 does not build "
            + "on Linux (URLSession.bytes). Progress goes to stderr."
    )

    @Option(help: "Events per client and run.") var events = 50_000
    @Option(help: "Runs; medians are reported.") var runs = 5
    @Flag(help: "Print one JSON object.") var json = false

    func run() async throws {
        let (server, port) = try startTestServer()
        defer { server.stop() }
        let url = "http://127.0.0.1:\(port)/sse?per=\(events)&total=\(events)"
        var configuration = Configuration()
        configuration.temporaryStore = true
        let engine = try Engine(configuration: configuration)
        defer { engine.close() }
        let total = events
        let expected = "event \(total)\nline two"
        let m = try await measure(["courier_swift"], runs: runs, count: total) { name in
            var n = 0, last = ""
            let t0 = Date()
            let source = try engine.events(for: .get(url))
            for try await event in source {
                n += 1
                last = event.data
                if n == total { break }
            }
            source.close()
            let seconds = Date().timeIntervalSince(t0)
            guard last == expected else { throw ValidationError("\(name): the last event was \(last)") }
            return seconds
        }
        var result: [String: Any] = [:]
        summarize("sse", m, pairs: [], into: &result)
        result["events"] = events
        result["runs"] = runs
        result["server"] = "courier test server (C, a thread per connection, in this process)"
        try printResult(result, json: json, runs: runs)
    }
}
