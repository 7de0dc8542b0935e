import Foundation
import XCTest

@testable import Courier

/// WebSockets (`Engine.webSocket`) against Python's `websockets` as the peer (Tests/WebSocket/peer.py,
/// the C tests' peer, run by build/ws-venv's python, which the C suite's with-peer.sh makes; the
/// tests are skipped without it): echo, the server's close ending the iteration, a subprotocol, a
/// protocol error, a refused handshake. The C core holds the behaviour (ws_test.c); these check
/// the facade.
final class WebSocketTests: LoopbackTestCase {
    private var peer: Process?
    private var peerInput: Pipe?
    private var base = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let python = ProcessInfo.processInfo.environment["COURIER_WS_PYTHON"]
            ?? root.appendingPathComponent("build/ws-venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw XCTSkip("no Python with websockets at \(python) (ctest ws_test makes build/ws-venv)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root.appendingPathComponent("Tests/WebSocket/peer.py").path]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        peer = process
        peerInput = input
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let words = String(decoding: line, as: UTF8.self).split(separator: " ")
        guard words.count >= 2, words[0] == "PORTS" else { throw XCTSkip("the peer did not start") }
        base = "ws://127.0.0.1:\(words[1])"
    }

    override func tearDown() {
        try? peerInput?.fileHandleForWriting.close() // the peer ends at the end of its stdin
        peer?.waitUntilExit()
        super.tearDown()
    }

    func testEchoAndClose() async throws {
        let ws = try await engine.webSocket(.get(base + "/echo"))
        XCTAssertEqual(ws.state, .open)
        try await ws.send("hello")
        try await ws.send(Data([0, 1, 2]))
        let first = try await ws.receive()
        XCTAssertEqual(first, .text("hello"))
        let second = try await ws.receive()
        XCTAssertEqual(second, .data(Data([0, 1, 2])))
        try ws.close(code: 1000, reason: "done")
        var rest: [WebSocket.Message] = []
        for try await message in ws { rest.append(message) }
        XCTAssertEqual(rest, [])
        XCTAssertEqual(ws.closeCode, 1000)
        XCTAssertEqual(ws.closeReason, "done")
        XCTAssertEqual(ws.closeCodeSent, 1000)
        XCTAssertEqual(ws.state, .closed)
        do {
            try await ws.send("late")
            XCTFail("sent after the close")
        } catch CourierError.wsClosed {}
        XCTAssertThrowsError(try ws.close(code: 1005)) // reserved: refused (the state aside)
    }

    func testServerCloseAndSubprotocol() async throws {
        var options = WebSocketOptions()
        options.subprotocols = ["chat", "superchat"]
        let ws = try await engine.webSocket(.get(base + "/fragments"), options: options)
        XCTAssertEqual(ws.subprotocol, "superchat")
        let text = try await ws.receive()
        XCTAssertEqual(text, .text("hello world"))
        let closing = try await engine.webSocket(.get(base + "/close"))
        var count = 0
        for try await _ in closing { count += 1 }
        XCTAssertEqual(count, 0)
        XCTAssertEqual(closing.closeCode, 4000)
        XCTAssertEqual(closing.closeReason, "server says bye")
    }

    func testProtocolErrorAndRefusedHandshake() async throws {
        let ws = try await engine.webSocket(.get(base + "/badutf8"))
        let before = try await ws.receive()
        XCTAssertEqual(before, .text("before"))
        do {
            _ = try await ws.receive()
            XCTFail("no protocol error")
        } catch CourierError.wsProtocolError {}
        XCTAssertEqual(ws.closeCodeSent, 1007)
        do {
            _ = try await engine.webSocket(.get(base + "/reject"))
            XCTFail("the handshake was not refused")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .wsHandshake)
            XCTAssertEqual(error.httpStatus, 403)
        }
    }

    func testCompressionAndUnreadBytes() async throws {
        var options = WebSocketOptions()
        options.compression = true
        options.maxReceiveQueueBytes = 64 * 1024
        let ws = try await engine.webSocket(.get(base + "/echo"), options: options)
        XCTAssertTrue(ws.extensions.hasPrefix("permessage-deflate"))
        let big = String(repeating: "compress me ", count: 1000)
        try await ws.send(big)
        let back = try await ws.receive()
        XCTAssertEqual(back, .text(big))
        XCTAssertEqual(ws.unreadBytes, 0)
        try ws.close(code: 1000)
        for try await _ in ws {}
        let plain = try await engine.webSocket(.get(base + "/deflated"))
        XCTAssertEqual(plain.extensions, "")
        let said = try await plain.receive()
        XCTAssertEqual(said, .text("none"))
    }

    /// `courier ws URL`: stdin lines go out as text messages, each message that comes back is
    /// printed; at the end of stdin a close with 1000, then what still arrives, then exit 0.
    func testToolSendsLinesAndPrintsMessages() throws {
        for extra in [[], ["--compression"]] {
            let process = Process()
            process.executableURL = try courierToolURL()
            process.arguments = ["ws", base + "/echo"] + extra
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let long = String(repeating: "long line ", count: 200)
            let expected = "hello\nworld\n\(long)\n"
            input.fileHandleForWriting.write(Data(expected.utf8))
            // The echo comes back before stdin ends (an echo server sends nothing after a close it
            // received), each line printed as it arrives.
            var data = Data()
            while data.count < expected.utf8.count {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                data.append(chunk)
            }
            try input.fileHandleForWriting.close() // then the close with 1000 and the exit
            data.append(output.fileHandleForReading.readDataToEndOfFile())
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0)
            XCTAssertEqual(String(decoding: data, as: UTF8.self), expected)
        }
    }
}

