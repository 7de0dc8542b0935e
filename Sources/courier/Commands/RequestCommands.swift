// RequestCommands.swift — `courier get` and `courier post`: send one request, print the status
// line, the headers (-i) and the body; on failure print "error: <code>: <message>" on stderr and
// exit 1 (a response attached to the error, e.g. a 404's, is still printed).
import ArgumentParser
import Courier
import Foundation

/// Options shared by every request-sending command.
struct RequestOptions: ParsableArguments {
    @Option(name: [.customShort("H"), .customLong("header")], help: ArgumentHelp("A request header 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []

    @Flag(name: [.customShort("i"), .customLong("include")], help: "Print the status line and the response headers on stdout before the body.")
    var include = false

    @Option(help: "The whole request's timeout, in seconds.")
    var timeout: Double?

    @Flag(name: .customLong("json-output"), help: "Print the response (or the error) as one JSON object instead.")
    var jsonOutput = false

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Do not verify TLS certificates (development only).")
    var insecure = false

    @Option(help: ArgumentHelp("The cache policy: none (the default), http (RFC 9111, private cache) or http-shared (a shared cache).", valueName: "policy"))
    var cache: String = "none"

    @Option(help: ArgumentHelp("The store directory the cache lives in (kept between runs; default: a temporary one).", valueName: "dir"))
    var store: String?

    @Flag(name: [.customShort("v"), .customLong("verbose")], help: "Also print on stderr what the cache did (e.g. 'cache: fresh (hit, age 12 s)').")
    var verbose = false

    @Flag(name: .customLong("pool"), help: "Also print the connection pool's figures after the request, by host: open (idle, in use), made, reused (on stderr; a \"pool\" object with --json-output).")
    var pool = false

    /// The --cache policy.
    var cachePolicy: CachePolicy? {
        switch cache {
        case "none": return CachePolicy.noCache
        case "http": return CachePolicy.http
        case "http-shared": return CachePolicy.httpShared
        default: return nil
        }
    }

    func validate() throws {
        for header in headers where parseHeader(header) == nil {
            throw ValidationError("-H expects 'Name: value', got '\(header)'")
        }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be > 0 seconds") }
        if cachePolicy == nil { throw ValidationError("--cache expects none, http or http-shared, got '\(cache)'") }
    }

    /// The headers as (name, value) pairs.
    var parsedHeaders: [(name: String, value: String)] { headers.compactMap(parseHeader) }

    /// Adds the headers (except those in `skipping`, case-insensitive) and the timeout.
    func apply(to request: Request, skipping: Set<String> = []) -> Request {
        var request = request
        for (name, value) in parsedHeaders where !skipping.contains(name.lowercased()) {
            request = request.header(name, value)
        }
        if let timeout { request = request.timeout(timeout) }
        return request
    }

    /// Sends the request on a new engine and prints the outcome.
    /// - Throws: `ExitCode.failure` when the request failed (after printing why).
    func perform(_ request: Request) async throws {
        let engine = try openCommandEngine(insecure: insecure) { configuration in
            configuration.storeDirectory = store // else a temporary one: one request, nothing to keep
            configuration.cachePolicy = cachePolicy ?? .noCache
        }
        defer { engine.close() }
        do {
            let response = try await engine.send(request)
            if jsonOutput { printJSON(response: response, error: nil, engine: engine) } else { printResponse(response) }
            if pool && !jsonOutput { printPool(engine) }
        } catch {
            let response = (error as? CourierError)?.response
            if jsonOutput {
                printJSON(response: response, error: error, engine: engine)
            } else if let response {
                printResponse(response)
            }
            if pool && !jsonOutput { printPool(engine) }
            printError("error: \(describe(error))")
            throw ExitCode.failure
        }
    }

    /// "pool: <host>  open N (idle N, in use N)  made N, reused N", one line per host, on stderr.
    private func printPool(_ engine: Engine) {
        guard let figures = try? engine.poolFigures() else { return }
        if figures.hosts.isEmpty { printError("pool: no connection made") }
        for h in figures.hosts {
            printError("pool: \(h.host ?? "")  open \(h.open) (idle \(h.idle), in use \(h.inUse))  made \(h.opened), reused \(h.reused)")
        }
    }

    /// The pool's figures as JSON: {"total": {...}, "hosts": [{...}]}.
    private func poolJSON(_ engine: Engine) -> [String: Any]? {
        guard let figures = try? engine.poolFigures() else { return nil }
        func object(_ h: PoolHost) -> [String: Any] {
            var o: [String: Any] = ["open": h.open, "idle": h.idle, "in_use": h.inUse, "opened": h.opened, "reused": h.reused]
            if let host = h.host { o["host"] = host }
            return o
        }
        return ["total": object(figures.total), "hosts": figures.hosts.map(object)]
    }

    private func printResponse(_ response: Response) {
        let statusLine = "\(httpVersionText(response.metrics.httpVersion)) \(response.status) \(reasonPhrase(response.status))"
            .trimmingCharacters(in: .whitespaces)
        if include {
            var head = statusLine + "\n"
            for (name, value) in response.headers { head += "\(name): \(value)\n" }
            print(head)
        } else {
            printError(statusLine)  // stdout stays the body alone, ready for a pipe
        }
        writeOut(response.body)
        if stdoutIsTerminal, let last = response.body.last, last != UInt8(ascii: "\n") { print("") }
        if verbose { printError(cacheLine(response)) }
    }

    /// "cache: <reason> (<where the body came from>, age N s)".
    private func cacheLine(_ response: Response) -> String {
        let from: String
        switch response.cacheStatus {
        case .network: from = "network"
        case .hit: from = "hit"
        case .revalidated: from = "revalidated"
        case .stale: from = "stale"
        }
        return "cache: \(response.cacheReason.name) (\(from)" + (response.fromCache ? ", age \(response.age) s)" : ")")
    }

    private func printJSON(response: Response?, error: Error?, engine: Engine) {
        var object: [String: Any] = [:]
        if pool { object["pool"] = poolJSON(engine) }
        if let response {
            var r: [String: Any] = [
                "status": response.status,
                "url": response.url,
                "method": response.method,
                "headers": response.headers.map { [$0.name, $0.value] },
                "cache_reason": response.cacheReason.name,
            ]
            if let text = String(data: response.body, encoding: .utf8) {
                r["body"] = text
            } else {
                r["body_base64"] = response.body.base64EncodedString()
            }
            let m = response.metrics
            r["metrics"] = [
                "dns_s": m.dns, "connect_s": m.connect, "tls_s": m.tls, "first_byte_s": m.firstByte,
                "total_s": m.total, "bytes_sent": m.bytesSent, "bytes_received": m.bytesReceived,
                "connection_reused": m.connectionReused, "http_version": m.httpVersion, "redirects": m.redirects,
            ] as [String: Any]
            object["response"] = r
        }
        if let error {
            if let error = error as? CourierError {
                var e: [String: Any] = ["code": error.code.name, "code_value": Int(error.code.rawValue), "message": error.message]
                if let status = error.httpStatus { e["http_status"] = status }
                object["error"] = e
            } else {
                object["error"] = ["code": "unknown", "message": "\(error)"]
            }
        }
        object["ok"] = error == nil
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        writeOut(data + Data("\n".utf8))
    }
}

/// "Name: value" → ("Name", "value"); nil when there is no colon or no name.
func parseHeader(_ text: String) -> (name: String, value: String)? {
    guard let colon = text.firstIndex(of: ":") else { return nil }
    let name = text[..<colon].trimmingCharacters(in: .whitespaces)
    let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    return name.isEmpty ? nil : (name, value)
}

// MARK: - get

struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Send a GET request and print the response.",
        discussion: "The status line goes to stderr (stdout with -i), the body to stdout. Exit status 1 on failure."
    )

