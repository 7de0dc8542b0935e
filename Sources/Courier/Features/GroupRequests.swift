// GroupRequests.swift — batches and chains of requests through structured concurrency:
// `engine.batch([...])`, `engine.chain { ... }`, `engine.ifSucceeds(a, then: b, else: c)` and
// dependent requests (the seeds' flattenMap). Everything is the C core's group (group.c): the
// order, the in-flight limit, fail-fast, stopping a chain, cancelling the rest. This file only
// turns Swift requests and closures into members and the members' results into Swift values.

import Foundation
internal import CCore

// MARK: - Chain steps

/// One step of a chain: a request, or a closure that makes the request from the step before.
///
/// Steps run one after another. A failed step stops the chain (the rest are never sent) unless it
/// is marked ``continuingOnFailure()``. A step whose closure returns nil is skipped.
public struct ChainStep: Sendable {
    enum Source: Sendable {
        case request(Request)
        case build(@Sendable (Result<Response, CourierError>?) throws -> Request?)
    }

    let source: Source
    let continueOnFailure: Bool

    /// A step that sends a fixed request.
    /// - Parameter request: The request.
    /// - Returns: The step.
    public static func send(_ request: Request) -> ChainStep {
        ChainStep(source: .request(request), continueOnFailure: false)
    }

    /// A step made from the previous step's response (the seeds' flattenMap). It is skipped when
    /// there is no response to build from: the previous step failed (and continued) or was skipped.
    /// The closure runs on the engine's worker thread when the step's turn comes; throwing fails
    /// the step with that error.
    /// - Parameter build: Makes the request from the response, or returns nil to skip the step.
    /// - Returns: The step.
    public static func then(_ build: @escaping @Sendable (Response) throws -> Request?) -> ChainStep {
        ChainStep(source: .build { previous in
            guard case .success(let response)? = previous else { return nil }
            return try build(response)
        }, continueOnFailure: false)
    }

    /// A step made from whatever the previous step gave: its response, its error, or nil (this is
    /// the first step, or the previous one was skipped). The closure runs on the engine's worker
    /// thread when the step's turn comes.
    /// - Parameter build: Makes the request, or returns nil to skip the step.
    /// - Returns: The step.
    public static func after(_ build: @escaping @Sendable (Result<Response, CourierError>?) throws -> Request?) -> ChainStep {
        ChainStep(source: .build(build), continueOnFailure: false)
    }

    /// The same step, whose failure does not stop the chain (the next step sees the error).
    /// - Returns: The changed step.
    public func continuingOnFailure() -> ChainStep {
        ChainStep(source: source, continueOnFailure: true)
    }
}

/// Builds the steps of ``Engine/chain(_:)-(()->[ChainStep])``: write requests and steps one per line;
/// `if`, `if/else` and `for` work as in any result builder.
@resultBuilder
public enum ChainBuilder {
    /// A request is a step that sends it.
    public static func buildExpression(_ request: Request) -> [ChainStep] { [.send(request)] }
    /// A step.
    public static func buildExpression(_ step: ChainStep) -> [ChainStep] { [step] }
    /// Several steps.
    public static func buildExpression(_ steps: [ChainStep]) -> [ChainStep] { steps }
    /// Steps in order.
    public static func buildBlock(_ parts: [ChainStep]...) -> [ChainStep] { parts.flatMap { $0 } }
    /// An `if` without `else`.
    public static func buildOptional(_ part: [ChainStep]?) -> [ChainStep] { part ?? [] }
    /// The first branch of an `if/else`.
    public static func buildEither(first part: [ChainStep]) -> [ChainStep] { part }
    /// The second branch of an `if/else`.
    public static func buildEither(second part: [ChainStep]) -> [ChainStep] { part }
    /// A `for` loop.
    public static func buildArray(_ parts: [[ChainStep]]) -> [ChainStep] { parts.flatMap { $0 } }
}

// MARK: - Results

