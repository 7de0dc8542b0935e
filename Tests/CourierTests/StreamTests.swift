// StreamTests.swift — streamed responses through the facade (Engine.bytes(for:)): the head before
// the body, chunks, bytes and lines, a slow reader held to the engine's buffer, cancelling the task
// that iterates, dropping the sequence half read, a cut body, statuses handed to the reader, and
// what a stream refuses. The C core holds the behaviour (stream_test.c); these check the Swift
// translation: async waiting on the notify callback, cancellation, errors thrown as CourierError.

import Courier
import Foundation
import XCTest

final class StreamTests: LoopbackTestCase {
    /// The head arrives first (an empty body); chunks then carry the whole body, in order.
    func testHeadThenChunks() async throws {
        let (bytes, head) = try await engine.bytes(for: .get("bytes/300000").parameter("chunked", "1"))
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Type"), "application/octet-stream")
        XCTAssertTrue(head.body.isEmpty)
        var total = 0
        var wrong = 0
        for try await chunk in bytes.chunks {
            for (i, byte) in chunk.enumerated() where byte != UInt8((total + i) % 251) { wrong += 1 }
            total += chunk.count
        }
        XCTAssertEqual(total, 300_000)
        XCTAssertEqual(wrong, 0)
        let whole = try XCTUnwrap(bytes.response)
        XCTAssertEqual(whole.status, 200)
        XCTAssertGreaterThanOrEqual(whole.metrics.bytesReceived, 300_000)
    }

    /// The bytes one at a time, and lines (LF and CRLF ends, the last line without one).
    func testBytesAndLines() async throws {
        let (bytes, _) = try await engine.bytes(for: .get("bytes/1000"))
        var count = 0
        for try await byte in bytes {
            XCTAssertEqual(byte, UInt8(count % 251))
            count += 1
        }
        XCTAssertEqual(count, 1000)

        let text = "one\r\ntwo\nthree"
        let hex = text.utf8.map { String(format: "%02x", $0) }.joined()
        let (lines, _) = try await engine.bytes(for: .get("text").parameter("type", "text/plain").parameter("hex", hex))
        var got: [String] = []
        for try await line in lines.lines { got.append(line) }
        XCTAssertEqual(got, ["one", "two", "three"])
    }

    /// A reader slower than the network: the engine holds at most its buffer (plus what libcurl
    /// kept while paused), whatever the body's size.
    func testSlowReaderIsHeldToTheBuffer() async throws {
        let small = try makeEngine { $0.streamBufferBytes = 64 * 1024 }
        defer { small.close() }
        let (bytes, _) = try await small.bytes(for: .get("bytes/16777216")) // 16 MiB
        var total = 0
        var maxHeld: Int64 = 0
        var nextPause = 1 << 20
        for try await chunk in bytes.chunks {
            total += chunk.count
            maxHeld = max(maxHeld, bytes.buffered)
            if total >= nextPause {
                try await Task.sleep(nanoseconds: 2_000_000)
                nextPause += 1 << 20
            }
        }
        XCTAssertEqual(total, 16_777_216)
        XCTAssertGreaterThan(maxHeld, 0)
        XCTAssertLessThanOrEqual(maxHeld, 64 * 1024 + 256 * 1024)
    }

