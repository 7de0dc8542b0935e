// TaskExecutor.swift — Engine.taskExecutor: a TaskExecutor that runs tasks on the engine's worker
// thread (courier_engine_post), so a task that sends, awaits the response and sends again never
// changes thread: the completion resumes it on the worker, it runs there, and its next send joins
// the worker's turn with no wakeup. The default (the global concurrent executor) pays a thread
// switch per request: the worker resumes the task, a pool thread wakes up to run it.

import Foundation
internal import CCore

/// An executor that runs tasks on an engine's worker thread: the thread every completion of that
/// engine runs on. Give it to `withTaskExecutorPreference(_:operation:)` (or
/// `Task(executorPreference:)`) for code that mostly sends requests and reacts to their responses
/// — a loop of requests, a crawler, a client of a chatty API — and the task runs where its
/// responses arrive: no thread switch and no wakeup per request.
///
/// ```swift
/// let responses = try await withTaskExecutorPreference(engine.taskExecutor) {
///     var all: [Response] = []
///     for path in ["/a", "/b", "/c"] { all.append(try await engine.send(.get(path))) }
///     return all
/// }
/// ```
///
/// While a task runs on it the worker does nothing else, so keep what runs there short: move heavy
/// work (decoding a large body, disk I/O) to another executor, and never block (a blocking send,
/// ``Engine/sendSync(_:)-(Request)``, fails there with ``CourierError/Code/invalidArgument``). Jobs run in the
/// order they were enqueued, a burst at a time between the worker's turns. Once the engine is
/// closing, jobs run on a global dispatch queue instead, so no task is ever left behind.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
public final class EngineTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `handle` and `lifecycle` are immutable, the queue is `Locked`.
    private let handle: OpaquePointer
    private let lifecycle: Lifecycle
    private let queue = WorkerJobQueue.make(WorkerJobQueue.self, WorkerJobs())

    init(handle: OpaquePointer, lifecycle: Lifecycle) {
        self.handle = handle
        self.lifecycle = lifecycle
    }

    /// Enqueues a job: it runs on the engine's worker thread (or, once the engine is closing, on a
    /// global dispatch queue).
    /// - Parameter job: The job.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let schedule = queue.withLock { state -> Bool in
            state.jobs.append(job)
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
        if schedule { post() }
    }

    /// Asks the worker to run the queue (one post per burst: jobs enqueued meanwhile join it).
    private func post() {
        if lifecycle.enter() {
            defer { lifecycle.leave() }
            // Unretained: the engine keeps the executor, and the worker runs every accepted post
            // before the C engine is freed (courier_engine_post's contract).
            if courier_engine_post(handle, runWorkerJobs, Unmanaged.passUnretained(self).toOpaque(), nil)
                == COURIER_OK.rawValue {
                return
            }
        }
        // Closing (or out of memory): run the queue elsewhere rather than leave its tasks waiting.
        DispatchQueue.global().async { self.runJobs() }
    }

    /// Runs the jobs queued now; jobs they enqueue wait for the next turn (so a task that keeps
    /// yielding cannot hold the worker), for which the queue is posted again.
    fileprivate func runJobs() {
        var batch = queue.withLock { state -> [UnownedJob] in
            let taken = state.jobs
            state.jobs = state.spare
            state.spare = []
            return taken
        }
        let me = asUnownedTaskExecutor()
        for job in batch { job.runSynchronously(on: me) }
        batch.removeAll(keepingCapacity: true) // unique again here: keeps its storage
        let again = queue.withLock { state -> Bool in
            if state.spare.capacity < batch.capacity { swap(&state.spare, &batch) } // reused next burst
            if state.jobs.isEmpty {
                state.scheduled = false
                return false
            }
            return true
        }
        if again { post() }
    }
}

/// `courier_work_fn` of ``EngineTaskExecutor``: runs the queued jobs on the worker.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
private let runWorkerJobs: courier_work_fn = { user in
    Unmanaged<EngineTaskExecutor>.fromOpaque(user!).takeUnretainedValue().runJobs()
}

/// The jobs of an ``EngineTaskExecutor`` waiting for the worker.
struct WorkerJobs {
    var jobs: [UnownedJob] = []
    /// An emptied array whose storage the next batch reuses (no allocation per burst).
    var spare: [UnownedJob] = []
    /// A post is pending or the worker is running the queue: enqueue need not post.
    var scheduled = false
}

final class WorkerJobQueue: Locked<WorkerJobs> {}

extension Engine {
    /// An executor that runs tasks on this engine's worker thread, where its completions run: a
    /// task that prefers it (`withTaskExecutorPreference(engine.taskExecutor) { ... }`) sends,
    /// is resumed by its response and sends again without changing thread. See
    /// ``EngineTaskExecutor`` for what may run there.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
    public var taskExecutor: EngineTaskExecutor {
        unsafeDowncast(executorBox.get { EngineTaskExecutor(handle: handle, lifecycle: lifecycle) },
                       to: EngineTaskExecutor.self)
    }
}

/// Holds an engine's ``EngineTaskExecutor``, made on first use (a stored property cannot carry the
/// executor's availability).
final class ExecutorBox: Locked<AnyObject?> {
    func get(_ make: () -> AnyObject) -> AnyObject {
        withLock { box in
            if let made = box { return made }
            let made = make()
            box = made
            return made
        }
    }
}
