// Engine.swift — owns one C engine (`courier_engine *`): opens it from a Configuration, sends
// requests in four styles (async/await, completion handler, delegate, blocking), cancels, closes.

import Foundation
#if os(Linux)
import Synchronization
#endif
internal import CCore

// MARK: - Engine

/// A networking engine: one worker thread with its own connections, limits and store.
///
/// Open one per configuration and keep it for the life of the app or service; every send style
/// may be used from any thread or task at once. Its threads are named for debuggers and profilers:
/// `courier-worker` (the transport, where completion handlers run), `courier-journal` (frozen
/// requests) and, when they run, `courier-net`, `courier-probe`, `courier-json` and `courier-jwake`
/// (a journal on Redis, replaying).
/// ```swift
/// let engine = try Engine(configuration: Configuration(baseURL: "https://api.example.com"))
/// let response = try await engine.send(.get("/items").parameter("page", "2"))
/// ```
///
/// `@unchecked Sendable`: the C engine is thread-safe (any thread may send, cancel or read it),
/// and the only Swift state, the open/closing bookkeeping, is guarded by a lock.
public final class Engine: @unchecked Sendable {
    /// The C engine. Valid until ``close()`` (or deinit) frees it; code that calls into it from
    /// outside the send paths brackets the call with `enter()`/`leave()`.
    let handle: OpaquePointer
    /// The configuration the engine was opened with.
    public let configuration: Configuration
    /// The store directory (cache, journal): the configured one, the durable default one named by
    /// ``Configuration/appID``, or a private temporary one (``Configuration/temporaryStore``).
    public let storeDirectory: String

    /// Calls inside the C engine, and whether it is closing: every send and every cache call
    /// passes it twice (`enter`, `leave`), so it is one atomic word where the platform allows.
    let lifecycle = Lifecycle()
    /// The engine's ``EngineTaskExecutor``, made on first use (TaskExecutor.swift).
    let executorBox = ExecutorBox.make(ExecutorBox.self, nil)
    #if os(Linux)
    /// The completions of `async` sends on the global executor, resumed a burst at a time.
    let resumeBurst: ResumeBurst
    #endif

    // MARK: Opening and closing

    /// Opens an engine: checks the configuration, creates the store directory, starts the worker.
    /// - Parameter configuration: The settings; the defaults if omitted.
    /// - Throws: ``CourierError``: ``CourierError/Code/invalidURL``, ``CourierError/Code/invalidHeader``,
    ///   ``CourierError/Code/invalidArgument`` for a setting the C core refuses,
    ///   ``CourierError/Code/store`` if the store directory cannot be made,
    ///   ``CourierError/Code/internal`` if the worker cannot start.
    public init(configuration: Configuration = Configuration()) throws {
        let config = try configuration.makeCConfig()
        defer { courier_config_free(config) }
        var opened: OpaquePointer?
        var error = courier_error()
        let rc = courier_engine_open(&opened, config, &error)
        guard rc == COURIER_OK.rawValue, let opened else {
            throw CourierError(code: rc == COURIER_OK.rawValue ? COURIER_E_INTERNAL.rawValue : rc, detail: &error)
        }
        handle = opened
        #if os(Linux)
        resumeBurst = ResumeBurst(handle: opened)
        #endif
        self.configuration = configuration
        storeDirectory = String(borrowedCString: courier_engine_store_dir(opened))
        // Monitors the configuration carries (Configuration.eventMonitors), before any send.
        do {
            for monitor in configuration.eventMonitors { try addEventMonitor(monitor) }
        } catch {
            close()
            throw error
        }
    }

    /// Closes the engine: every request still queued or in flight completes with
    /// ``CourierError/Code/cancelled`` (exactly once), then the worker stops and the memory is
    /// released (and a temporary store removed). Later sends fail with
    /// ``CourierError/Code/closed``. Idempotent; deinit calls it too.
    ///
    /// Call it from any thread except the engine's own worker: never from a completion handler,
    /// delegate method, validator or customize hook of this engine.
    public func close() {
        guard lifecycle.beginClose() else {
            // Another thread is closing: wait until it is done (closing is rare: polling is enough).
            while !lifecycle.closed { usleep(1000) }
            return
        }
        // Calls already inside the C engine (a blocking send waiting for its answer) must leave
        // before the handle is freed: cancel what they wait for until they are gone.
        while lifecycle.users > 0 {
            _ = courier_cancel_all(handle)
            usleep(1000)
        }
        courier_engine_close(handle)
        lifecycle.markClosed()
    }

    deinit { close() }

