// Transfers.swift — the C core's transfers (HLNetworking's HLTask) in Swift: multipart form
// uploads (data parts, file parts streamed from disk, part headers), a file as the body, downloads
// to a file with resume (HTTP Range, one part file per download), and progress as a closure or as
// an AsyncStream of one transfer. The C core streams, resumes, moves the file into place and
// counts the bytes; this file only hands the settings over and the counts back.

import Foundation
internal import CCore

// MARK: - Multipart forms

/// The parts of a `multipart/form-data` body, built by ``Request/multipart(_:)``. The request's
/// parameters come first, as text parts, then these parts in order.
public struct MultipartForm: Sendable {
    enum Part: Sendable {
        case data(name: String, data: Data, filename: String?, contentType: String?, headers: HTTPHeaders)
        case file(name: String, path: String, filename: String?, contentType: String?, headers: HTTPHeaders)
    }

    var parts: [Part] = []

    /// An empty form.
    public init() {}

    /// Adds a part with these bytes.
    /// - Parameters:
    ///   - name: The form field's name.
    ///   - data: The bytes (may be empty).
    ///   - filename: The filename the part carries, or nil for none.
    ///   - contentType: The part's Content-Type, or nil for none.
    ///   - headers: More header lines of the part.
    public mutating func append(name: String, data: Data, filename: String? = nil, contentType: String? = nil,
                                headers: HTTPHeaders = []) {
        parts.append(.data(name: name, data: data, filename: filename, contentType: contentType, headers: headers))
    }

    /// Adds a text part (UTF-8).
    /// - Parameters:
    ///   - name: The form field's name.
    ///   - text: The text.
    ///   - contentType: The part's Content-Type, or nil for none.
    ///   - headers: More header lines of the part.
    public mutating func append(name: String, text: String, contentType: String? = nil, headers: HTTPHeaders = []) {
        append(name: name, data: Data(text.utf8), contentType: contentType, headers: headers)
    }

    /// Adds a part whose bytes are streamed from a file when the request is sent (never loaded
    /// into memory whole). A file that cannot be opened fails the send with
    /// ``CourierError/Code/notFound`` (or ``CourierError/Code/invalidArgument``); nothing is sent.
    /// - Parameters:
    ///   - name: The form field's name.
    ///   - path: The file's path.
    ///   - filename: The filename the part carries; nil means the path's last component.
    ///   - contentType: The part's Content-Type, or nil for none.
    ///   - headers: More header lines of the part.
    public mutating func appendFile(name: String, path: String, filename: String? = nil, contentType: String? = nil,
                                    headers: HTTPHeaders = []) {
        parts.append(.file(name: name, path: path, filename: filename, contentType: contentType, headers: headers))
    }
}

// MARK: - Request settings

extension Request {
    /// A `multipart/form-data` body made of the parts `build` appends (after the request's
    /// parameters, which become its first text parts).
    /// ```swift
    /// .post("/upload").parameter("title", "Trip").multipart { form in
    ///     form.append(name: "meta", data: json, contentType: "application/json")
    ///     form.appendFile(name: "photo", path: "/tmp/a.jpg", contentType: "image/jpeg")
    /// }
    /// ```
    /// - Parameter build: Appends parts; runs once, now.
    /// - Returns: The changed request.
    /// - Throws: What `build` throws.
    public func multipart(_ build: (inout MultipartForm) throws -> Void) rethrows -> Request {
        var form = MultipartForm()
        try build(&form)
        return form.parts.reduce(self) { $0.adding(PartOption(part: $1)) }
    }

    /// Adds one data part to a `multipart/form-data` body (see ``multipart(_:)``).
    /// - Parameters:
    ///   - name: The form field's name.
    ///   - data: The bytes.
    ///   - filename: The filename the part carries, or nil.
    ///   - contentType: The part's Content-Type, or nil.
    ///   - headers: More header lines of the part.
    /// - Returns: The changed request.
    public func part(name: String, data: Data, filename: String? = nil, contentType: String? = nil,
                     headers: HTTPHeaders = []) -> Request {
        adding(PartOption(part: .data(name: name, data: data, filename: filename, contentType: contentType,
                                      headers: headers)))
    }