/// What a group of requests gave: each member's result, and the failure that decides the group.
public struct GroupResult: Sendable {
    /// Each member's result, in order. nil for a chain step that was skipped. A member never
    /// sent because the group stopped has ``CourierError/Code/cancelled``.
    public let results: [Result<Response, CourierError>?]
    /// nil when every member succeeded (members that continue on failure are not counted);
    /// otherwise the failure that stopped a chain or a fail-fast batch, the failure with the
    /// lowest index in a plain batch, or ``CourierError/Code/cancelled`` when it was cancelled.
    public let error: CourierError?
    /// The index of the member whose failure is ``error``, if any.
    public let failedIndex: Int?
    /// Errors thrown by Swift code (a step's closure, a customize hook), by member index, so
    /// throwing APIs rethrow the caller's own error.
    let thrown: [Int: any Error]

    /// The responses of the members that succeeded, in order.
    public var responses: [Response] {
        results.compactMap { if case .success(let response)? = $0 { return response } else { return nil } }
    }
}

// MARK: - Engine

extension Engine {
    /// Sends every request (HLNetworking's batch group, YTKNetwork's batch request) and returns
    /// each result, in the order given. Cancelling the calling task cancels every request still
    /// running; the ones not yet started are never sent.
    /// ```swift
    /// let results = await engine.batch([.get("/a"), .get("/b")], maxInFlight: 4)
    /// ```
    /// - Parameters:
    ///   - requests: The requests.
    ///   - failFast: Whether the first failure cancels the rest (they then fail with
    ///     ``CourierError/Code/cancelled``).
    ///   - maxInFlight: At most this many on the wire at once (HLNetworking's maxRequestCount);
    ///     nil for no limit of the batch's own.
    /// - Returns: Each request's response or error.
    public func batch(_ requests: [Request], failFast: Bool = false,
                      maxInFlight: Int? = nil) async -> [Result<Response, CourierError>] {
        let members = requests.map { Member(source: .request($0), continueOnFailure: false) }
        let outcome = await runGroup(mode: COURIER_GROUP_BATCH, members: members, failFast: failFast,
                                     maxInFlight: maxInFlight)
        return outcome.results.map { $0 ?? .failure(CourierError(.internal, message: "a batch member has no result")) }
    }

    /// Sends the requests ``Requestable`` values describe, as ``batch(_:failFast:maxInFlight:)-([Request],_,_)``.
    /// - Parameters:
    ///   - requests: The request descriptions.
    ///   - failFast: Whether the first failure cancels the rest.
    ///   - maxInFlight: At most this many on the wire at once.
    /// - Returns: Each request's response or error.
    public func batch<R: Requestable>(_ requests: [R], failFast: Bool = false,
                                      maxInFlight: Int? = nil) async -> [Result<Response, CourierError>] {
        await batch(requests.map { $0.makeRequest() }, failFast: failFast, maxInFlight: maxInFlight)
    }

    /// Sends the steps one after another (HLNetworking's chain group, YTKNetwork's chain request)
    /// and returns the response of the last step that was sent.
    /// ```swift
    /// let profile = try await engine.chain {
    ///     Request.post("/login").parameter("user", name)
    ///     ChainStep.then { login in .get("/profile").bearer(login.header("X-Token") ?? "") }
    /// }
    /// ```
    /// Cancelling the calling task cancels the step on the wire and sends no more.
    /// - Parameter steps: The steps.
    /// - Returns: The last sent step's response.
    /// - Throws: The error that stopped the chain (a step's own error, or the error its closure
    ///   threw), the last sent step's error, ``CourierError/Code/cancelled``, or
    ///   ``CourierError/Code/notFound`` when no step was sent.
    public func chain(@ChainBuilder _ steps: () -> [ChainStep]) async throws -> Response {
        try await chain(steps())
    }

