// RequestDelegate.swift — completion by delegate, for code written in the seeds' style
// (HTNetworking's `requestDelegate` with `htRequestFinished:` / `htRequestFailed:`).

// MARK: - RequestDelegate

/// Receives the outcome of requests sent with `engine.send(_:delegate:)`.
///
/// The engine holds the delegate **weakly**, as HTNetworking did: keep it alive yourself for as
/// long as you want its answers; a delegate that is gone when a request completes is simply not
/// called. Methods run on the engine's worker thread: keep them quick, hop to your own queue or
/// actor for real work, and never close the engine from them.
public protocol RequestDelegate: AnyObject, Sendable {
    /// A request finished with a response the engine considers a success.
    /// - Parameters:
    ///   - response: The response.
    ///   - id: The id the send returned.
    func requestFinished(_ response: Response, id: RequestID)

    /// A request failed (HTTP status >= 400, a validator's "no", a network failure, a
    /// cancellation, ...).
    /// - Parameters:
    ///   - error: What went wrong; the response is attached for HTTP status and invalid result.
    ///   - id: The id the send returned (``RequestID/invalid`` if it failed before being sent).
    func requestFailed(_ error: CourierError, id: RequestID)
}
