// TransportTests.swift — custom transports through the facade: a transport that speaks a small
// private TCP protocol to a peer this test runs, its answers judged like HTTP ones (status,
// validator, cache-first), cancellation reaching the transport's task (also when the engine
// closes), errors mapped to codes, retry, and registration errors.
//
// The protocol (as in mock_test.c):
//   request:  "<METHOD> <URL> <BODYLEN>\n<BODY>"
//   response: "<STATUS> <BODYLEN>\n<BODY>", BODY = "peer saw <METHOD> <URL> <body>";
//   a URL containing /missing gets 404; one containing /silent is never answered.

import Courier
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
private let streamSocket = Int32(SOCK_STREAM.rawValue)
private let shutBoth = Int32(SHUT_RDWR)
private let sendFlags = Int32(MSG_NOSIGNAL) // a write to a closed peer fails with EPIPE instead of killing the process
#else
import Darwin
private let streamSocket = SOCK_STREAM
private let shutBoth = SHUT_RDWR
private let sendFlags: Int32 = 0
#endif

// MARK: - Sockets

/// A blocking TCP socket on 127.0.0.1. `@unchecked Sendable`: the descriptor is closed once, by
/// its owner; other threads only call `shutdown`, which is thread-safe.
private final class BlockingSocket: @unchecked Sendable {
    let fd: Int32
    private let shut = Locked(false)

    init(fd: Int32) { self.fd = fd }

    static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }

    static func open(port: UInt16) throws -> BlockingSocket {
        let fd = socket(AF_INET, streamSocket, 0)
        guard fd >= 0 else { throw CourierError(.internal, osError: Int(errno)) }
        #if canImport(Darwin)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = loopbackAddress(port: port)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            _ = close(fd)
            throw CourierError(.cannotConnect, osError: Int(errno))
        }
        return BlockingSocket(fd: fd)
    }

    var wasShutDown: Bool { shut.get() }

    func shutDown() {
        shut.set(true)
        _ = shutdown(fd, shutBoth)
    }

    func closeSocket() { _ = close(fd) }

    func send(_ data: Data) throws {
        var offset = 0
        while offset < data.count {
            let n = data.withUnsafeBytes { Foundation.send(fd, $0.baseAddress! + offset, data.count - offset, sendFlags) }
            guard n > 0 else { throw CourierError(.network, osError: Int(errno)) }
            offset += n
        }
    }

    /// Reads up to '\n' (not included); nil at end of stream.
    func receiveLine() -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }

    /// Reads exactly `count` bytes; nil if the stream ends first.
    func receive(count: Int) -> Data? {
        var data = Data(count: count)
        var got = 0
        while got < count {
            let n = data.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            if n <= 0 { return nil }
            got += n
        }
        return data
    }
}

// MARK: - The peer

/// The test peer: accepts on 127.0.0.1, one thread per connection.
private final class Peer: @unchecked Sendable {
    let port: UInt16
    private let listener: BlockingSocket
    let served = Locked(0)
    let connections = Locked(0)

    init() throws {
        let fd = socket(AF_INET, streamSocket, 0)
        var address = BlockingSocket.loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 16) == 0 else { throw CourierError(.internal, osError: Int(errno)) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        listener = BlockingSocket(fd: fd)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener.fd, nil, nil)
            if client < 0 { return }
            connections.mutate { $0 += 1 }
            Thread.detachNewThread { [self] in serve(BlockingSocket(fd: client)) }
        }
    }

    private func serve(_ connection: BlockingSocket) {
        defer { connection.closeSocket() }
        guard let line = connection.receiveLine() else { return }
        let fields = line.split(separator: " ")
        guard fields.count == 3, let length = Int(fields[2]), let body = connection.receive(count: length) else { return }
        let (method, url) = (String(fields[0]), String(fields[1]))
        if url.contains("/silent") {
            while connection.receive(count: 1) != nil {} // until the client gives up
            return
        }
        let message = Data("peer saw \(method) \(url) ".utf8) + body
        let status = url.contains("/missing") ? 404 : 200
        served.mutate { $0 += 1 } // before answering, so a client that has the answer sees the count
        try? connection.send(Data("\(status) \(message.count)\n".utf8) + message)
    }

    func stop() {
        listener.shutDown()
        listener.closeSocket()
    }
}

