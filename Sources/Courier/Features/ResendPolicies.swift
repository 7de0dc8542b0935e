// ResendPolicies.swift — resend policies (the network-layer design's 重发策略): a policy registered
// under an id decides, per frozen request and replay, whether it may be sent now and whether it
// should be deleted. The decisions are the C core's (`courier_resend_policy_add`); this file only
// translates a Swift policy into the two C callbacks.

import Foundation
internal import CCore

// MARK: - Codes

extension CourierError.Code {
    /// A freezable request names a resend policy its engine does not have.
    public static let resendPolicyUnknown = CourierError.Code(COURIER_E_RESEND_POLICY_UNKNOWN)
    /// A frozen request's resend policy deleted it (its recorded outcome).
    public static let deletedByPolicy = CourierError.Code(COURIER_E_DELETED_BY_POLICY)
}

// MARK: - Policies

/// The policies every engine has, under reserved ids (`courier_resend_policy_add` refuses ids
/// starting "courier.").
public enum BuiltinResendPolicy: String, Sendable, Hashable, CaseIterable {
    /// Sent whenever due (at open, when the network is back, on backoff timers): ``FreezePolicy/auto``'s.
    case auto = "courier.auto"
    /// Only when the app resends or replays with `manual: true`: ``FreezePolicy/manual``'s.
    case manual = "courier.manual"
    /// Sent only while the reachability says online ("send when the network is back").
    case online = "courier.online"
    /// Sent whenever due and dropped once the freeze has expired (the design's rule; decides as
    /// `auto` does).
    case expire = "courier.expire"
    /// Sent only by an engine opened after the request was frozen and last tried ("resend at the
    /// next start").
    case start = "courier.start"
}

/// A resend policy (HTNetworking's `PolicyObject`): asked before each automatic replay of a frozen
/// request that names it, off the journal's transaction, on the engine's journal or worker thread.
/// `canDelete` is asked first; an expired request is removed whatever the policy says.
public protocol ResendPolicy: Sendable {
    /// Whether the request may be sent now.
    /// - Parameters:
    ///   - request: The frozen request (its attempts, last code and status, age, body, ...).
    ///   - age: The time since it was frozen, in seconds.
    ///   - reachability: The engine's view of the network now.
    /// - Returns: true to send it; false keeps it for a later replay.
    func canSend(_ request: FrozenRequest, age: TimeInterval, reachability: ReachabilityStatus) -> Bool
    /// Whether the request should be deleted instead (never sent again).
    /// - Parameters:
    ///   - request: The frozen request.
    ///   - age: The time since it was frozen, in seconds.
    ///   - reachability: The engine's view of the network now.
    /// - Returns: true to delete it.
    func canDelete(_ request: FrozenRequest, age: TimeInterval, reachability: ReachabilityStatus) -> Bool
}

extension ResendPolicy {
    /// Default: always send.
    /// - Parameters:
    ///   - request: The frozen request.
    ///   - age: Seconds since it was frozen.
    ///   - reachability: The network now.
    /// - Returns: true.
    public func canSend(_ request: FrozenRequest, age: TimeInterval, reachability: ReachabilityStatus) -> Bool { true }
    /// Default: never delete.
    /// - Parameters:
    ///   - request: The frozen request.
    ///   - age: Seconds since it was frozen.
    ///   - reachability: The network now.
    /// - Returns: false.
    public func canDelete(_ request: FrozenRequest, age: TimeInterval, reachability: ReachabilityStatus) -> Bool {
        false
    }
}

/// A resend policy made of two closures.
public struct ClosureResendPolicy: ResendPolicy {
    let send: @Sendable (FrozenRequest, TimeInterval, ReachabilityStatus) -> Bool
    let delete: @Sendable (FrozenRequest, TimeInterval, ReachabilityStatus) -> Bool

    /// A policy from closures.
    /// - Parameters:
    ///   - canSend: Whether a request may be sent now (default: always).
    ///   - canDelete: Whether it should be deleted (default: never).
    public init(canSend: @escaping @Sendable (FrozenRequest, TimeInterval, ReachabilityStatus) -> Bool = { _, _, _ in true },
                canDelete: @escaping @Sendable (FrozenRequest, TimeInterval, ReachabilityStatus) -> Bool = { _, _, _ in false }) {
        send = canSend
        delete = canDelete
    }

    /// Asks the `canSend` closure.
    /// - Parameters:
    ///   - request: The frozen request.
    ///   - age: Seconds since it was frozen.
    ///   - reachability: The network now.
    /// - Returns: The closure's answer.
    public func canSend(_ request: FrozenRequest, age: TimeInterval, reachability: ReachabilityStatus) -> Bool {
        send(request, age, reachability)
    }