    /// Sends the steps one after another; see ``chain(_:)-(()->[ChainStep])``.
    /// - Parameter steps: The steps.
    /// - Returns: The last sent step's response.
    /// - Throws: As ``chain(_:)-(()->[ChainStep])``.
    public func chain(_ steps: [ChainStep]) async throws -> Response {
        let outcome = await chainResults(steps)
        if let index = outcome.failedIndex, let thrown = outcome.thrown[index] { throw thrown }
        if let error = outcome.error { throw error }
        guard let last = outcome.results.lastIndex(where: { $0.map { _ in true } ?? false }), let result = outcome.results[last] else {
            throw CourierError(.notFound, message: "no step of the chain was sent")
        }
        if case .failure = result, let thrown = outcome.thrown[last] { throw thrown }
        return try result.get()
    }

    /// Sends the steps one after another and returns every step's result.
    /// - Parameter steps: The steps.
    /// - Returns: Each step's result and the chain's outcome.
    public func chainResults(@ChainBuilder _ steps: () -> [ChainStep]) async -> GroupResult {
        await chainResults(steps())
    }

    /// Sends the steps one after another and returns every step's result.
    /// - Parameter steps: The steps.
    /// - Returns: Each step's result and the chain's outcome.
    public func chainResults(_ steps: [ChainStep]) async -> GroupResult {
        let members = steps.map { Member(source: $0.source, continueOnFailure: $0.continueOnFailure) }
        return await runGroup(mode: COURIER_GROUP_CHAIN, members: members, failFast: false, maxInFlight: nil)
    }

    /// Sends `request`; if it succeeds, sends `then`, else sends `otherwise`
    /// (HTNetworking's `ifRequestSucceed:then:else:`), and returns that second response.
    /// - Parameters:
    ///   - request: The request whose outcome decides.
    ///   - then: Sent when `request` succeeded.
    ///   - otherwise: Sent when `request` failed.
    /// - Returns: The response of `then` or `otherwise`.
    /// - Throws: The error of `then` or `otherwise`; ``CourierError/Code/cancelled``.
    public func ifSucceeds(_ request: Request, then: Request, else otherwise: Request) async throws -> Response {
        try await ifSucceeds(request, then: { _ in then }, else: { _ in otherwise })
    }

    /// Sends `request`, then the request `then` makes from its response, or the one `otherwise`
    /// makes from its error. The closures run on the engine's worker thread.
    /// - Parameters:
    ///   - request: The request whose outcome decides.
    ///   - then: Makes the next request from the response.
    ///   - otherwise: Makes the next request from the error.
    /// - Returns: The second request's response.
    /// - Throws: The second request's error, or what a closure threw; ``CourierError/Code/cancelled``.
    public func ifSucceeds(_ request: Request,
                           then: @escaping @Sendable (Response) throws -> Request,
                           else otherwise: @escaping @Sendable (CourierError) throws -> Request) async throws -> Response {
        try await chain([
            ChainStep.send(request).continuingOnFailure(),
            ChainStep.after { previous in
                switch previous {
                case .success(let response)?: return try then(response)
                case .failure(let error)?: return try otherwise(error)
                case nil: return nil
                }
            },
        ])
    }

    /// Sends `request`, then the request `next` makes from its response (the seeds' flattenMap),
    /// and returns the second response. `next` runs on the engine's worker thread.
    /// - Parameters:
    ///   - request: The first request.
    ///   - next: Makes the dependent request.
    /// - Returns: The dependent request's response.
    /// - Throws: The first or the second request's error, or what `next` threw.
    public func send(_ request: Request, then next: @escaping @Sendable (Response) throws -> Request) async throws -> Response {
        try await chain([.send(request), .then { try next($0) }])
    }

    /// Sends `request`, decodes its model, then sends the request `next` makes from the model
    /// (HTNetworking's flattenMap over a mapped result), and returns the second response.
    /// - Parameters:
    ///   - request: The first request (with its key path, if the model is nested).
    ///   - type: The first response's model type.
    ///   - decoder: The decoder, or nil for the configuration's ``Configuration/modelDecoder``.
    ///   - next: Makes the dependent request from the model.
    /// - Returns: The dependent request's response.
    /// - Throws: Either request's error, a `DecodingError`, or what `next` threw.
    public func send<T: Decodable>(_ request: Request, as type: T.Type, decoder: ModelDecoder? = nil,
                                   then next: @escaping @Sendable (T) throws -> Request) async throws -> Response {
        let keyPath = request.modelKeyPath
        let decoder = modelDecoder(decoder)
        return try await chain([.send(request), .then { response in
            try next(response.decode(T.self, resultPath: keyPath, decoder: decoder))
        }])
    }
}

