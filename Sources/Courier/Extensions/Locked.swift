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