// MARK: - The transport

/// A transport's outcome, handed from the thread that made it to the task under a lock.
private final class OutcomeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var outcome: Result<Response, any Error>?
    func set(_ value: Result<Response, any Error>) { lock.withLock { outcome = value } }
    func get() throws -> Response { try lock.withLock { outcome! }.get() }
}

/// Speaks the peer's protocol: blocking I/O on a thread of its own; cancelling the task shuts
/// the socket down.
private struct PeerTransport: Transport {
    let port: UInt16

    func send(_ call: TransportCall) async throws -> Response {
        let socket = try BlockingSocket.open(port: port)
        // The outcome crosses from the thread to the task under a lock, not only through the
        // continuation: resumed before the task awaits, the continuation orders the two by an
        // atomic in the concurrency runtime that ThreadSanitizer does not see (scripts/test runs
        // this suite under it).
        let outcome = OutcomeBox()
        try await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    defer { socket.closeSocket() }
                    do {
                        try socket.send(Data("\(call.method) \(call.url) \(call.body.count)\n".utf8) + call.body)
                        guard let line = socket.receiveLine() else { throw CourierError(.partialResponse) }
                        let fields = line.split(separator: " ")
                        guard fields.count == 2, let status = Int(fields[0]), let length = Int(fields[1]),
                              let body = socket.receive(count: length) else { throw CourierError(.partialResponse) }
                        outcome.set(.success(Response(status: status, headers: ["X-Transport": "tcp"], body: body)))
                    } catch {
                        outcome.set(.failure(socket.wasShutDown ? CancellationError() : error))
                    }
                    continuation.resume()
                }
            }
        } onCancel: {
            socket.shutDown()
        }
        return try outcome.get()
    }
}

// MARK: - Tests

final class TransportTests: LoopbackTestCase {
    private struct Broken: Error {}

    private var peer: Peer!
    private var tcp: Engine!

    override func setUpWithError() throws {
        try super.setUpWithError()
        peer = try Peer()
        tcp = try makeEngine { $0.transports["tcp"] = PeerTransport(port: self.peer.port) }
    }

    override func tearDown() {
        tcp?.close()
        tcp = nil
        peer?.stop()
        peer = nil
        super.tearDown()
    }

    func testAPrivateTCPTransportAnswersAndIsJudgedLikeHTTP() async throws {
        let response = try await tcp.send(.post("/rpc/echo").transport("tcp").body(Data("hello".utf8), contentType: "text/plain")
            .validator { $0.text?.hasPrefix("peer saw") == true })
        XCTAssertEqual(response.text, "peer saw POST \(server.baseURL)/rpc/echo hello")
        XCTAssertEqual(response.header("X-Transport"), "tcp")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.url, server.baseURL + "/rpc/echo")
        XCTAssertEqual(response.method, "POST")
        XCTAssertEqual(peer.served.get(), 1)

