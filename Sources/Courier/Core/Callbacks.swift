// Callbacks.swift — the C side of Swift closures: boxes passed through `void *user`, the
// `@convention(c)` trampolines that unbox them, and the `user_free` that releases them.

import Foundation
#if os(Linux)
import Synchronization
#endif
internal import CCore

// MARK: - Releasing boxes

/// `courier_user_free_fn` for every box below: balances the `passRetained` of the registration.
let releaseBox: courier_user_free_fn = { user in
    guard let user else { return }
    Unmanaged<AnyObject>.fromOpaque(user).release()
}

// MARK: - Errors thrown by closures the C core calls

/// A Swift error raised into a send's slot in the C core (`courier_raise`): C holds the box, hands
/// it back with the send's failure (`courier_error_user_data`) and releases it (`releaseBox`).
/// Immutable.
final class ThrownBox: @unchecked Sendable {
    let error: any Error
    init(_ error: any Error) { self.error = error }
}

/// The C code for a thrown error: a ``CourierError``'s own, else `otherwise`.
func thrownCode(_ error: any Error, otherwise: Int32) -> Int32 {
    if let error = error as? CourierError, error.code.rawValue < 0 { return error.code.rawValue }
    return otherwise
}

/// From a closure the C core runs for a send (customize, interceptors, mock, ...): raises `error`
/// into that send's slot, so the send rethrows this very error. Returns the code the callback
/// returns to C.
func raiseInSend(_ error: any Error, otherwise: Int32) -> Int32 {
    let code = thrownCode(error, otherwise: otherwise)
    _ = courier_raise(courier_code(rawValue: code), nil, Unmanaged.passRetained(ThrownBox(error)).toOpaque(), releaseBox)
    return code
}

/// The error a closure threw for the send that failed with `detail`, if any (the C core's
/// `courier_error_user_data`; borrowed from `detail`, whose owner releases it).
func thrownError(_ detail: UnsafePointer<courier_error>?) -> (any Error)? {
    guard let detail, let user = courier_error_user_data(detail) else { return nil }
    return (Unmanaged<AnyObject>.fromOpaque(user).takeUnretainedValue() as? ThrownBox)?.error
}

extension CourierError {
    /// What a send rethrows for an error a closure threw: the error itself; a ``CourierError``
    /// thrown without a response gets the failure's.
    /// - Parameters:
    ///   - thrown: The thrown error.
    ///   - failure: The send's failure.
    /// - Returns: The error to rethrow.
    static func rethrowing(_ thrown: any Error, failure: CourierError) -> any Error {
        guard let error = thrown as? CourierError, error.response == nil, let response = failure.response else { return thrown }
        return CourierError(error.code, message: error.message, httpStatus: error.httpStatus ?? failure.httpStatus,
                            curlCode: error.curlCode, osError: error.osError, storeError: error.storeError,
                            response: response)
    }
}

// MARK: - Validators

/// A validator closure, registered with `courier_config_set_validator` or
/// `courier_request_set_validator`. Immutable, so `@unchecked Sendable` is sound.
final class ValidatorBox: @unchecked Sendable {
    let validate: @Sendable (Response) -> Bool
    init(_ validate: @escaping @Sendable (Response) -> Bool) { self.validate = validate }
}

/// `courier_validator_fn`: runs on the worker thread with a borrowed response.
let validatorTrampoline: courier_validator_fn = { response, user in
    guard let response, let user else { return 1 }
    let box = Unmanaged<ValidatorBox>.fromOpaque(user).takeUnretainedValue()
    return box.validate(Response(borrowing: response)) ? 1 : 0
}

// MARK: - Customize hooks

/// The customize closures of one send, registered with `courier_request_set_customize`. The hook
/// runs on the sending thread inside `courier_send`; a Swift error it throws is raised into the
/// send's slot in C (``raiseInSend(_:otherwise:)``) and rethrown once `courier_send` returns.
final class CustomizeBox: @unchecked Sendable {
    let steps: [@Sendable (inout OutgoingRequest) throws -> Void]
    init(_ steps: [@Sendable (inout OutgoingRequest) throws -> Void]) { self.steps = steps }
}