    @Argument(help: "An absolute http or https URL.")
    var url: String

    @Option(name: [.customShort("p"), .customLong("param")], help: ArgumentHelp("A query parameter name=value, percent-encoded by Courier (repeatable).", valueName: "name=value"))
    var params: [String] = []

    @Flag(name: .customLong("stream"), help: "Print the body as it arrives (each chunk written and flushed at once), for long or endless responses. Not with --json-output or a cache.")
    var stream = false

    @OptionGroup var options: RequestOptions

    func validate() throws {
        for param in params where !param.contains("=") { throw ValidationError("--param expects name=value, got '\(param)'") }
        if stream && options.jsonOutput { throw ValidationError("--stream prints the body as it arrives: not with --json-output") }
        if stream && options.cache != "none" { throw ValidationError("--stream reads no cache: not with --cache") }
    }

    func run() async throws {
        var request = options.apply(to: .get(url))
        for param in params {
            let (name, value) = splitPair(param)
            request = request.parameter(name, value)
        }
        if stream { try await options.performStreamed(request) } else { try await options.perform(request) }
    }
}

extension RequestOptions {
    /// Sends the request as a stream and writes the body to stdout as it arrives (the head as
    /// `perform` prints it, on stderr, or stdout with -i).
    /// - Throws: `ExitCode.failure` when the request failed (after printing why, and after the
    ///   bytes that came before the failure).
    func performStreamed(_ request: Request) async throws {
        let engine = try openCommandEngine(insecure: insecure)
        defer { engine.close() }
        do {
            let (bytes, head) = try await engine.bytes(for: request)
            let statusLine = "\(httpVersionText(head.metrics.httpVersion)) \(head.status) \(reasonPhrase(head.status))"
                .trimmingCharacters(in: .whitespaces)
            if include {
                var text = statusLine + "\n"
                for (name, value) in head.headers { text += "\(name): \(value)\n" }
                print(text)
                fflush(stdout)
            } else {
                printError(statusLine)
            }
            var last: UInt8?
            for try await chunk in bytes.chunks {
                writeOut(chunk) // unbuffered: a pipe sees each chunk at once
                last = chunk.last
            }
            if stdoutIsTerminal, let last, last != UInt8(ascii: "\n") { print("") }
            if head.status >= 400 { throw ExitCode.failure }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            printError("error: \(describe(error))")
            throw ExitCode.failure
        }
    }
}