    /// Marks the start of a call into the C engine. Returns false once the engine is closing,
    /// so the caller must not touch the handle.
    @inline(__always)
    func enter() -> Bool { lifecycle.enter() }

    /// Marks the end of a call that `enter()` allowed.
    @inline(__always)
    func leave() { lifecycle.leave() }

    // MARK: Information

    /// The version of the C library at run time, "MAJOR.MINOR.PATCH".
    public static var libraryVersion: String { String(cString: courier_version()) }

    /// Requests the engine holds now: waiting to start, and on the wire. Zero once closed.
    public var pending: (queued: Int, active: Int) {
        guard enter() else { return (0, 0) }
        defer { leave() }
        var queued: Int64 = 0
        var active: Int64 = 0
        _ = courier_engine_pending(&queued, &active, handle)
        return (Int(queued), Int(active))
    }

    // MARK: Sending with async/await

    /// Sends a request and waits for its response. Cancelling the calling task cancels the
    /// request, which then throws ``CourierError/Code/cancelled``.
    /// - Parameter request: The request.
    /// - Returns: The response (status < 400, accepted by the validator if any).
    /// - Throws: ``CourierError``, e.g. ``CourierError/Code/httpStatus`` or
    ///   ``CourierError/Code/invalidResult`` with the response attached, ``CourierError/Code/timeout``,
    ///   ``CourierError/Code/cancelled``, ``CourierError/Code/closed``; or the error a customize hook threw.
    public func send(_ request: Request) async throws -> Response {
        // The send is written out here rather than in a function of its own: an async call more
        // per request is a frame more and a hop back to the generic executor when it returns.
        // `_unsafeInheritExecutor_withTaskCancellationHandler` is the standard library's
        // executor-inheriting entry point to the same runtime calls (the cancellation record is
        // added and removed exactly as by `withTaskCancellationHandler`): this function is
        // nonisolated, so the executor it inherits is the one the isolated variant would hop to
        // (the generic executor, or the task's preferred one), and the two hops that variant
        // makes per send, at its start and its end, are saved. Each hop asks the task for its
        // preferred executor, which takes the task's status-record lock while the cancellation
        // record is on it: about 200 instructions a hop on `Engine.taskExecutor`.
        #if os(Linux)
        // On the global executor the completion resumes the task with the rest of its worker turn
        // (``ResumeBurst``); a task that prefers an executor (`Engine.taskExecutor`, whose jobs
        // already run a burst at a time on the worker) is resumed at once, as before.
        let prefers = withUnsafeCurrentTask(body: { $0?.unownedTaskExecutor }) != nil
        let send = AsyncSend.make(burst: prefers ? nil : resumeBurst)
        #else
        let send = AsyncSend.make()
        #endif
        let shared = SendableRef(send)
        let record = try await _unsafeInheritExecutor_withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<CompletionRecord, any Error>) in
                guard send.prepare(continuation) else {
                    continuation.resume(throwing: CourierError(.cancelled, message: "the task was cancelled before the request was sent"))
                    return
                }
                let user = Unmanaged.passRetained(send).toOpaque()
                do {
                    let id = try submit(request, done: asyncCompletion, user: user)
                    if send.started(id: id) { cancel(rawID: id) }
                } catch {
                    Unmanaged<AsyncSend>.fromOpaque(user).release()
                    send.takeContinuation()?.resume(throwing: error)
                }
            }
        } onCancel: {
            if let id = shared.object.cancel() { self.cancel(rawID: id) }
        }
        send.synchronize()
        let result = record.result()
        // An error a closure threw (an interceptor, a mock, a transport...) is rethrown as thrown.
        if case .failure(let error) = result, let thrown = record.thrown {
            throw CourierError.rethrowing(thrown, failure: error)
        }
        return try result.get()
    }

    /// Sends the request a ``Requestable`` describes and waits for its response.
    /// - Parameter request: The request description.
    /// - Returns: The response.
    /// - Throws: As ``send(_:)-(Request)``.
    public func send<R: Requestable>(_ request: R) async throws -> Response {
        try await send(request.makeRequest())
    }

    // MARK: Sending with a completion handler

    /// Sends a request and calls `completion` once with its outcome.
    ///
    /// The completion runs on the engine's worker thread: keep it quick, and never close the
    /// engine from it. If the request cannot be sent at all (a bad header, a closed engine, ...),
    /// `completion` runs at once on the calling thread, before this returns ``RequestID/invalid``.
    /// - Parameters:
    ///   - request: The request.
    ///   - completion: Receives the response or the error, exactly once.
    /// - Returns: The id of the send, for ``cancel(_:)``.
    @discardableResult
    public func send(_ request: Request,
                     completion: @escaping @Sendable (Result<Response, CourierError>) -> Void) -> RequestID {
        send(request, handler: { _, result in completion(result) })
    }

    /// Sends the request a ``Requestable`` describes and calls `completion` once with its outcome.
    /// - Parameters:
    ///   - request: The request description.
    ///   - completion: Receives the response or the error, exactly once (see ``send(_:completion:)-(Request,_)``).
    /// - Returns: The id of the send.
    @discardableResult
    public func send<R: Requestable>(_ request: R,
                                     completion: @escaping @Sendable (Result<Response, CourierError>) -> Void) -> RequestID {
        send(request.makeRequest(), completion: completion)
    }

    // MARK: Sending with a delegate

    /// Sends a request and tells `delegate` its outcome. The delegate is held weakly (see
    /// ``RequestDelegate``); its methods run on the engine's worker thread, or at once on the
    /// calling thread if the request cannot be sent at all.
    /// - Parameters:
    ///   - request: The request.
    ///   - delegate: Receives `requestFinished` or `requestFailed`, once.
    /// - Returns: The id of the send.
    @discardableResult
    public func send(_ request: Request, delegate: any RequestDelegate) -> RequestID {
        send(request, handler: { [weak delegate] id, result in
            guard let delegate else { return }
            switch result {
            case .success(let response): delegate.requestFinished(response, id: id)
            case .failure(let error): delegate.requestFailed(error, id: id)
            }
        })
    }

    /// Sends the request a ``Requestable`` describes and tells `delegate` its outcome.
    /// - Parameters:
    ///   - request: The request description.
    ///   - delegate: Receives the outcome, once; held weakly.
    /// - Returns: The id of the send.
    @discardableResult
    public func send<R: Requestable>(_ request: R, delegate: any RequestDelegate) -> RequestID {
        send(request.makeRequest(), delegate: delegate)
    }

    private func send(_ request: Request,
                      handler: @escaping @Sendable (RequestID, Result<Response, CourierError>) -> Void) -> RequestID {
        let user = Unmanaged.passRetained(CallbackSend(handler)).toOpaque()
        do {
            return RequestID(rawValue: try submit(request, done: callbackCompletion, user: user))
        } catch {
            Unmanaged<CallbackSend>.fromOpaque(user).release()
            handler(.invalid, .failure(CourierError.wrapping(error)))
            return .invalid
        }
    }

    // MARK: Sending and blocking

    /// Sends a request and blocks the calling thread until its outcome. Never call it from the
    /// engine's worker thread (a completion handler, delegate, validator): that fails with
    /// ``CourierError/Code/invalidArgument``. Prefer ``send(_:)-(Request)`` in async code.
    /// - Parameter request: The request.
    /// - Returns: The response.
    /// - Throws: As ``send(_:)-(Request)``.
    public func sendSync(_ request: Request) throws -> Response {
        try request.withCRequest(on: self) { creq, _ in
            guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
            var response: OpaquePointer?
            var error = courier_error()
            let rc = courier_send_sync(&response, handle, creq, &error)
            leave()
            defer { courier_error_clear(&error) } // releases what a closure raised, after it is read
            let value = response.map { Response(taking: $0) }
            if rc == COURIER_OK.rawValue, let value { return value }
            let failure = CourierError(code: rc == COURIER_OK.rawValue ? COURIER_E_INTERNAL.rawValue : rc, detail: &error,
                                       response: value)
            // An error a closure threw for this send (customize, interceptors, ...) is rethrown as thrown.
            if let thrown = thrownError(&error) { throw CourierError.rethrowing(thrown, failure: failure) }
            throw failure
        }
    }

    /// Sends the request a ``Requestable`` describes and blocks until its outcome.
    /// - Parameter request: The request description.
    /// - Returns: The response.
    /// - Throws: As ``sendSync(_:)-(Request)``.
    public func sendSync<R: Requestable>(_ request: R) throws -> Response {
        try sendSync(request.makeRequest())
    }

    // MARK: Cancelling

    /// Cancels a request by id: it completes with ``CourierError/Code/cancelled`` unless it
    /// completes otherwise first. Any thread.
    /// - Parameter id: The id a send returned.
    /// - Returns: Whether the id was known and not yet completed.
    @discardableResult
    public func cancel(_ id: RequestID) -> Bool {
        cancel(rawID: id.rawValue)
    }

    /// Cancels every request the engine holds now. Any thread.
    public func cancelAll() {
        guard enter() else { return }
        defer { leave() }
        _ = courier_cancel_all(handle)
    }

    @discardableResult
    private func cancel(rawID: UInt64) -> Bool {
        guard enter() else { return false }
        defer { leave() }
        return courier_cancel(handle, rawID) == COURIER_OK.rawValue
    }

    // MARK: Submitting to the C engine

    /// Builds the C request and hands it to `courier_send`.
    /// - Returns: The id of the send; `done` will be called exactly once with `user`.
    /// - Throws: The C core's refusal, or a customize hook's error. `done` is then never called,
    ///   and the caller still owns `user`.
    private func submit(_ request: Request, done: courier_completion_fn, user: UnsafeMutableRawPointer) throws -> UInt64 {
        try request.withCRequest(on: self) { creq, _ in
            guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
            var id: UInt64 = 0
            var error = courier_error()
            let rc = courier_send(&id, handle, creq, done, user, &error)
            leave()
            if rc == COURIER_OK.rawValue { return id }
            defer { courier_error_clear(&error) } // releases what a closure raised, after it is read
            // An error a customize hook or an interceptor's `adapt` threw is rethrown as thrown.
            if let thrown = thrownError(&error) { throw thrown }
            throw CourierError(code: rc, detail: &error)
        }
    }
}