/// `courier_customize_fn`.
let customizeTrampoline: courier_customize_fn = { outgoing, user in
    guard let outgoing, let user else { return COURIER_E_INVALID_ARGUMENT.rawValue }
    let box = Unmanaged<CustomizeBox>.fromOpaque(user).takeUnretainedValue()
    let handle = OutgoingHandle(outgoing)
    defer { handle.pointer = nil }
    var request = OutgoingRequest(handle: handle)
    do {
        for step in box.steps { try step(&request) }
        return COURIER_OK.rawValue
    } catch {
        return raiseInSend(error, otherwise: COURIER_E_INVALID_ARGUMENT.rawValue)
    }
}

// MARK: - Completions

/// What a completion delivered: moved off the worker thread before Swift values are made from it,
/// so the worker (which runs every transfer of the engine) does as little as possible.
/// `@unchecked Sendable`: it owns the response pointer, which is handed over exactly once.
/// Four words: a failure's `courier_error` (304 bytes) is boxed, so a success, which has none,
/// is not copied through the continuation and the frames at that size.
struct CompletionRecord: @unchecked Sendable {
    let code: Int32
    let response: OpaquePointer?
    let detail: ErrorDetail?
    /// The error a closure threw for this send (the C core's slot), taken while the completion runs.
    let thrown: (any Error)?

    /// Records a completion's arguments, taking the response.
    init(code: Int32, response: OpaquePointer?, error: UnsafePointer<courier_error>?) {
        self.code = code
        self.response = response
        if code == COURIER_OK.rawValue {
            detail = nil
            thrown = nil
        } else {
            detail = error.map { ErrorDetail($0.pointee) }
            thrown = thrownError(error)
        }
    }

    /// The response, or the error with the response attached.
    /// - Returns: The result; takes the response pointer (call once).
    func result() -> Result<Response, CourierError> {
        let response = self.response.map { Response(taking: $0) }
        if code == COURIER_OK.rawValue, let response { return .success(response) }
        if code == COURIER_OK.rawValue {
            return .failure(CourierError(.internal, message: "the engine completed without a response"))
        }
        guard let detail else { return .failure(CourierError(code: code, detail: nil, response: response)) }
        return withUnsafePointer(to: detail.value) { .failure(CourierError(code: code, detail: $0, response: response)) }
    }
}

/// A failure's `courier_error`, copied from the completion's borrowed one. Immutable, so
/// `@unchecked Sendable` is sound (the user data it may name is only read, and released by the
/// C core).
final class ErrorDetail: @unchecked Sendable {
    let value: courier_error
    init(_ value: courier_error) { self.value = value }
}

/// The state of one `async` send, shared by the send, its task-cancellation handler and its
/// completion (passed to C as `user`, retained once for the completion): one allocation.
///
/// Cancellation may come before the C id is known: the handler then only marks the state, and
/// the send cancels by id as soon as `courier_send` returns (or does not send at all).
/// The continuation is resumed exactly once: it is stored before `courier_send` and then taken
/// by exactly one side, the completion when `courier_send` accepted the request (the C core calls
/// it exactly once, ordered after the store by the engine's own lock), the send itself when
/// `courier_send` refused it (the completion is then never called). That is why an unsafe
/// continuation is enough: a checked one would cost an allocation more per send.
#if os(Linux)
final class AsyncSend: @unchecked Sendable {
    /// The C id once `courier_send` gave it, or'ed with `cancelledBit` once the task is cancelled:
    /// whichever of the send and the handler comes second sees the other's part and cancels the
    /// id, so it is cancelled exactly once. (C ids start at 1 and count up: never near bit 63.)
    private let word = Atomic<UInt64>(0)
    private static let cancelledBit: UInt64 = 1 << 63
    /// Set (releasing) by the completion after it wrote the record, read (acquiring) by the
    /// resumed task: see ``synchronize()``.
    private let completed = Atomic<Bool>(false)
    /// Written before `courier_send`, taken once (see above); never touched by the handler.
    private var continuation: UnsafeContinuation<CompletionRecord, any Error>?
    /// Where the completion hands the record over to be resumed with others of its burst, or nil
    /// to resume at once on the worker (see ``ResumeBurst``).
    let burst: ResumeBurst?

    private init(burst: ResumeBurst?) { self.burst = burst }

    /// A new send state.
    static func make(burst: ResumeBurst?) -> AsyncSend { AsyncSend(burst: burst) }