        let missing = await assertThrows(.httpStatus) { try await self.tcp.send(.get("/missing").transport("tcp")) }
        XCTAssertEqual(missing?.response?.status, 404)
        let rejected = await assertThrows(.invalidResult) {
            try await self.tcp.send(.get("/rpc/x").transport("tcp").validator { $0.text?.contains("nope") == true })
        }
        XCTAssertEqual(rejected?.response?.header("X-Transport"), "tcp")
        // The same request without the transport goes over HTTP.
        let http = try await tcp.send(.get("/json").transport(nil))
        XCTAssertNil(http.header("X-Transport"))
        XCTAssertEqual(server.requests, 1)
        XCTAssertEqual(peer.served.get(), 3)
    }

    func testACacheFirstAnswerOfTheTransportIsServedFromTheCache() async throws {
        let request = Request.get("/rpc/cached").transport("tcp").cachePolicy(.cacheFirst).cacheExpiry(300)
        let first = try await tcp.send(request)
        XCTAssertFalse(first.fromCache)
        let second = try await tcp.send(request)
        XCTAssertTrue(second.fromCache)
        XCTAssertEqual(second.body, first.body)
        XCTAssertEqual(peer.served.get(), 1)
    }

    func testCancellingTheRequestCancelsTheTransportsTask() async throws {
        let engine = tcp!
        let task = Task { try await engine.send(.get("/silent").transport("tcp")) }
        waitUntil("the peer has the call") { peer.connections.get() == 1 }
        task.cancel()
        await assertThrows(.cancelled) { try await task.value }
        // The transport still works afterwards.
        _ = try await engine.send(.get("/rpc/after").transport("tcp"))
    }

    func testClosingTheEngineWaitsForTheTransportToStop() throws {
        let outcome = Locked<Result<Response, CourierError>?>(nil)
        tcp.send(.get("/silent").transport("tcp")) { outcome.set($0) }
        waitUntil("the peer has the call") { peer.connections.get() == 1 }
        tcp.close()
        guard case .failure(let error)? = outcome.get() else { return XCTFail("the call was not completed by close") }
        XCTAssertEqual(error.code, .cancelled)
    }

    func testErrorsOfATransportBecomeCodesAndRetryApplies() async throws {
        let calls = Locked(0)
        let engine = try makeEngine {
            $0.transports["failing"] = ClosureTransport { call in
                calls.mutate { $0 += 1 }
                if call.url.hasSuffix("/timeout") { throw CourierError(.timeout, message: "too slow") }
                if call.url.hasSuffix("/broken") { throw Broken() }
                if call.url.hasSuffix("/bad-status") { return Response(status: 7) }
                if call.url.hasSuffix("/teapot") {
                    throw CourierError(.api, response: Response(status: 418, body: Data("short and stout".utf8)))
                }
                XCTAssertEqual(call.header("X-Call"), "1")
                XCTAssertEqual(call.method, "PUT")
                XCTAssertEqual(call.body, Data("up".utf8))
                XCTAssertEqual(call.timeout, 20)
                XCTAssertNotEqual(call.requestID, .invalid)
                return Response(status: 204)
            }
        }
        defer { engine.close() }
        let ok = try await engine.send(.put("/fine").transport("failing").header("X-Call", "1").body(Data("up".utf8), contentType: nil))
        XCTAssertEqual(ok.status, 204)
        await assertThrows(.timeout) { try await engine.send(.get("/timeout").transport("failing")) }
        await assertThrows(.network) { try await engine.send(.get("/broken").transport("failing")) }
        await assertThrows(.invalidArgument) { try await engine.send(.get("/bad-status").transport("failing")) }
        let teapot = await assertThrows(.api) { try await engine.send(.get("/teapot").transport("failing")) }
        XCTAssertEqual(teapot?.response?.status, 418)
        XCTAssertEqual(teapot?.response?.text, "short and stout")
        XCTAssertEqual(calls.get(), 5)
        await assertThrows(.timeout) {
            try await engine.send(.get("/timeout").transport("failing")
                .retry(RetryPolicy(maxRetries: 2, baseDelay: 0.001, maxDelay: 0.002)))
        }
        XCTAssertEqual(calls.get(), 8, "a transport's timeout is retried like HTTP's")
    }

    func testUnknownAndInvalidTransportNames() async throws {
        await assertThrows(.notFound) { try await self.tcp.send(.get("/x").transport("carrier-pigeon")) }
        let transport = PeerTransport(port: peer.port)
        for name in ["http", ""] {
            var configuration = configuration()
            configuration.transports[name] = transport
            XCTAssertThrowsError(try Engine(configuration: configuration)) {
                XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
            }
        }
    }
}
