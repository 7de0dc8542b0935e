// LoggingSwiftLog.swift — a bridge from an engine's log lines to swift-log (apple/swift-log).
// Compiled only when the package depends on swift-log (the `Logging` module); otherwise empty.

#if canImport(Logging)
import Foundation
import Logging

extension LogSink {
    /// A sink that hands each line to a swift-log `Logger`: the level mapped one to one (off
    /// never happens), the line's "message" as the message, and every other key of the JSON line
    /// as metadata (strings as they are, numbers and booleans as their text).
    /// - Parameters:
    ///   - logger: The logger.
    ///   - level: The most verbose level this sink takes (the logger's own level filters too).
    /// - Returns: The sink.
    public static func swiftLog(_ logger: Logger, level: LogLevel = .trace) -> LogSink {
        .handler(level: level) { lineLevel, line in
            var message = line
            var metadata: Logger.Metadata = [:]
            if let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] {
                for (key, value) in object {
                    if key == "message" { message = value as? String ?? message; continue }
                    if key == "level" { continue }
                    metadata[key] = .string(value as? String ?? "\(value)")
                }
            }
            logger.log(level: lineLevel.swiftLogLevel, "\(message)", metadata: metadata)
        }
    }
}

extension LogLevel {
    /// The swift-log level with the same meaning.
    public var swiftLogLevel: Logger.Level {
        switch self {
        case .off, .error: return .error
        case .warning: return .warning
        case .info: return .info
        case .debug: return .debug
        case .trace: return .trace
        }
    }

    /// The Courier level that lets through what a swift-log level does.
    /// - Parameter level: A swift-log level.
    public init(_ level: Logger.Level) {
        switch level {
        case .trace: self = .trace
        case .debug: self = .debug
        case .info, .notice: self = .info
        case .warning: self = .warning
        case .error, .critical: self = .error
        }
    }
}
#endif