// MARK: - Running a C group

/// One member as the C group sees it.
struct Member: Sendable {
    let source: ChainStep.Source
    let continueOnFailure: Bool
}

/// The Swift side of one run of a C group: the continuation, and errors Swift code threw.
/// `@unchecked Sendable`: every mutable field is guarded by `lock`.
final class GroupRun: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<GroupResult, Never>?
    private var thrown: [Int: any Error] = [:]

    init(_ continuation: CheckedContinuation<GroupResult, Never>) { self.continuation = continuation }

    /// Keeps an error Swift code threw for member `index`.
    func record(_ error: any Error, at index: Int) { lock.withLock { thrown[index] = error } }

    func thrownError(at index: Int) -> (any Error)? { lock.withLock { thrown[index] } }

    /// Resumes the waiting task, once.
    func finish(_ make: ([Int: any Error]) -> GroupResult) {
        let (continuation, errors) = lock.withLock { () -> (CheckedContinuation<GroupResult, Never>?, [Int: any Error]) in
            defer { self.continuation = nil }
            return (self.continuation, thrown)
        }
        continuation?.resume(returning: make(errors))
    }
}

/// A C group handed to the task-cancellation handler. `@unchecked Sendable`: courier_group_cancel
/// may be called from any thread, and the group outlives the handler (it is freed after the
/// cancellation handler has been removed).
struct GroupPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// A member's source and its run (`user` of its build callback).
final class MemberBox: @unchecked Sendable {
    let run: GroupRun
    let source: ChainStep.Source
    /// The engine that makes requests of its catalogue and routes (Catalog.swift).
    let engine: Engine
    init(run: GroupRun, source: ChainStep.Source, engine: Engine) {
        self.run = run
        self.source = source
        self.engine = engine
    }
}

/// A failed member's error: what Swift threw (as a CourierError), or the C core's detail.
private func memberError(_ group: OpaquePointer, _ index: Int, code: Int32, detail: inout courier_error,
                         response: Response?, run: GroupRun) -> CourierError {
    if let thrown = run.thrownError(at: index) { return CourierError.wrapping(thrown) }
    return CourierError(code: code, detail: &detail, response: response)
}

/// `courier_group_build_fn`: makes the member's Swift request and sends it with
/// `courier_group_submit` (the C request only lives inside `withCRequest`).
private let groupBuild: courier_group_build_fn = { group, index, prevCode, prevResponse, _, user in
    guard let group, let user else { return COURIER_E_INVALID_ARGUMENT.rawValue }
    let box = Unmanaged<MemberBox>.fromOpaque(user).takeUnretainedValue()
    let request: Request?
    switch box.source {
    case .request(let fixed):
        request = fixed
    case .build(let build):
        var previous: Result<Response, CourierError>?
        if index > 0 {
            let response = prevResponse.map { Response(borrowing: $0) }
            if prevCode == COURIER_OK.rawValue {
                previous = response.map { .success($0) }
            } else {
                var detail = courier_error()
                _ = courier_group_result(nil, nil, nil, group, index - 1, &detail)
                previous = .failure(memberError(group, index - 1, code: prevCode, detail: &detail,
                                                response: response, run: box.run))
            }
        }
        do {
            request = try build(previous)
        } catch {
            box.run.record(error, at: index)
            return (error as? CourierError)?.code.rawValue ?? COURIER_E_INVALID_ARGUMENT.rawValue
        }
    }
    guard let request else { return COURIER_OK.rawValue } // skipped
    do {
        try request.withCRequest(on: box.engine) { creq, _ in
            var detail = courier_error()
            let rc = courier_group_submit(group, index, creq, &detail)
            if rc != COURIER_OK.rawValue, let thrown = thrownError(&detail) { box.run.record(thrown, at: index) }
            courier_error_clear(&detail)
        }
    } catch {
        box.run.record(error, at: index) // the C core refused a part of the request
        return (error as? CourierError)?.code.rawValue ?? COURIER_E_INVALID_ARGUMENT.rawValue
    }
    return COURIER_OK.rawValue
}

