// TransferTests.swift — transfers through the facade: multipart bodies (data and streamed file
// parts, part headers), a file as the body, downloads to a file with progress, a download paused
// by cancelling its task and resumed (206, the right bytes, the file moved into place), and one
// transfer's progress as an AsyncStream.

import Courier
import Foundation
import XCTest

final class TransferTests: LoopbackTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
        super.tearDown()
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    private func write(_ name: String, _ data: Data) throws -> String {
        let path = path(name)
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    private func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    private func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
    }

    /// Whether the file holds the test server's /bytes pattern (byte i = i % 251), `count` bytes.
    private func holdsPattern(_ path: String, count: Int) -> Bool {
        guard let data = FileManager.default.contents(atPath: path), data.count == count else { return false }
        return data.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) }
    }

    // MARK: - Uploads

    func testAMultipartBodyWithDataAndFileParts() async throws {
        let notes = try write("notes.txt", Data("line one\nline two\n".utf8))
        let request = Request.post("/echo").parameter("title", "Trip").multipart { form in
            form.append(name: "meta", data: Data(#"{"a":1}"#.utf8), contentType: "application/json", headers: ["X-Part": "meta-1"])
            form.appendFile(name: "file", path: notes, contentType: "text/plain")
            form.append(name: "note", text: "hi")
        }
        let echo = try Echo(try await engine.send(request))
        XCTAssertTrue(echo.header("Content-Type")?.hasPrefix("multipart/form-data; boundary=") == true)
        XCTAssertTrue(echo.body.contains("name=\"title\"\r\n\r\nTrip"), echo.body)
        XCTAssertTrue(echo.body.contains("name=\"meta\"\r\nContent-Type: application/json\r\nX-Part: meta-1"), echo.body)
        XCTAssertTrue(echo.body.contains("name=\"file\"; filename=\"notes.txt\"\r\nContent-Type: text/plain"), echo.body)
        XCTAssertTrue(echo.body.contains("line one\nline two\n"))
        XCTAssertTrue(echo.body.contains("name=\"note\"\r\n\r\nhi"))
        let title = try XCTUnwrap(echo.body.range(of: "title"))
        let meta = try XCTUnwrap(echo.body.range(of: "meta"))
        XCTAssertLessThan(title.lowerBound, meta.lowerBound, "parameters come first")

        // The same with one call per part.
        let single = try Echo(try await engine.send(.post("/echo")
            .part(name: "blob", data: Data([1, 2]), filename: "b.bin", contentType: "application/octet-stream",
                  headers: ["X-Blob": "1"])
            .partFile(name: "doc", path: notes, filename: "renamed.txt")))
        XCTAssertTrue(single.body.contains("name=\"blob\"; filename=\"b.bin\"\r\nContent-Type: application/octet-stream\r\nX-Blob: 1"),
                      single.body)
        XCTAssertTrue(single.body.contains("name=\"doc\"; filename=\"renamed.txt\""), single.body)
    }

    func testBadPartsFailTheSendAndNothingIsSent() async throws {
        let error = await assertThrows(.notFound) {
            try await self.engine.send(.post("/echo").partFile(name: "f", path: self.path("nope.bin")))
        }
        XCTAssertNotNil(error?.osError)
        await assertThrows(.invalidHeader) {
            try await self.engine.send(.post("/echo").part(name: "bad", data: Data("x".utf8), filename: "a\r\nb"))
        }
        await assertThrows(.invalidHeader) {
            try await self.engine.send(.post("/echo").part(name: "p", data: Data(), headers: ["X-Bad": "a\nb"]))
        }
        XCTAssertEqual(server.count("/echo"), 0)
    }

    func testAFileBodyIsStreamedWithUploadProgress() async throws {
        let content = Data((0..<200_000).map { UInt8(ascii: "a") + UInt8($0 % 26) })
        let file = try write("upload.bin", content)
        let last = Locked<TransferProgress?>(nil)
        let response = try await engine.send(.put("/echo").bodyFile(file, contentType: "text/plain").parameter("v", "1")
            .progress { progress in last.set(progress) })
        let echo = try Echo(response)
        XCTAssertEqual(echo.method, "PUT")
        XCTAssertEqual(echo.query, "v=1")
        XCTAssertEqual(echo.header("Content-Type"), "text/plain")
        XCTAssertEqual(echo.body, String(decoding: content, as: UTF8.self))
        XCTAssertEqual(last.get()?.sent, 200_000)
        XCTAssertEqual(last.get()?.toSend, 200_000)
        XCTAssertEqual(last.get()?.fractionSent, 1)
        XCTAssertEqual(last.get()?.requestID, response.requestID)

        await assertThrows(.notFound) { try await self.engine.send(.post("/echo").bodyFile(self.path("none"))) }
    }

    // MARK: - Downloads

    func testADownloadGoesToAFileWithProgress() async throws {
        let target = path("big.bin")
        let seen = Locked<[TransferProgress]>([])
        let both = Locked(0)
        let response = try await engine.send(.get("/bytes/300000").download(to: target)
            .progress { progress in seen.mutate { $0.append(progress) } }
            .progress { _ in both.mutate { $0 += 1 } })
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.file, target)
        XCTAssertTrue(response.body.isEmpty)
        XCTAssertTrue(holdsPattern(target, count: 300_000))
        XCTAssertFalse(exists(target + ".part"))
        let progress = seen.get()
        XCTAssertGreaterThanOrEqual(progress.count, 1)
        XCTAssertEqual(both.get(), progress.count, "every handler runs")
        XCTAssertEqual(progress.last?.received, 300_000)
        XCTAssertEqual(progress.last?.expected, 300_000)
        XCTAssertEqual(progress.last?.fractionReceived, 1)
        XCTAssertEqual(progress.map(\.received), progress.map(\.received).sorted(), "never backwards")
        XCTAssertNil(Response(status: 200).file)

        // An error status keeps its body in memory and writes no file.
        let missing = path("missing.bin")
        let error = await assertThrows(.httpStatus) {
            try await self.engine.send(.get("/status/404").download(to: missing, resume: true))
        }
        XCTAssertEqual(error?.response?.text, #"{"status":404}"#)
        XCTAssertNil(error?.response?.file)
        XCTAssertFalse(exists(missing))
    }

    func testADownloadPausedByCancellingItsTaskResumesWithRange() async throws {
        let count = 600_000
        let target = path("paused.bin")
        let request = Request.get("/bytes/\(count)?rate=\(count)").download(to: target, resume: true)

        let first = engine.transfer(request)
        for await progress in first.progress where progress.received >= 100_000 {
            first.cancel()
            break
        }
        XCTAssertTrue(first.isCancelled)
        do {
            _ = try await first.response
            XCTFail("the download finished before it was paused")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .cancelled)
        }
        let kept = size(target + ".part")
        XCTAssertGreaterThanOrEqual(kept, 100_000)
        XCTAssertLessThan(kept, count)
        XCTAssertTrue(exists(target + ".part.meta"))
        XCTAssertFalse(exists(target))

        let firstSeen = Locked<Int64?>(nil)
        let lastSeen = Locked<Int64?>(nil)
        let resumed = try await engine.send(request.progress { progress in
            // Before the server's answer (206 or 200) the engine cannot know what it will count.
            if progress.received > 0 { firstSeen.mutate { $0 = $0 ?? progress.received } }
            lastSeen.set(progress.received)
        })
        XCTAssertEqual(resumed.status, 206)
        XCTAssertEqual(resumed.file, target)
        XCTAssertLessThan(resumed.metrics.bytesReceived, Int64(count - kept + 2_000), "only the rest came over the wire")
        XCTAssertTrue(holdsPattern(target, count: count))
        XCTAssertFalse(exists(target + ".part"))
        XCTAssertFalse(exists(target + ".part.meta"))
        XCTAssertGreaterThanOrEqual(firstSeen.get() ?? 0, Int64(kept), "progress counts the part on disk")
        XCTAssertEqual(lastSeen.get(), Int64(count))
    }

    func testATransferTasksProgressStreamEndsWithTheLastCount() async throws {
        let task = engine.transfer(.get("/bytes/300000").download(to: path("streamed.bin")))
        var values: [TransferProgress] = []
        for await progress in task.progress { values.append(progress) }
        let response = try await task.response
        XCTAssertEqual(response.file, path("streamed.bin"))
        XCTAssertEqual(values.last?.received, 300_000)
        XCTAssertTrue(values.allSatisfy { $0.requestID == response.requestID })
        XCTAssertFalse(task.isCancelled)

        // A failed transfer finishes its stream too.
        let failed = engine.transfer(.get("/status/500"))
        for await _ in failed.progress {}
        await assertThrows(.httpStatus) { try await failed.response }
    }
}