// MARK: - Lifecycle

#if os(Linux)
/// What ``Engine/enter()``, ``Engine/leave()`` and ``Engine/close()`` share, in one atomic word:
/// the calls inside the C engine, and two flags. An `enter` is one atomic add (a second one when
/// the engine is closing), a `leave` one atomic subtract: the mutex this replaced took two locks
/// and two unlocks a call, and two threads reading the cache at once queued on it (perf, `courier
/// bench cache`: pthread_mutex_lock was the Swift get path's largest cost of its own).
/// The order: an `enter` that adds before `beginClose` sets the closing bit is counted, and
/// `close` waits for its `leave` (release) before freeing the handle (acquire); one that adds after
/// it sees the bit, takes its count back and never touches the handle.
final class Lifecycle: @unchecked Sendable {
    private let word = Atomic<Int>(0)
    private static let closingBit = 1 << 60
    private static let closedBit = 1 << 61
    private static let countMask = closingBit - 1

    @inline(__always)
    func enter() -> Bool {
        let now = word.wrappingAdd(1, ordering: .acquiring).newValue
        if now & Self.closingBit == 0 { return true }
        word.wrappingSubtract(1, ordering: .releasing)
        return false
    }

    @inline(__always)
    func leave() { word.wrappingSubtract(1, ordering: .releasing) }