    /// Cancelling the task that iterates cancels the transfer: the iteration throws `.cancelled`.
    func testCancellingTheTaskCancelsTheStream() async throws {
        let (bytes, _) = try await engine.bytes(for: .get("bytes/100000000").parameter("rate", "1000000"))
        let task = Task {
            var total = 0
            for try await chunk in bytes.chunks { total += chunk.count }
            return total
        }
        try await Task.sleep(nanoseconds: 150_000_000)
        task.cancel()
        do {
            let total = try await task.value
            XCTFail("the stream ended after \(total) bytes instead of failing")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .cancelled)
        }
    }

    /// A cut body: the bytes that came, then `.partialResponse`.
    func testCutBodyThrowsPartialResponse() async throws {
        let (bytes, head) = try await engine.bytes(for: .get("close-mid-body"))
        XCTAssertEqual(head.status, 200)
        var total = 0
        do {
            for try await chunk in bytes.chunks { total += chunk.count }
            XCTFail("no error")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .partialResponse)
        }
        XCTAssertEqual(total, 100)
    }

    /// Any status is the reader's: a 404 is a head and its body, not a thrown error.
    func testStatusesAreTheReaders() async throws {
        let (bytes, head) = try await engine.bytes(for: .get("status/404"))
        XCTAssertEqual(head.status, 404)
        var body = Data()
        for try await chunk in bytes.chunks { body.append(chunk) }
        XCTAssertEqual(String(decoding: body, as: UTF8.self), #"{"status":404}"#)
    }

    /// A failure before the head is thrown by `bytes(for:)` itself; a request that may be frozen
    /// is refused.
    func testFailuresBeforeTheHead() async throws {
        do {
            _ = try await engine.bytes(for: .get("http://127.0.0.1:\(try freePort())/"))
            XCTFail("no error")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .cannotConnect)
        }
        do {
            _ = try await engine.bytes(for: .post("echo").freeze(.auto))
            XCTFail("no error")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .invalidArgument)
        }
    }

    /// Dropping the sequence half read cancels the transfer; the engine goes on serving requests.
    func testDroppedHalfReadIsCancelled() async throws {
        do {
            let (bytes, _) = try await engine.bytes(for: .get("bytes/50000000"))
            var iterator = bytes.chunks.makeAsyncIterator()
            let first = try await iterator.next()
            XCTAssertNotNil(first)
        }
        let response = try await engine.send(.get("json"))
        XCTAssertEqual(response.status, 200)
    }

    /// `courier get --stream` writes each chunk as it arrives: a pipe reads the first bytes while
    /// the response is still coming (10 s of paced body), and the whole body on a short one.
    func testToolPrintsTheBodyAsItArrives() throws {
        let process = Process()
        process.executableURL = try courierToolURL()
        process.arguments = ["get", "--stream", server.baseURL + "/bytes/1000000?rate=100000"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let first = pipe.fileHandleForReading.availableData // blocks until the first write
        XCTAssertFalse(first.isEmpty)
        XCTAssertEqual(first.first, 0)
        XCTAssertTrue(process.isRunning, "the body came out only at the end")
        process.terminate()
        process.waitUntilExit()

        let (status, output) = try runCourierTool(["get", "--stream", server.baseURL + "/json"])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(output.hasPrefix(#"{"code":200,"message":"ok""#), output)
        let (failed, _) = try runCourierTool(["get", "--stream", server.baseURL + "/status/404"])
        XCTAssertEqual(failed, 1)
    }

    /// Server-sent events: type, multi-line data and ids, reconnection with Last-Event-ID and the
    /// server's retry time, and 204 ending the sequence with `.httpStatus`.
    func testServerSentEvents() async throws {
        let source = try engine.events(for: .get("sse").parameter("per", "2").parameter("total", "5")
            .parameter("retry", "20"))
        var seen: [ServerSentEvent] = []
        do {
            for try await event in source { seen.append(event) }
            XCTFail("the source did not end with an error")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .httpStatus)
            XCTAssertEqual(error.httpStatus, 204)
        }
        XCTAssertEqual(seen.map(\.lastEventID), ["1", "2", "3", "4", "5"])
        XCTAssertEqual(seen.first?.type, "tick")
        XCTAssertEqual(seen.first?.data, "event 1\nline two")
        XCTAssertEqual(source.state, .closed)
        XCTAssertEqual(source.retry, 0.02, accuracy: 0.0001)
    }

    /// Cancelling the task that iterates closes the source (it was waiting for its next event).
    func testCancellingTheTaskClosesTheEventSource() async throws {
        let source = try engine.events(for: .get("sse").parameter("per", "1").parameter("retry", "60000"))
        let task = Task {
            var n = 0
            for try await _ in source { n += 1 }
            return n
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("no error")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .cancelled)
        }
        XCTAssertEqual(source.state, .closed)
    }

    /// `courier events URL` prints each event as it arrives and exits 1 when the source ends.
    func testToolPrintsEvents() throws {
        let (status, output) = try runCourierTool(["events", server.baseURL + "/sse?per=2&total=2&retry=10"])
        XCTAssertEqual(status, 1) // the 204 that ends it
        XCTAssertTrue(output.contains("event: tick\nid: 1\ndata: event 1\ndata: line two\n\n"), output)
        XCTAssertTrue(output.contains("id: 2\n"), output)
    }

    /// A port nothing listens on.
    private func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw XCTSkip("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
