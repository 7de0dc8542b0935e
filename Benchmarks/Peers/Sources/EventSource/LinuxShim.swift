// Not part of mattt/EventSource (see NOTICE.md): swift-corelibs-foundation has no
// URLSession.bytes(for:delegate:), which the EventSource actor calls; this stands in for it so that
// the module builds on Linux. It always throws: on Linux, feed `AsyncSequence.events` instead.
#if canImport(FoundationNetworking)
import Foundation
import FoundationNetworking

extension URLSession {
    func bytes(for request: URLRequest, delegate: (any URLSessionTaskDelegate)?) async throws
        -> (AsyncThrowingStream<UInt8, any Error>, URLResponse)
    {
        throw URLError(.unsupportedURL)
    }
}
#endif
