// Locked.swift — a small state guarded by a pthread mutex, in one allocation: the state is the
// buffer's header and the mutex its tail element, so the mutex has a stable address (a mutex in a
// Swift stored property has none) and no second allocation (as a separately allocated mutex, or an
// NSLock, would need). The send paths take one per request, so both costs count there.

import Foundation

// MARK: - Locked

/// State guarded by a mutex. Subclasses add methods; they must not add stored properties
/// (a `ManagedBuffer` keeps everything in its header and tail).
///
/// Safe to share between threads (the header is only read or written inside `withLock`), but
/// `ManagedBuffer` is explicitly not `Sendable`: closures that must be `@Sendable` capture one
/// through ``SendableRef``.
class Locked<State>: ManagedBuffer<State, pthread_mutex_t> {
    /// A new instance of `type` holding `state`, with its mutex initialised.
    /// - Parameters:
    ///   - type: The subclass to make.
    ///   - state: The initial state.
    /// - Returns: The new instance.
    static func make<T: Locked<State>>(_ type: T.Type, _ state: State) -> T {
        let buffer = T.create(minimumCapacity: 1) { _ in state }
        let made = unsafeDowncast(buffer, to: T.self)
        made.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            _ = pthread_mutex_init(mutex, nil)
        }
        return made
    }

    deinit {
        withUnsafeMutablePointerToElements { mutex in _ = pthread_mutex_destroy(mutex) }
    }

    /// Runs `body` with the state, under the mutex.
    /// - Parameter body: Reads or changes the state; must not call back into this lock.
    /// - Returns: What `body` returns.
    @inline(__always)
    final func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        try withUnsafeMutablePointers { state, mutex in
            _ = pthread_mutex_lock(mutex)
            defer { _ = pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }
}

// MARK: - SendableRef

/// A reference to a ``Locked`` (thread-safe, though not `Sendable` by type) for a `@Sendable`
/// closure to capture. A struct: wrapping costs nothing.
struct SendableRef<T: AnyObject>: @unchecked Sendable {
    let object: T
    init(_ object: T) { self.object = object }
}

// MARK: - Off the task's thread

/// One outcome passed from a thread of dispatch (or any thread the Swift runtime does not run) to
/// the task awaiting it.
private final class Handoff<Value>: Locked<Value?> {}

/// Runs `body` on a global dispatch queue and returns its outcome to the awaiting task.
///
/// The outcome passes through a mutex, not only through the continuation: when the continuation
/// is resumed before its task reaches `await`, the runtime orders the two by an atomic of its own
/// (libswift_Concurrency is built without ThreadSanitizer), so under `--sanitize=thread` the
/// task's first reads of a value made on the other thread would be reported as a race. A mutex
/// release on that thread and an acquire on the task's make the order one ThreadSanitizer sees.
/// - Parameters:
///   - qos: The quality of service of the queue.
///   - body: The blocking work.
/// - Returns: What `body` returns; rethrows what it throws.
func offTaskThread<R: Sendable>(qos: DispatchQoS.QoSClass = .utility,
                                _ body: @escaping @Sendable () throws -> R) async throws -> R {
    let handoff = SendableRef(Locked.make(Handoff<Result<R, any Error>>.self, nil))
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global(qos: qos).async {
            let outcome = Result { try body() }
            handoff.object.withLock { $0 = outcome }
            continuation.resume()
        }
    }
    return try handoff.object.withLock { $0! }.get()
}