    /// Adds one file part, streamed from disk when sent, to a `multipart/form-data` body (see
    /// ``MultipartForm/appendFile(name:path:filename:contentType:headers:)``).
    /// - Parameters:
    ///   - name: The form field's name.
    ///   - path: The file's path.
    ///   - filename: The filename the part carries; nil means the path's last component.
    ///   - contentType: The part's Content-Type, or nil.
    ///   - headers: More header lines of the part.
    /// - Returns: The changed request.
    public func partFile(name: String, path: String, filename: String? = nil, contentType: String? = nil,
                         headers: HTTPHeaders = []) -> Request {
        adding(PartOption(part: .file(name: name, path: path, filename: filename, contentType: contentType,
                                      headers: headers)))
    }

    /// The body is a file, streamed from disk when sent; parameters then go in the query string.
    /// A missing file fails the send with ``CourierError/Code/notFound``.
    /// - Parameters:
    ///   - path: The file's path.
    ///   - contentType: The Content-Type; nil means `application/octet-stream`.
    /// - Returns: The changed request.
    public func bodyFile(_ path: String, contentType: String? = nil) -> Request {
        adding(BodyFileOption(path: path, contentType: contentType))
    }

    /// Writes the response body (status < 400) to a file instead of memory: first into
    /// `<path>.part`, moved to `path` once complete; the response then has an empty body and
    /// ``Response/file`` names the file. The engine's maximum response size does not apply.
    ///
    /// With `resume`, an interrupted download (a cancel — a pause —, a failure, or a process that
    /// died) keeps `<path>.part` and its validator in `<path>.part.meta`, and sending the request
    /// again continues it with an HTTP Range request: status 206, only the rest on the wire; the
    /// server's 200 (the resource changed) starts over. One part file per download.
    /// - Parameters:
    ///   - path: Where the file goes.
    ///   - resume: Whether to keep and continue partial downloads. Default false.
    /// - Returns: The changed request.
    public func download(to path: String, resume: Bool = false) -> Request {
        adding(DownloadOption(path: path, resume: resume))
    }

    /// Calls `handler` as bytes move: at most every 100 ms and once more at the end of each
    /// attempt, on the engine's worker thread (keep it quick). For a resumed download the counts
    /// include the part already on disk. Several handlers all run, in the order added.
    /// - Parameter handler: Receives the counts so far.
    /// - Returns: The changed request.
    public func progress(_ handler: @escaping @Sendable (TransferProgress) -> Void) -> Request {
        var copy = self
        if let index = copy.options.lastIndex(where: { $0 is ProgressOption }),
           let existing = copy.options[index] as? ProgressOption {
            copy.options[index] = ProgressOption(handlers: existing.handlers + [handler])
            return copy
        }
        return copy.adding(ProgressOption(handlers: [handler]))
    }
}

struct PartOption: RequestOption {
    let part: MultipartForm.Part

    func apply(to request: OpaquePointer) throws {
        let headers: HTTPHeaders
        switch part {
        case .data(let name, let data, let filename, let contentType, let partHeaders):
            headers = partHeaders
            try data.withUnsafeBytes { bytes in
                try withOptionalCString(filename) { file in
                    try withOptionalCString(contentType) { type in
                        var empty: UInt8 = 0
                        let rc = bytes.baseAddress.map {
                            courier_request_add_part_data(request, name, $0, bytes.count, file, type)
                        } ?? courier_request_add_part_data(request, name, &empty, 0, file, type)
                        try CourierError.check(rc, "part '\(name)'")
                    }
                }
            }
        case .file(let name, let path, let filename, let contentType, let partHeaders):
            headers = partHeaders
            try withOptionalCString(filename) { file in
                try withOptionalCString(contentType) { type in
                    try CourierError.check(courier_request_add_part_file(request, name, path, file, type),
                                           "file part '\(name)' ('\(path)')")
                }
            }
        }
        for line in headers {
            try Response.checkNoNUL(line.name, line.value)
            try CourierError.check(courier_request_add_part_header(request, line.name, line.value),
                                   "part header '\(line.name)'")
        }
    }
}

struct BodyFileOption: RequestOption {
    let path: String
    let contentType: String?
    func apply(to request: OpaquePointer) throws {
        try withOptionalCString(contentType) {
            try CourierError.check(courier_request_set_body_file(request, path, $0), "bodyFile '\(path)'")
        }
    }
}

struct DownloadOption: RequestOption {
    let path: String
    let resume: Bool
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_download_file(request, path, resume ? COURIER_DOWNLOAD_RESUME : 0),
                               "download to '\(path)'")
    }
}

// MARK: - Progress

/// Bytes moved so far by one request, down and up.
public struct TransferProgress: Sendable, Hashable {
    /// The id of the send.
    public let requestID: RequestID
    /// Body bytes received (a resumed download counts the part already on disk).
    public let received: Int64
    /// Body bytes expected, if known.
    public let expected: Int64?
    /// Body bytes sent.
    public let sent: Int64
    /// Body bytes to send, if known.
    public let toSend: Int64?