/// `courier_group_done_fn`: collects every member's result and resumes the task.
private let groupDone: courier_group_done_fn = { group, code, failedIndex, user in
    guard let group, let user else { return }
    let run = Unmanaged<GroupRun>.fromOpaque(user).takeUnretainedValue() // released by user_free
    run.finish { thrown in
        let count = courier_group_count(group)
        var results: [Result<Response, CourierError>?] = []
        results.reserveCapacity(count)
        for index in 0..<count {
            var memberCode: Int32 = 0
            var detail = courier_error()
            _ = courier_group_result(&memberCode, nil, nil, group, index, &detail)
            let response = courier_group_take_response(group, index).map { Response(taking: $0) }
            if memberCode == COURIER_OK.rawValue {
                results.append(response.map { .success($0) })
            } else {
                results.append(.failure(memberError(group, index, code: memberCode, detail: &detail,
                                                    response: response, run: run)))
            }
        }
        var error: CourierError?
        var failed: Int?
        if failedIndex >= 0 && Int(failedIndex) < results.count, case .failure(let e)? = results[Int(failedIndex)] {
            error = e
            failed = Int(failedIndex)
        } else if code != COURIER_OK.rawValue {
            error = CourierError(code: code, detail: nil)
        }
        return GroupResult(results: results, error: error, failedIndex: failed, thrown: thrown)
    }
}

extension Engine {
    /// Runs a C group of `members` and waits for it; cancelling the task cancels the group.
    func runGroup(mode: courier_group_mode, members: [Member], failFast: Bool, maxInFlight: Int?) async -> GroupResult {
        func failedAll(_ error: CourierError) -> GroupResult {
            GroupResult(results: members.map { _ in .failure(error) }, error: error, failedIndex: nil, thrown: [:])
        }
        guard enter() else { return failedAll(CourierError(.closed, message: "the engine is closed")) }
        var created: OpaquePointer?
        let rc = courier_group_new(&created, handle, mode)
        leave()
        guard rc == COURIER_OK.rawValue, let group = created else { return failedAll(CourierError(code: rc, detail: nil)) }
        defer { courier_group_free(group) }
        if failFast { _ = courier_group_set_fail_fast(group, 1) }
        if let maxInFlight, maxInFlight > 0 { _ = courier_group_set_max_in_flight(group, Int32(clamping: maxInFlight)) }

        let cancellable = GroupPointer(group)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<GroupResult, Never>) in
                let run = GroupRun(continuation)
                for member in members {
                    let box = Unmanaged.passRetained(MemberBox(run: run, source: member.source, engine: self)).toOpaque()
                    let flags = member.continueOnFailure ? UInt32(COURIER_GROUP_CONTINUE_ON_FAILURE.rawValue) : 0
                    // On failure the box is already released through user_free.
                    let added = courier_group_add_built(nil, group, groupBuild, box, releaseBox, flags)
                    if added != COURIER_OK.rawValue {
                        run.finish { _ in failedAll(CourierError(code: added, detail: nil)) }
                        return
                    }
                }
                let user = Unmanaged.passRetained(run).toOpaque()
                guard enter() else {
                    Unmanaged<GroupRun>.fromOpaque(user).release()
                    run.finish { _ in failedAll(CourierError(.closed, message: "the engine is closed")) }
                    return
                }
                let started = courier_group_start(group, groupDone, user, releaseBox)
                leave()
                if started != COURIER_OK.rawValue { // user_free already released `user`
                    run.finish { _ in failedAll(CourierError(code: started, detail: nil)) }
                }
            }
        } onCancel: {
            // The group lives until this function returns, so cancelling it here is safe; before
            // start, the C group remembers the cancel and completes at once when started.
            if self.enter() {
                _ = courier_group_cancel(cancellable.pointer)
                self.leave()
            }
        }
    }
}