    /// Sets the closing bit; true for the first caller (the one that closes).
    func beginClose() -> Bool {
        word.bitwiseOr(Self.closingBit, ordering: .acquiringAndReleasing).oldValue & Self.closingBit == 0
    }

    /// Calls inside the C engine now.
    var users: Int { word.load(ordering: .acquiring) & Self.countMask }
    /// Whether close() has freed the C engine.
    var closed: Bool { word.load(ordering: .acquiring) & Self.closedBit != 0 }
    func markClosed() { word.bitwiseOr(Self.closedBit, ordering: .releasing) }
}
#else
/// What ``Engine/enter()``, ``Engine/leave()`` and ``Engine/close()`` share, under a mutex (the
/// Synchronization module's `Atomic` needs macOS 15; the Linux build above uses it).
final class Lifecycle: @unchecked Sendable {
    private struct State {
        var closing = false
        var closed = false
        var users = 0
    }
    private final class Guarded: Locked<State> {}
    private let guarded = Guarded.make(Guarded.self, State())

    @inline(__always)
    func enter() -> Bool {
        guarded.withLock { state in
            if state.closing { return false }
            state.users += 1
            return true
        }
    }

    @inline(__always)
    func leave() { guarded.withLock { $0.users -= 1 } }

    func beginClose() -> Bool {
        guarded.withLock { state in
            defer { state.closing = true }
            return !state.closing
        }
    }

    var users: Int { guarded.withLock { $0.users } }
    var closed: Bool { guarded.withLock { $0.closed } }
    func markClosed() { guarded.withLock { $0.closed = true } }
}
#endif

// MARK: - Building the C request

extension Request {
    /// Builds the C request (`courier_request *`), hands it to `body`, and frees it after.
    /// - Parameter body: Receives the request and the customize box (to read a hook's error).
    /// - Returns: What `body` returns.
    /// - Throws: ``CourierError`` naming the part the C core refused, or what `body` throws.
    func withCRequest<R>(on engine: Engine? = nil, _ body: (OpaquePointer, CustomizeBox?) throws -> R) throws -> R {
        let (request, customize) = try makeCRequest(on: engine)
        defer { courier_request_free(request) }
        return try body(request, customize)
    }