/// More WebSockets to one host than its connection limit, against the test server's /ws/echo (no
/// Python needed): libcurl closes the oldest idle connection of a host at its limit, and a
/// WebSocket's connection is idle to libcurl, so the sixth WebSocket (5 per host by default) did
/// not open, or closed another's connection under it. ws_test's test_more_than_the_host_limit holds
/// the behaviour; this checks that the facade gets it.
final class WebSocketHostLimitTests: LoopbackTestCase {
    func testMoreWebSocketsThanTheHostLimit() async throws {
        let url = server.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/ws/echo"
        var sockets: [WebSocket] = []
        var options = WebSocketOptions()
        options.handshakeTimeout = 5
        for i in 0..<8 {
            let ws = try await engine.webSocket(.get(url), options: options)
            sockets.append(ws)
            try await ws.send("open \(i)")
            let back = try await ws.receive()
            XCTAssertEqual(back, .text("open \(i)"))
        }
        let response = try await engine.send(.get("/json"))
        XCTAssertEqual(response.status, 200)
        for (i, ws) in sockets.enumerated() {
            try await ws.send("again \(i)")
            let back = try await ws.receive()
            XCTAssertEqual(back, .text("again \(i)"))
            try ws.close()
            for try await _ in ws {}
        }
    }
}