    /// Stores the continuation (before sending). Returns false if the task was already cancelled,
    /// and then stores nothing.
    @inline(__always)
    func prepare(_ continuation: UnsafeContinuation<CompletionRecord, any Error>) -> Bool {
        if word.load(ordering: .acquiring) & Self.cancelledBit != 0 { return false }
        self.continuation = continuation
        return true
    }

    /// Orders what the completion wrote (the record, the C response) before the resumed task's
    /// reads in a way ThreadSanitizer sees: an acquiring load of what the completion stored
    /// releasing before it resumed the continuation. (The continuation alone orders them too, but
    /// when it is resumed before the task reaches its `await`, only by an atomic inside the
    /// concurrency runtime, which is built without ThreadSanitizer.) A plain load on x86 and ARM64.
    @inline(__always)
    func synchronize() { _ = completed.load(ordering: .acquiring) }

    /// Takes the continuation back after a failed `courier_send` (the completion will not run).
    @inline(__always)
    func takeContinuation() -> UnsafeContinuation<CompletionRecord, any Error>? {
        defer { continuation = nil }
        return continuation
    }

    /// From the completion: resumes the task with `record`.
    @inline(__always)
    func finish(_ record: CompletionRecord) {
        let continuation = takeContinuation()
        completed.store(true, ordering: .releasing)
        continuation?.resume(returning: record)
    }

    /// Called once `courier_send` gave an id. Returns true if the task was cancelled meanwhile,
    /// so the caller must cancel the id.
    @inline(__always)
    func started(id: UInt64) -> Bool {
        word.bitwiseOr(id, ordering: .acquiringAndReleasing).oldValue & Self.cancelledBit != 0
    }

    /// Called by the task-cancellation handler (at most once). Returns the id to cancel, if
    /// already sent.
    func cancel() -> UInt64? {
        let id = word.bitwiseOr(Self.cancelledBit, ordering: .acquiringAndReleasing).oldValue & ~Self.cancelledBit
        return id == 0 ? nil : id
    }
}
#else
/// The same under a mutex (the Synchronization module's `Atomic` needs macOS 15; the Linux build
/// above uses it): the state and its mutex in one allocation.
final class AsyncSend: Locked<AsyncSendState> {
    /// A new send state.
    static func make() -> AsyncSend { make(AsyncSend.self, AsyncSendState()) }

    /// Stores the continuation (before sending). Returns false if the task was already cancelled,
    /// and then stores nothing.
    func prepare(_ continuation: UnsafeContinuation<CompletionRecord, any Error>) -> Bool {
        withLock { state in
            if state.cancelled { return false }
            state.continuation = continuation
            return true
        }
    }

    /// Takes the mutex once, after the task has resumed: the completion took the continuation
    /// out under it, after writing the response, so this orders those writes before the task's
    /// reads in a way ThreadSanitizer sees (see the Linux version).
    @inline(__always)
    func synchronize() { withLock { _ in } }

    /// Takes the continuation back after a failed `courier_send`.
    func takeContinuation() -> UnsafeContinuation<CompletionRecord, any Error>? {
        withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
    }

    /// From the completion: resumes the task with `record`.
    func finish(_ record: CompletionRecord) { takeContinuation()?.resume(returning: record) }

    /// Called once `courier_send` gave an id. Returns true if the task was cancelled meanwhile,
    /// so the caller must cancel the id.
    func started(id: UInt64) -> Bool {
        withLock { state in
            state.id = id
            return state.cancelled
        }
    }

    /// Called by the task-cancellation handler. Returns the id to cancel, if already sent.
    func cancel() -> UInt64? {
        withLock { state in
            state.cancelled = true
            return state.id == 0 ? nil : state.id
        }
    }
}

/// What ``AsyncSend`` guards.
struct AsyncSendState {
    var id: UInt64 = 0
    var cancelled = false
    var continuation: UnsafeContinuation<CompletionRecord, any Error>?
}
#endif

/// `courier_completion_fn` of `async` sends: resumes the continuation on the worker thread.
/// (Only the C values are recorded here; the `Response` is made by the resumed task, off the
/// worker.)
let asyncCompletion: courier_completion_fn = { _, code, response, error, user in
    let send = Unmanaged<AsyncSend>.fromOpaque(user!).takeRetainedValue()
    // Recorded before ``AsyncSend/finish(_:)`` publishes it (a releasing store, or the unlock),
    // so everything the task reads (the record, the C response) is ordered before the
    // ``AsyncSend/synchronize()`` that pairs with it.
    let record = CompletionRecord(code: code, response: response, error: error)
    #if os(Linux)
    if let burst = send.burst {
        burst.add(send, record)
        return
    }
    #endif
    send.finish(record)
}