    /// Builds a new C request; the caller frees it.
    /// - Returns: The request and the customize box (to read a hook's error).
    /// - Throws: ``CourierError`` naming the part the C core refused.
    func makeCRequest(on engine: Engine? = nil) throws -> (request: OpaquePointer, customize: CustomizeBox?) {
        var created: OpaquePointer?
        if let origin {
            // A declared API or a route: the engine makes the C request (Features/Catalog.swift).
            created = try origin.makeCRequest(on: engine)
        } else {
            // Explicit withCString: the implicit String-to-pointer conversion copies a small string
            // ("GET") into a new array first.
            let rc = method.withCString { method in path.withCString { path in courier_request_new(&created, method, path) } }
            try CourierError.check(rc, "request \(method) '\(path)'")
        }
        guard let request = created else { throw CourierError(.noMemory) }
        do {
            let customize = try fill(request)
            return (request, customize)
        } catch {
            courier_request_free(request)
            throw error
        }
    }

    /// Sets everything this value describes on a new C request.
    /// - Parameter request: The `courier_request *` being built.
    /// - Returns: The customize box, if any.
    /// - Throws: ``CourierError`` naming the part the C core refused.
    private func fill(_ request: OpaquePointer) throws -> CustomizeBox? {
        if let base {
            try CourierError.check(courier_request_set_base_url(request, base), "baseURL '\(base)'")
        }
        for parameter in parameterList {
            try parameter.name.withUTF8Bytes { name, nameCount in
                try parameter.value.withUTF8Bytes { value, valueCount in
                    try CourierError.check(courier_request_add_param_n(request, name, nameCount, value, valueCount),
                                           "parameter '\(parameter.name)'")
                }
            }
        }
        if !usesDefaultParameters {
            try CourierError.check(courier_request_set_use_default_params(request, 0), "useDefaultParameters")
        }
        for line in headerList {
            try line.name.withUTF8Bytes { name, nameCount in
                try line.value.withUTF8Bytes { value, valueCount in
                    try CourierError.check(courier_request_add_header_n(request, name, nameCount, value, valueCount),
                                           "header '\(line.name)'")
                }
            }
        }
        if let rawBody {
            try rawBody.data.withUnsafeBytes { bytes in
                try withOptionalCString(rawBody.contentType) { contentType in
                    // An empty body is still a body: C reads a NULL pointer as "no body".
                    var empty: UInt8 = 0
                    let rc = bytes.baseAddress.map { courier_request_set_body(request, $0, bytes.count, contentType) }
                        ?? courier_request_set_body(request, &empty, 0, contentType)
                    try CourierError.check(rc, "body")
                }
            }
        }
        if let encoding {
            try CourierError.check(courier_request_set_body_encoding(request, encoding.cValue), "bodyEncoding")
        }
        if let timeoutSeconds {
            try CourierError.check(courier_request_set_timeout_ms(request, Configuration.milliseconds(timeoutSeconds)),
                                   "timeout \(timeoutSeconds)")
        }
        switch authorization {
        case .basic(let user, let password)?:
            try CourierError.check(courier_request_set_basic_auth(request, user, password), "basicAuth")
        case .token(let scheme, let token)?:
            try withOptionalCString(scheme) {
                try CourierError.check(courier_request_set_auth_token(request, $0, token), "authToken")
            }
        case nil:
            break
        }
        if let validate {
            let box = Unmanaged.passRetained(ValidatorBox(validate)).toOpaque()
            // On failure the C core has already released the box through user_free.
            try CourierError.check(courier_request_set_validator(request, validatorTrampoline, box, releaseBox), "validator")
        }
        var customize: CustomizeBox?
        if !customizers.isEmpty {
            let box = CustomizeBox(customizers)
            customize = box
            try CourierError.check(courier_request_set_customize(request, customizeTrampoline,
                                                                 Unmanaged.passRetained(box).toOpaque(), releaseBox),
                                   "customize")
        }
        for option in options { try option.apply(to: request) }
        return customize
    }
}

// MARK: - Errors from Swift

extension CourierError {
    /// A ``CourierError`` for any error: itself, or (for an error a customize hook threw)
    /// ``Code/invalidArgument`` with the error's description.
    /// - Parameter error: Any error.
    /// - Returns: The CourierError.
    static func wrapping(_ error: any Error) -> CourierError {
        if let error = error as? CourierError { return error }
        return CourierError(.invalidArgument, message: "the customize hook threw: \(error)")
    }
}