/// WebSockets read and written by tasks on the engine's worker thread (`engine.taskExecutor`: the
/// pace of an event loop, no thread woken between the echo's read and the next send), and the
/// receive cancelled by its task on either executor; against the test server's /ws/echo (no Python
/// needed). The behaviours are the C core's; these check that the facade keeps them wherever the
/// task runs.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
final class WebSocketOnTheWorkerTests: LoopbackTestCase {
    private var echoURL: String { server.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/ws/echo" }

    /// The engine's worker thread, learnt from a completion handler (which runs there).
    private func workerThread(of engine: Engine) -> pthread_t {
        let done = expectation(description: "completion")
        let thread = Locked<pthread_t?>(nil)
        engine.send(.get("/status/200")) { _ in
            thread.set(pthread_self())
            done.fulfill()
        }
        wait(for: [done], timeout: 20)
        return thread.get()!
    }

    /// Messages of every length form (under and over the 64 KiB a sender writes itself), text and
    /// binary, one at a time and then all sent before any is read: each comes back whole and in
    /// order, and the task runs on the worker after every send and receive.
    func testEchoInOrderOnTheEngineExecutor() async throws {
        let engine = self.engine!
        let worker = workerThread(of: engine)
        let url = echoURL
        let sizes = [0, 1, 125, 126, 1024, 65_535, 65_536, 70_000, 300_000]
        let messages: [WebSocket.Message] = sizes.enumerated().map { i, n in
            i % 2 == 0 ? .text(String(repeating: "\(i % 10)", count: n)) : .data(Data((0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }))
        }
        let (back, offWorker, code) = try await withTaskExecutorPreference(engine.taskExecutor) {
            var back: [WebSocket.Message] = []
            var offWorker = 0
            let ws = try await engine.webSocket(.get(url))
            for message in messages {
                try await ws.send(message)
                if pthread_equal(pthread_self(), worker) == 0 { offWorker += 1 }
                back.append(try await ws.receive())
                if pthread_equal(pthread_self(), worker) == 0 { offWorker += 1 }
            }
            for message in messages { try await ws.send(message) }
            for _ in messages { back.append(try await ws.receive()) }
            try ws.close()
            for try await extra in ws { back.append(extra) }
            return (back, offWorker, ws.closeCode)
        }
        XCTAssertEqual(back.count, 2 * messages.count)
        XCTAssertTrue(back == messages + messages, "a message came back changed or out of order")
        XCTAssertEqual(offWorker, 0, "the task ran off the worker")
        XCTAssertEqual(code, 1000)
    }

    /// Both kinds of backpressure with the task on the worker: 24 messages of almost 1 MiB to a server
    /// that reads nothing for 1.5 s (the send queue fills to its 16 MiB and a send waits for room),
    /// read with a 64 KiB receive queue (the socket is left unread until the reader makes room):
    /// every message comes back whole and in order.
    func testBackpressureBothWaysOnTheEngineExecutor() async throws {
        let engine = self.engine!
        let url = echoURL + "?hold=1500"
        var options = WebSocketOptions()
        options.maxReceiveQueueBytes = 64 * 1024
        let count = 24, size = 1_000_000
        let ws = try await withTaskExecutorPreference(engine.taskExecutor) {
            try await engine.webSocket(.get(url), options: options)
        }
        let sender = Task(executorPreference: engine.taskExecutor) {
            for i in 0..<count { try await ws.send(Data(repeating: UInt8(i), count: size)) }
        }
        let firsts = try await withTaskExecutorPreference(engine.taskExecutor) { () async throws -> [UInt8] in
            var firsts: [UInt8] = []
            for _ in 0..<count {
                guard case .data(let data) = try await ws.receive() else { throw CourierError(.internal, message: "text") }
                XCTAssertEqual(data.count, size)
                XCTAssertEqual(Set(data).count, 1, "a message mixed with another")
                firsts.append(data.first ?? 0)
            }
            return firsts
        }
        try await sender.value
        XCTAssertEqual(firsts, (0..<count).map { UInt8($0) })
        XCTAssertEqual(ws.unreadBytes, 0)
        try ws.close()
        for try await _ in ws {}
        XCTAssertEqual(ws.closeCode, 1000)
    }

    /// A receive waiting for a message (or about to) ends with CancellationError when its task is
    /// cancelled, on the global executor and on the engine's; the WebSocket goes on, and no message
    /// is lost.
    func testCancellingAWaitingReceive() async throws {
        let engine = self.engine!
        for (executor, pause) in [(nil, false), (nil, true), (engine.taskExecutor, false), (engine.taskExecutor, true)]
            as [((any TaskExecutor)?, Bool)] {
            let ws = try await engine.webSocket(.get(echoURL))
            let waiting = Task(executorPreference: executor) { () async -> Bool in
                do {
                    _ = try await ws.receive()
                    return false
                } catch {
                    return error is CancellationError
                }
            }
            if pause { try await Task.sleep(nanoseconds: 50_000_000) } // most likely waiting by now
            waiting.cancel()
            let cancelled = await waiting.value
            XCTAssertTrue(cancelled, "the receive did not end with CancellationError")
            let after = Task(executorPreference: executor) { () async throws -> [WebSocket.Message] in
                try await ws.send("one")
                try await ws.send("two")
                return [try await ws.receive(), try await ws.receive()]
            }
            let back = try await after.value
            XCTAssertEqual(back, [.text("one"), .text("two")])
            try ws.close()
            for try await _ in ws {}
        }
    }

    /// Closing the engine while a task on its executor waits for a message (or is about to) ends
    /// the wait with ``CourierError/Code/closed`` (the task then runs off the worker, which stopped).
    func testClosingTheEngineEndsAReceiveWaitingOnItsExecutor() async throws {
        let engine = try makeEngine { _ in }
        let url = echoURL
        let ws = try await withTaskExecutorPreference(engine.taskExecutor) { try await engine.webSocket(.get(url)) }
        let waiting = Task(executorPreference: engine.taskExecutor) { () async -> CourierError.Code? in
            do {
                _ = try await ws.receive()
                return nil
            } catch {
                return (error as? CourierError)?.code
            }
        }
        await Task.yield()
        engine.close()
        let code = await waiting.value
        XCTAssertEqual(code, .closed)
        XCTAssertEqual(ws.state, .closed)
    }
}
