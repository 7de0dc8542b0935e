// Callbacks.swift — the C side of Swift closures: boxes passed through `void *user`, the
// `@convention(c)` trampolines that unbox them, and the `user_free` that releases them.

import Foundation
internal import CCore

// MARK: - Releasing boxes

/// `courier_user_free_fn` for every box below: balances the `passRetained` of the registration.
let releaseBox: courier_user_free_fn = { user in
    guard let user else { return }
    Unmanaged<AnyObject>.fromOpaque(user).release()
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
/// runs on the sending thread inside `courier_send`; a Swift error it throws is kept here and
/// rethrown once `courier_send` returns (the C core only sees a code).
final class CustomizeBox: @unchecked Sendable {
    let steps: [@Sendable (inout OutgoingRequest) throws -> Void]
    var error: (any Error)?
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
    } catch let error as CourierError {
        box.error = error
        return error.code.rawValue < 0 ? error.code.rawValue : COURIER_E_INVALID_ARGUMENT.rawValue
    } catch {
        box.error = error
        return COURIER_E_INVALID_ARGUMENT.rawValue
    }
}

// MARK: - Completions

/// What a completion delivered: moved off the worker thread before Swift values are made from it,
/// so the worker (which runs every transfer of the engine) does as little as possible.
/// `@unchecked Sendable`: it owns the response pointer, which is handed over exactly once.
struct CompletionRecord: @unchecked Sendable {
    let code: Int32
    let response: OpaquePointer?
    let detail: courier_error?

    /// Records a completion's arguments, taking the response.
    init(code: Int32, response: OpaquePointer?, error: UnsafePointer<courier_error>?) {
        self.code = code
        self.response = response
        self.detail = code == COURIER_OK.rawValue ? nil : error?.pointee
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
        return withUnsafePointer(to: detail) { .failure(CourierError(code: code, detail: $0, response: response)) }
    }
}

/// The state of one `async` send, shared by the send, its task-cancellation handler and its
/// completion (passed to C as `user`, retained once for the completion): one allocation holding
/// the state and its mutex.
///
/// Cancellation may come before the C id is known: the handler then only marks the state, and
/// the send cancels by id as soon as `courier_send` returns (or does not send at all).
/// The continuation is resumed exactly once because it is only ever taken out under the mutex
/// (by the completion, or by the send when `courier_send` fails), which is why an unsafe
/// continuation is enough: a checked one would cost an allocation more per send.
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

    /// Takes the continuation back: from the completion, or after a failed `courier_send`.
    func takeContinuation() -> UnsafeContinuation<CompletionRecord, any Error>? {
        withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
    }

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

/// `courier_completion_fn` of `async` sends: resumes the continuation on the worker thread.
/// (Only the C values are recorded here; the `Response` is made by the resumed task, off the
/// worker.)
let asyncCompletion: courier_completion_fn = { _, code, response, error, user in
    let send = Unmanaged<AsyncSend>.fromOpaque(user!).takeRetainedValue()
    send.takeContinuation()?.resume(returning: CompletionRecord(code: code, response: response, error: error))
}

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
