// Output.swift — how the tool writes: stdout for results, stderr for diagnostics and progress,
// and errors as "error: <code name>: <message>".
import ArgumentParser
import Courier
import Foundation

/// Writes text to standard error (unbuffered).
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Writes bytes to standard output, after flushing what `print` buffered.
func writeOut(_ data: Data) {
    fflush(stdout)
    FileHandle.standardOutput.write(data)
}

/// Whether standard output is a terminal.
var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) != 0 }

/// "timeout: Operation timed out after 300 ms" for a CourierError, the description otherwise.
func describe(_ error: Error) -> String {
    if let error = error as? CourierError {
        var text = "\(error.code.name): \(error.message)"
        if let status = error.httpStatus, !error.message.contains("\(status)") { text += " (HTTP \(status))" }
        return text
    }
    return "\(error)"
}

/// The English reason phrase of common HTTP statuses, for status lines ("" when unknown).
func reasonPhrase(_ status: Int) -> String {
    let phrases: [Int: String] = [
        100: "Continue", 101: "Switching Protocols", 200: "OK", 201: "Created", 202: "Accepted",
        203: "Non-Authoritative Information", 204: "No Content", 206: "Partial Content",
        301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
        307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized",
        403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
        409: "Conflict", 410: "Gone", 413: "Content Too Large", 415: "Unsupported Media Type",
        418: "I'm a teapot", 422: "Unprocessable Content", 429: "Too Many Requests",
        431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
        502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
    ]
    return phrases[status] ?? ""
}

/// "HTTP/1.1" for metrics' 11, "HTTP/2" for 20.
func httpVersionText(_ version: Int) -> String {
    switch version {
    case 10: return "HTTP/1.0"
    case 11: return "HTTP/1.1"
    case 20: return "HTTP/2"
    case 30: return "HTTP/3"
    default: return "HTTP"
    }
}

/// Milliseconds with one decimal: "1.4 ms".
func ms(_ seconds: Double) -> String { String(format: seconds < 0.001 ? "%.2f ms" : "%.1f ms", seconds * 1000) }

/// A byte count in binary units, the same in every command: "812 B", "1.4 KiB", "3.0 MiB", "1.2 GiB".
func bytesText(_ n: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var v = Double(n)
    var i = 0
    while v >= 1024 && i < units.count - 1 {
        v /= 1024
        i += 1
    }
    return i == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[i])
}

/// An engine for one command on a temporary store, `insecure` as asked; a failure to open is
/// printed ("error: ...") and is exit status 1.
func openCommandEngine(insecure: Bool, _ change: (inout Configuration) -> Void = { _ in }) throws -> Engine {
    var configuration = Configuration()
    configuration.temporaryStore = true
    configuration.insecure = insecure
    change(&configuration)
    do {
        return try Engine(configuration: configuration)
    } catch {
        printError("error: \(describe(error))")
        throw ExitCode.failure
    }
}

/// The options `courier events` and `courier ws` share: headers and TLS verification.
struct ConnectionOptions: ParsableArguments {
    @Option(name: [.customShort("H"), .customLong("header")], help: ArgumentHelp("A request header 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Do not verify TLS certificates (development only).")
    var insecure = false

    func validate() throws {
        for header in headers where parseHeader(header) == nil {
            throw ValidationError("-H expects 'Name: value', got '\(header)'")
        }
    }

    /// A GET of `url` with the headers.
    func request(_ url: String) -> Request {
        var request = Request.get(url)
        for case let (name, value)? in headers.map(parseHeader) { request = request.header(name, value) }
        return request
    }
}
