// Interrupts.swift — SIGINT/SIGTERM handling for long-running commands: cleanups registered here
// (stopping nginx, removing a temporary directory) run before the process exits on a signal.
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs registered cleanups when SIGINT or SIGTERM arrives, then exits with 128 + signal.
///
/// The signals are received through `DispatchSourceSignal` on a private queue, so cleanups run
/// outside signal context (they may take locks, wait for a child, delete files) even while the
/// main thread is blocked in C code.
public final class Interrupts: @unchecked Sendable {  // all state is guarded by `lock`
    /// The process-wide instance.
    public static let shared = Interrupts()

    private let lock = NSLock()
    private let queue = DispatchQueue(label: "courier.interrupts")
    private var sources: [DispatchSourceSignal] = []
    private var cleanups: [Int: @Sendable () -> Void] = [:]
    private var nextToken = 1
    private var waiters: [@Sendable (Int32) -> Void] = []

    private init() {}

    /// Installs the handlers (idempotent). Called by `register` and `waitForSignal`.
    public func install() {
        lock.lock()
        defer { lock.unlock() }
        guard sources.isEmpty else { return }
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { [weak self] in self?.fire(sig) }
            source.resume()
            sources.append(source)
        }
    }

    /// Registers a cleanup to run if the process is interrupted.
    /// - Parameter cleanup: runs at most once, on a private queue.
    /// - Returns: a token for `unregister`.
    @discardableResult
    public func register(_ cleanup: @escaping @Sendable () -> Void) -> Int {
        install()
        lock.lock()
        defer { lock.unlock() }
        let token = nextToken
        nextToken += 1
        cleanups[token] = cleanup
        return token
    }

    /// Removes a cleanup (after the resource was released normally).
    public func unregister(_ token: Int) {
        lock.lock()
        cleanups[token] = nil
        lock.unlock()
    }

    /// Suspends until SIGINT or SIGTERM arrives, and returns it instead of exiting.
    /// - Returns: the signal number.
    public func waitForSignal() async -> Int32 {
        install()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            lock.lock()
            waiters.append { continuation.resume(returning: $0) }
            lock.unlock()
        }
    }

    private func fire(_ sig: Int32) {
        lock.lock()
        if !waiters.isEmpty {
            // Someone handles this signal themselves (e.g. `courier serve`): hand it over.
            let pendingWaiters = waiters
            waiters.removeAll()
            lock.unlock()
            for waiter in pendingWaiters { waiter(sig) }
            return
        }
        let pending = cleanups.sorted { $0.key > $1.key }.map(\.value)  // newest first
        cleanups.removeAll()
        lock.unlock()
        for cleanup in pending { cleanup() }
        FileHandle.standardError.write("\ninterrupted\n".data(using: .utf8)!)
        exit(128 + sig)
    }
}