#if os(Linux)
/// The completions of one worker turn, resumed together (issue 15). A continuation resumed inside
/// its completion enqueues its task on the global executor from the worker, between that turn's
/// other completions and curl's work, and dispatch wakes a pool thread for it (a futex call when
/// one sleeps). Instead the completion appends the send and its record here, and the first of a
/// turn posts one drain (`courier_engine_post`), which the worker runs at the start of its next
/// turn, before it waits again: the turn's resumptions then come back to back, so the root queue
/// is mostly non-empty and dispatch wakes fewer threads. A task that prefers an executor
/// (`Engine.taskExecutor`) does not come here (``Engine/send(_:)-(Request)``). Each send is queued
/// once and resumed once by the drain that takes it; once the engine is closing the post is
/// refused and the completion drains at once, and a post accepted before runs before the worker
/// stops, so no task is left waiting.
final class ResumeBurst: @unchecked Sendable {
    // @unchecked Sendable: `handle` is immutable, the queue is `Locked`.
    private let handle: OpaquePointer
    private let queue = PendingResumes.make(PendingResumes.self, PendingResumeState())

    init(handle: OpaquePointer) { self.handle = handle }

    /// From a completion, on the worker: queues the resumption; the first of a burst posts the
    /// drain.
    func add(_ send: AsyncSend, _ record: CompletionRecord) {
        let schedule = queue.withLock { state -> Bool in
            state.items.append((send, record))
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
        guard schedule else { return }
        // On the worker, inside a completion: the handle is valid (the C engine is freed only
        // after its worker stops), and a post accepted here runs before the worker stops. Retained
        // for the post: an engine closed from its own callback may be released before it runs.
        let user = Unmanaged.passRetained(self).toOpaque()
        if courier_engine_post(handle, drainResumeBurst, user, nil) == COURIER_OK.rawValue { return }
        // Closing (or out of memory): resume here rather than leave a task waiting.
        Unmanaged<ResumeBurst>.fromOpaque(user).release()
        drain()
    }

    /// Resumes every send queued now, in the order their completions ran.
    fileprivate func drain() {
        var batch = queue.withLock { state -> [(AsyncSend, CompletionRecord)] in
            let taken = state.items
            state.items = state.spare
            state.spare = []
            state.scheduled = false
            return taken
        }
        for (send, record) in batch { send.finish(record) }
        batch.removeAll(keepingCapacity: true) // unique again here: keeps its storage
        queue.withLock { state in
            if state.spare.capacity < batch.capacity { swap(&state.spare, &batch) } // reused next burst
        }
    }
}

/// `courier_work_fn` of ``ResumeBurst``: drains on the worker.
private let drainResumeBurst: courier_work_fn = { user in
    Unmanaged<ResumeBurst>.fromOpaque(user!).takeRetainedValue().drain()
}

/// The resumptions a ``ResumeBurst`` holds.
struct PendingResumeState {
    var items: [(AsyncSend, CompletionRecord)] = []
    /// An emptied array whose storage the next burst reuses (no allocation per burst).
    var spare: [(AsyncSend, CompletionRecord)] = []
    /// A drain is posted and has not taken the items yet.
    var scheduled = false
}

final class PendingResumes: Locked<PendingResumeState> {}
#endif

/// A completion handler of a callback-style send (`user` of `courier_send`). Immutable, so
/// `@unchecked Sendable` is sound.
final class CallbackSend: @unchecked Sendable {
    let handler: @Sendable (RequestID, Result<Response, CourierError>) -> Void
    init(_ handler: @escaping @Sendable (RequestID, Result<Response, CourierError>) -> Void) { self.handler = handler }
}

/// `courier_completion_fn` of callback-style sends: runs the handler on the worker thread.
let callbackCompletion: courier_completion_fn = { id, code, response, error, user in
    let send = Unmanaged<CallbackSend>.fromOpaque(user!).takeRetainedValue()
    send.handler(RequestID(rawValue: id), CompletionRecord(code: code, response: response, error: error).result())
}