    /// Asks the `canDelete` closure.
    /// - Parameters:
    ///   - request: The frozen request.
    ///   - age: Seconds since it was frozen.
    ///   - reachability: The network now.
    /// - Returns: The closure's answer.
    public func canDelete(_ request: FrozenRequest, age: TimeInterval, reachability: ReachabilityStatus) -> Bool {
        delete(request, age, reachability)
    }
}

/// The box behind one registration (`user` of both callbacks). Immutable.
final class ResendPolicyBox: @unchecked Sendable {
    let policy: any ResendPolicy
    init(_ policy: any ResendPolicy) { self.policy = policy }
}

private func policyArguments(_ frozen: OpaquePointer?, _ age: Int64, _ reach: courier_reachability,
                             _ user: UnsafeMutableRawPointer?) -> (ResendPolicyBox, FrozenRequest, TimeInterval, ReachabilityStatus)? {
    guard let frozen, let user else { return nil }
    let box = Unmanaged<ResendPolicyBox>.fromOpaque(user).takeUnretainedValue()
    return (box, FrozenRequest(frozen), TimeInterval(age) / 1000, ReachabilityStatus(cValue: Int32(bitPattern: reach.rawValue)))
}

private let canSendTrampoline: courier_resend_policy_fn = { frozen, age, reach, user in
    guard let (box, request, seconds, status) = policyArguments(frozen, age, reach, user) else { return 1 }
    return box.policy.canSend(request, age: seconds, reachability: status) ? 1 : 0
}

private let canDeleteTrampoline: courier_resend_policy_fn = { frozen, age, reach, user in
    guard let (box, request, seconds, status) = policyArguments(frozen, age, reach, user) else { return 0 }
    return box.policy.canDelete(request, age: seconds, reachability: status) ? 1 : 0
}

// MARK: - Registration

extension FrozenRequests {
    /// Registers a resend policy under an id (`courier_resend_policy_add`), replacing one registered
    /// under it before. Requests naming the id (``Request/resendPolicy(_:)-(String)``) are then asked about
    /// by this engine's replays.
    /// - Parameters:
    ///   - id: 1 to 64 of `A-Z a-z 0-9 - . _ ~ : @ + =`, not starting "courier.".
    ///   - policy: The policy.
    /// - Throws: ``CourierError`` (``CourierError/Code/invalidArgument`` for a bad or reserved id,
    ///   ``CourierError/Code/closed``).
    public func addResendPolicy(_ id: String, _ policy: some ResendPolicy) throws {
        guard engine.enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { engine.leave() }
        var error = courier_error()
        let box = Unmanaged.passRetained(ResendPolicyBox(policy)).toOpaque()
        // On failure the C core has already released the box through user_free.
        let rc = courier_resend_policy_add(engine.handle, id, canSendTrampoline, canDeleteTrampoline, box, releaseBox, &error)
        if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error, context: "resend policy '\(id)'") }
    }

    /// Removes the resend policy registered under `id`; requests naming it are then kept by this
    /// engine (reported as ``FrozenEvent/Kind/policyUnknown``).
    /// - Parameter id: The id.
    /// - Returns: Whether one was registered.
    /// - Throws: ``CourierError`` (``CourierError/Code/invalidArgument`` for a reserved id).
    @discardableResult
    public func removeResendPolicy(_ id: String) throws -> Bool {
        guard engine.enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { engine.leave() }
        var error = courier_error()
        let rc = courier_resend_policy_remove(engine.handle, id, &error)
        if rc == COURIER_E_NOT_FOUND.rawValue { return false }
        if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error, context: "resend policy '\(id)'") }
        return true
    }
}

extension Request {
    /// Names the resend policy of this request when it is frozen (`courier_request_set_resend_policy`);
    /// the id is written in its journal record. Sending fails with
    /// ``CourierError/Code/resendPolicyUnknown`` when the engine has no policy under it.
    /// - Parameter id: A registered policy's id, or a ``BuiltinResendPolicy``'s raw value.
    /// - Returns: The changed request.
    public func resendPolicy(_ id: String) -> Request { adding(_ResendPolicyOption(id: id)) }

    /// Names one of the built-in resend policies.
    /// - Parameter policy: The built-in policy.
    /// - Returns: The changed request.
    public func resendPolicy(_ policy: BuiltinResendPolicy) -> Request { resendPolicy(policy.rawValue) }
}

struct _ResendPolicyOption: RequestOption {
    let id: String
    func apply(to request: OpaquePointer) throws {
        var error = courier_error()
        let rc = courier_request_set_resend_policy(request, id, &error)
        if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error, context: "resendPolicy '\(id)'") }
    }
}