    /// Creates progress counts (for tests; the engine makes real ones).
    /// - Parameters:
    ///   - requestID: The id of the send.
    ///   - received: Bytes received.
    ///   - expected: Bytes expected, or nil.
    ///   - sent: Bytes sent.
    ///   - toSend: Bytes to send, or nil.
    public init(requestID: RequestID = .invalid, received: Int64, expected: Int64?, sent: Int64 = 0, toSend: Int64? = nil) {
        self.requestID = requestID
        self.received = received
        self.expected = expected
        self.sent = sent
        self.toSend = toSend
    }

    /// The part of the download done, 0...1, or nil when the size is unknown.
    public var fractionReceived: Double? {
        guard let expected, expected > 0 else { return nil }
        return min(1, Double(received) / Double(expected))
    }

    /// The part of the upload done, 0...1, or nil when the size is unknown.
    public var fractionSent: Double? {
        guard let toSend, toSend > 0 else { return nil }
        return min(1, Double(sent) / Double(toSend))
    }
}

/// The progress handlers of one request (`user` of `courier_request_set_progress`). Immutable.
final class ProgressBox: @unchecked Sendable {
    let handlers: [@Sendable (TransferProgress) -> Void]
    init(_ handlers: [@Sendable (TransferProgress) -> Void]) { self.handlers = handlers }
}

struct ProgressOption: RequestOption {
    let handlers: [@Sendable (TransferProgress) -> Void]
    func apply(to request: OpaquePointer) throws {
        let user = Unmanaged.passRetained(ProgressBox(handlers)).toOpaque()
        // On failure the C core has already released the box through user_free.
        try CourierError.check(courier_request_set_progress(request, progressTrampoline, user, releaseBox), "progress")
    }
}

/// `courier_progress_fn`: runs on the worker thread.
private let progressTrampoline: courier_progress_fn = { id, downNow, downTotal, upNow, upTotal, user in
    guard let user else { return }
    let box = Unmanaged<ProgressBox>.fromOpaque(user).takeUnretainedValue()
    let progress = TransferProgress(requestID: RequestID(rawValue: id), received: downNow,
                                    expected: downTotal > 0 ? downTotal : nil, sent: upNow,
                                    toSend: upTotal > 0 ? upTotal : nil)
    for handler in box.handlers { handler(progress) }
}

// MARK: - Responses

extension Response {
    /// The file a download was written to (``Request/download(to:resume:)``), or nil.
    public var file: String? {
        guard let storage, let path = courier_response_file(storage.pointer) else { return nil }
        return String(cString: path)
    }
}

// MARK: - One transfer as a task

/// One send running in its own task, with its progress as a stream (HLNetworking's HLTask):
/// ```swift
/// let task = engine.transfer(.get("/big.iso").download(to: path, resume: true))
/// for await progress in task.progress { print(progress.fractionReceived ?? 0) }
/// let response = try await task.response
/// ```
/// ``cancel()`` stops it (a pause, for a resumable download: send the request again to resume).
public final class TransferTask: Sendable {
    /// The progress counts (each carries the send's ``TransferProgress/requestID``), latest first kept: a slow reader skips intermediate values but
    /// always gets the last. The stream finishes when the send completes.
    public let progress: AsyncStream<TransferProgress>
    private let task: Task<Response, any Error>

    init(engine: Engine, request: Request) {
        let (stream, continuation) = AsyncStream<TransferProgress>.makeStream(bufferingPolicy: .bufferingNewest(1))
        progress = stream
        let tracked = request.progress { continuation.yield($0) }
        task = Task {
            defer { continuation.finish() }
            return try await engine.send(tracked)
        }
    }

    /// The response, once the send completed.
    /// - Throws: What ``Engine/send(_:)-(Request)`` throws.
    public var response: Response {
        get async throws { try await task.value }
    }

    /// Cancels the send: it fails with ``CourierError/Code/cancelled``. A resumable download
    /// keeps its part file, to be continued by sending the request again.
    public func cancel() { task.cancel() }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { task.isCancelled }
}

extension Engine {
    /// Starts a send in its own task and returns at once, with its progress as a stream.
    /// - Parameter request: The request (typically a download or an upload).
    /// - Returns: The running transfer.
    public func transfer(_ request: Request) -> TransferTask { TransferTask(engine: self, request: request) }
}