// MARK: - post

struct PostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "post",
        abstract: "Send a POST request with a JSON, text or form body and print the response.",
        discussion: "Exactly one of --json, --data or --form (repeatable) gives the body. Exit status 1 on failure."
    )

    @Argument(help: "An absolute http or https URL.")
    var url: String

    @Option(help: ArgumentHelp("A JSON body, sent as application/json.", valueName: "json"))
    var json: String?

    @Option(help: ArgumentHelp("A raw body; @path reads a file. Content type from -H 'Content-Type: ...', else text/plain.", valueName: "text"))
    var data: String?

    @Option(name: .customLong("form"), help: ArgumentHelp("A form field name=value, sent application/x-www-form-urlencoded (repeatable).", valueName: "name=value"))
    var form: [String] = []

    @OptionGroup var options: RequestOptions

    func validate() throws {
        let bodies = (json == nil ? 0 : 1) + (data == nil ? 0 : 1) + (form.isEmpty ? 0 : 1)
        if bodies > 1 { throw ValidationError("give only one of --json, --data and --form") }
        for field in form where !field.contains("=") { throw ValidationError("--form expects name=value, got '\(field)'") }
    }

    func run() async throws {
        var request: Request = .post(url)
        let contentType = options.parsedHeaders.last { $0.name.lowercased() == "content-type" }?.value
        if let json {
            request = options.apply(to: request, skipping: ["content-type"]).json(json)
        } else if let data {
            let body: Data
            if data.hasPrefix("@") {
                let path = String(data.dropFirst())
                guard let contents = FileManager.default.contents(atPath: path) else {
                    printError("error: cannot read \(path)")
                    throw ExitCode.failure
                }
                body = contents
            } else {
                body = Data(data.utf8)
            }
            request = options.apply(to: request, skipping: ["content-type"])
                .body(body, contentType: contentType ?? "text/plain; charset=utf-8")
        } else {
            request = options.apply(to: request)
            for field in form {
                let (name, value) = splitPair(field)
                request = request.parameter(name, value)
            }
        }
        try await options.perform(request)
    }
}

/// "a=b=c" → ("a", "b=c").
func splitPair(_ text: String) -> (String, String) {
    guard let eq = text.firstIndex(of: "=") else { return (text, "") }
    return (String(text[..<eq]), String(text[text.index(after: eq)...]))
}
