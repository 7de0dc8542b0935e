// DownloadCommand.swift — `courier download URL -o FILE`: a download to a file with a progress bar
// on stderr (percentage, bytes, rate), resumable by default: Ctrl-C pauses it (the part file and
// its validator are kept) and running the same command again continues with an HTTP Range request.
// The C core writes, resumes and moves the file into place; this command only shows it.
import ArgumentParser
import Courier
import CourierSignals
import Foundation

struct DownloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Download a URL to a file, with a progress bar; Ctrl-C pauses, running it again resumes.",
        discussion: """
            The body goes to FILE.part first (its validator, ETag or Last-Modified, in FILE.part.meta) and \
            is moved to FILE once complete. With --resume (the default) an interrupted download is continued \
            from FILE.part by the next run (HTTP Range + If-Range: 206 appends; a changed resource starts over). \
            The progress bar is drawn on stderr when it is a terminal. Exit status 1 on failure (the error's \
            code name is printed), 130 when interrupted.
            """
    )

    @Argument(help: "An absolute http or https URL.")
    var url: String

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("The file to write (a directory: the URL's last path component in it).", valueName: "file"))
    var output: String

    @Flag(inversion: .prefixedNo, help: "Keep an interrupted download's part file and continue it next time.")
    var resume = true

    @Option(name: [.customShort("H"), .customLong("header")], help: ArgumentHelp("A request header 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []

    @Option(help: "The whole download's timeout, in seconds (default: none).")
    var timeout: Double?

    @Flag(name: .customLong("json-output"), help: "Print the outcome as one JSON object on stdout.")
    var jsonOutput = false

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Do not verify TLS certificates (development only).")
    var insecure = false

    func validate() throws {
        for header in headers where parseHeader(header) == nil {
            throw ValidationError("-H expects 'Name: value', got '\(header)'")
        }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be > 0 seconds") }
        if output.isEmpty { throw ValidationError("-o needs a file name") }
    }

    func run() async throws {
        let target = targetPath()
        // The part file is the download's own state; the C core's timeout covers the whole transfer.
        let engine = try openCommandEngine(insecure: insecure) { $0.timeout = timeout ?? 7 * 24 * 3600 }
        defer { engine.close() }

        var request = Request.get(url).download(to: target, resume: resume)
        for (name, value) in headers.compactMap(parseHeader) { request = request.header(name, value) }

        let transfer = engine.transfer(request)
        let bar = ProgressBar(enabled: isatty(STDERR_FILENO) != 0)
        // Ctrl-C: cancel (the engine keeps the part file), let the run below say what was kept,
        // then Interrupts exits with 130.
        let interrupted = InterruptFlag()
        let reported = DispatchSemaphore(value: 0)
        let interrupt = Interrupts.shared.register {
            interrupted.set()
            transfer.cancel()
            _ = reported.wait(timeout: .now() + 5)
        }
        for await progress in transfer.progress { bar.update(progress) }
        let outcome: Result<Response, any Error>
        do {
            outcome = .success(try await transfer.response)
        } catch {
            outcome = .failure(error)
        }
        bar.clear()
        if interrupted.isSet {
            let kept = DownloadCommand.size(of: target + ".part")
            if kept > 0 {
                printError("paused: \(bytesText(kept)) kept in \(target).part; run the same command again to resume")
            }
            reported.signal()
            try await Task.sleep(nanoseconds: 30_000_000_000) // the interrupt handler exits the process
        }
        Interrupts.shared.unregister(interrupt)
        reported.signal()

        switch outcome {
        case .success(let response):
            let file = response.file ?? target
            let bytes = DownloadCommand.size(of: file)
            if jsonOutput {
                printJSON(["ok": true, "file": file, "status": response.status, "resumed": response.status == 206,
                           "bytes": bytes, "url": response.url, "bytes_received": response.metrics.bytesReceived,
                           "total_s": response.metrics.total])
            }
            var summary = "saved \(file): \(bytesText(bytes))"
            if response.status == 206 {
                summary += ", resumed (\(bytesText(response.metrics.bytesReceived)) over the wire)"
            }
            if response.metrics.total > 0 {
                summary += " in \(String(format: "%.1f", response.metrics.total)) s"
            }
            printError(summary)
        case .failure(let error):
            if jsonOutput {
                var object: [String: Any] = ["ok": false, "file": target, "partial_bytes": DownloadCommand.size(of: target + ".part")]
                if let error = error as? CourierError {
                    var e: [String: Any] = ["code": error.code.name, "code_value": Int(error.code.rawValue), "message": error.message]
                    if let status = error.httpStatus { e["http_status"] = status }
                    object["error"] = e
                } else {
                    object["error"] = ["code": "unknown", "message": "\(error)"]
                }
                printJSON(object)
            }
            printError("error: \(describe(error))")
            let kept = DownloadCommand.size(of: target + ".part")
            if resume && kept > 0 {
                printError("\(bytesText(kept)) kept in \(target).part; run the same command again to resume")
            }
            throw ExitCode.failure
        }
    }

    /// `-o` itself, or, for an existing directory, the URL's last path component inside it.
    private func targetPath() -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: output, isDirectory: &isDirectory), isDirectory.boolValue else {
            return output
        }
        let name = URL(string: url)?.lastPathComponent ?? ""
        return (output as NSString).appendingPathComponent(name.isEmpty || name == "/" ? "download" : name)
    }

    /// A file's size in bytes, or 0 when it does not exist.
    static func size(of path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    private func printJSON(_ object: [String: Any]) {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
        writeOut(data + Data("\n".utf8))
    }
}

// MARK: - The progress bar

/// A flag set once, from any thread. `@unchecked Sendable`: guarded by the lock.
private final class InterruptFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// Draws one line on stderr: percentage, a bar, bytes so far of the total, and the rate of this
/// run (bytes that came over the wire since it started, not the part resumed from disk).
/// `@unchecked Sendable`: its state is guarded by the lock (updates come from the progress loop,
/// `clear` also from the interrupt handler).
private final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private let lock = NSLock()
    private var drawn = false
    private var baseline: (bytes: Int64, time: Date)?

    init(enabled: Bool) { self.enabled = enabled }

    func update(_ progress: TransferProgress) {
        guard enabled, progress.received > 0 else { return }
        lock.withLock {
            let now = Date()
            let start = baseline ?? (progress.received, now)
            if baseline == nil { baseline = start }
            let elapsed = now.timeIntervalSince(start.time)
            let rate = elapsed > 0.2 ? Double(progress.received - start.bytes) / elapsed : nil
            var line: String
            if let fraction = progress.fractionReceived, let expected = progress.expected {
                let width = 24
                let filled = Int((fraction * Double(width)).rounded(.down))
                line = String(format: "%3d%% ", Int((fraction * 100).rounded(.down)))
                    + "[" + String(repeating: "=", count: filled) + (filled < width ? ">" : "")
                    + String(repeating: " ", count: max(0, width - filled - 1)) + "] "
                    + "\(bytesText(progress.received)) / \(bytesText(expected))"
            } else {
                line = bytesText(progress.received)
            }
            if let rate { line += "  \(bytesText(Int64(rate)))/s" }
            FileHandle.standardError.write(Data(("\r" + line + "\u{1B}[K").utf8))
            drawn = true
        }
    }

    func clear() {
        lock.withLock {
            guard drawn else { return }
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
            drawn = false
        }
    }
}
