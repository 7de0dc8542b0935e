// Logging.swift — an engine's log (log.c): its level, its sinks (standard error, a rotating file,
// a closure), fields added to every line, and how URLs are redacted. Every line is one JSON
// object made by the C core; this file only hands the settings over.

import Foundation
internal import CCore

// MARK: - Levels

/// How much an engine logs. Each level includes the ones before it.
public enum LogLevel: Int32, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// Nothing.
    case off = 0
    /// Failures without a response (network errors, timeouts).
    case error = 1
    /// Failures with a response (HTTP status >= 400, a rejected result), retries, frozen requests.
    case warning = 2
    /// One line per finished request (the default).
    case info = 3
    /// Also when a request is queued and when it starts on the wire, and cache hits.
    case debug = 4
    /// Also transfer progress.
    case trace = 5

    /// Orders levels from ``off`` to ``trace``.
    /// - Parameters:
    ///   - lhs: A level.
    ///   - rhs: Another level.
    /// - Returns: Whether `lhs` is less verbose.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    /// "off", "error", "warning", "info", "debug" or "trace", as in the JSON lines.
    public var description: String { String(cString: courier_log_level_name(rawValue)) }

    var cValue: courier_log_level { courier_log_level(rawValue: UInt32(rawValue)) }
}

/// How URLs appear in log lines (event monitors always see the full URL). User information
/// (`user:password@`) is always written as `***`.
public enum LogRedaction: Sendable, Hashable {
    /// Query values whose names look secret (token, key, password, secret, auth, session, sig,
    /// code, ...) and the names given to ``Engine/redactLogParameter(_:)`` become `***`. The default.
    case secrets
    /// Every query value becomes `***`.
    case allQueryValues
    /// Only user information is hidden.
    case userInfoOnly

    var cValue: courier_log_redaction {
        switch self {
        case .secrets: return COURIER_LOG_REDACT_SECRETS
        case .allQueryValues: return COURIER_LOG_REDACT_QUERY
        case .userInfoOnly: return COURIER_LOG_REDACT_NONE
        }
    }
}

// MARK: - Components

/// The parts of the engine that write lines of their own, each with its own level
/// (`courier_log_component`; HTNetworking's per-module levels). A line names its part under
/// "component".
public enum LogComponent: Int32, Sendable, Hashable, CaseIterable {
    /// A request's trip: will_send, did_send, progress, finished.
    case transport = 0
    /// The cache's decisions (cache_lookup, cache_store, from_cache).
    case cache = 1
    /// Frozen requests: journal_frozen, journal_replay, journal_resent, journal_expired, journal_policy.
    case journal = 2
    /// Requests that failed in JSON, mapping, envelope or validation.
    case mapping = 3
    /// Retries and the frequency guard.
    case scheduling = 4

    var cValue: courier_log_component { courier_log_component(rawValue: UInt32(rawValue)) }
}

/// When a file sink starts a new file besides size (`courier_log_rotation`).
public enum LogRotation: Int32, Sendable, Hashable, CaseIterable {
    /// Only by size.
    case size = 0
    /// Also when the day changes (UTC, on the engine's clock).
    case daily = 1

    var cValue: courier_log_rotation { courier_log_rotation(rawValue: UInt32(rawValue)) }
}

// MARK: - Sinks

/// Where an engine's lines go. Each sink has its own level, below the engine's.
public struct LogSink: Sendable {
    /// The C core's default size of one log file before it rotates (1 MiB;
    /// `COURIER_SETTING_LOG_FILE_MAX_BYTES`).
    public static var defaultFileMaxBytes: Int64 { CoreDefaults.value(COURIER_SETTING_LOG_FILE_MAX_BYTES) }
    /// The C core's default count of log files kept (5; `COURIER_SETTING_LOG_FILE_MAX_FILES`).
    public static var defaultFileMaxFiles: Int { Int(CoreDefaults.value(COURIER_SETTING_LOG_FILE_MAX_FILES)) }

    enum Kind: Sendable {
        case standardError
        case file(path: String, maxBytes: Int64, maxFiles: Int, rotation: LogRotation)
        case handler(@Sendable (LogLevel, String) -> Void)
    }

    let kind: Kind
    let level: LogLevel

    /// Standard error, one line per record.
    /// - Parameter level: The most verbose level this sink takes.
    /// - Returns: The sink.
    public static func standardError(level: LogLevel = .trace) -> LogSink {
        LogSink(kind: .standardError, level: level)
    }

    /// A file, appended to (created with mode 0600), rotated by size (HTNetworking's
    /// DDFileLogger settings, HLNetworking's local log): before a line would take it past
    /// `maxBytes`, `path` becomes `path.1`, `path.1` becomes `path.2`, ..., and the oldest beyond
    /// `maxFiles` files is deleted.
    /// - Parameters:
    ///   - path: The file's path.
    ///   - maxBytes: The largest size of one file (0: never rotate).
    ///   - maxFiles: How many files to keep, the current one included (>= 1).
    ///   - level: The most verbose level this sink takes.
    /// - Returns: The sink.
    public static func file(_ path: String, maxBytes: Int64 = LogSink.defaultFileMaxBytes,
                            maxFiles: Int = LogSink.defaultFileMaxFiles,
                            level: LogLevel = .trace) -> LogSink {
        LogSink(kind: .file(path: path, maxBytes: maxBytes, maxFiles: maxFiles, rotation: .size), level: level)
    }

    /// A file rotated by size and, with ``LogRotation/daily``, also when a line is written on
    /// another day (UTC, on the engine's clock) than the file's first line
    /// (`courier_log_add_rotating_file`).
    /// - Parameters:
    ///   - path: The file's path.
    ///   - maxBytes: The largest size of one file (0: no size limit).
    ///   - maxFiles: How many files to keep, the current one included (>= 1).
    ///   - rotation: When to start a new file besides size.
    ///   - level: The most verbose level this sink takes.
    /// - Returns: The sink.
    public static func file(_ path: String, maxBytes: Int64 = LogSink.defaultFileMaxBytes,
                            maxFiles: Int = LogSink.defaultFileMaxFiles, rotation: LogRotation,
                            level: LogLevel = .trace) -> LogSink {
        LogSink(kind: .file(path: path, maxBytes: maxBytes, maxFiles: maxFiles, rotation: rotation), level: level)
    }

    /// A closure given each line: its level and the JSON object text (no newline). It runs on the
    /// thread where the line was made (usually the engine's worker thread), possibly on several
    /// threads at once: keep it quick, and never close the engine from it.
    /// - Parameters:
    ///   - level: The most verbose level this sink takes.
    ///   - handler: Receives each line.
    /// - Returns: The sink.
    public static func handler(level: LogLevel = .trace,
                               _ handler: @escaping @Sendable (LogLevel, String) -> Void) -> LogSink {
        LogSink(kind: .handler(handler), level: level)
    }
}

/// The id of a sink added to an engine, for ``Engine/removeLogSink(_:)``.
public struct LogSinkID: Hashable, Sendable {
    /// The C core's id.
    public let rawValue: UInt64
}

/// An engine's whole logging set-up, applied at once by ``Engine/configureLogging(_:)``.
public struct LoggingConfiguration: Sendable {
    /// The engine's level.
    public var level: LogLevel
    /// The sinks.
    public var sinks: [LogSink]
    /// Fields added to every line (for example app name, version, channel).
    public var fields: [String: String]
    /// How URLs are written.
    public var redaction: LogRedaction
    /// More query parameter names whose values are hidden under ``LogRedaction/secrets``.
    public var redactedParameters: [String]

    /// A set-up.
    /// - Parameters:
    ///   - level: The engine's level.
    ///   - sinks: The sinks.
    ///   - fields: Fields added to every line.
    ///   - redaction: How URLs are written.
    ///   - redactedParameters: More secret parameter names.
    public init(level: LogLevel = .info, sinks: [LogSink] = [], fields: [String: String] = [:],
                redaction: LogRedaction = .secrets, redactedParameters: [String] = []) {
        self.level = level
        self.sinks = sinks
        self.fields = fields
        self.redaction = redaction
        self.redactedParameters = redactedParameters
    }
}

/// A closure sink's box (`user` of `courier_log_add_callback`). Immutable.
final class LogHandlerBox: @unchecked Sendable {
    let handler: @Sendable (LogLevel, String) -> Void
    init(_ handler: @escaping @Sendable (LogLevel, String) -> Void) { self.handler = handler }
}

/// `courier_log_fn`.
private let logTrampoline: courier_log_fn = { level, line, length, user in
    guard let line, let user else { return }
    let box = Unmanaged<LogHandlerBox>.fromOpaque(user).takeUnretainedValue()
    let text = String(decoding: UnsafeRawBufferPointer(start: line, count: length), as: UTF8.self)
    box.handler(LogLevel(rawValue: Int32(level.rawValue)) ?? .info, text)
}

// MARK: - Engine

extension Engine {
    /// The engine's level: lines more verbose are not made, whatever the sinks take. Default
    /// ``LogLevel/info``. Any thread.
    public var logLevel: LogLevel {
        get {
            guard enter() else { return .off }
            defer { leave() }
            return LogLevel(rawValue: courier_log_get_level(handle)) ?? .info
        }
        set {
            guard enter() else { return }
            defer { leave() }
            _ = courier_log_set_level(handle, newValue.cValue)
        }
    }

    /// Sets one component's level while the engine runs (setting the engine's `logLevel` sets every
    /// component's).
    /// - Parameters:
    ///   - level: The level.
    ///   - component: The component.
    public func setLogLevel(_ level: LogLevel, for component: LogComponent) {
        guard enter() else { return }
        defer { leave() }
        _ = courier_log_set_component_level(handle, component.cValue, level.cValue, nil)
    }

    /// One component's level.
    /// - Parameter component: The component.
    /// - Returns: Its level (``LogLevel/off`` once the engine is closed).
    public func logLevel(for component: LogComponent) -> LogLevel {
        guard enter() else { return .off }
        defer { leave() }
        var level = courier_log_level(rawValue: 0)
        _ = courier_log_get_component_level(&level, handle, component.cValue, nil)
        return LogLevel(rawValue: Int32(level.rawValue)) ?? .info
    }

    /// Applies a whole logging set-up: the level, the redaction, the fields and the sinks (added
    /// to any sinks already there).
    /// - Parameter logging: The set-up.
    /// - Returns: The ids of the sinks added, in order.
    /// - Throws: ``CourierError`` as ``addLogSink(_:)`` and ``setLogField(_:_:)``.
    @discardableResult
    public func configureLogging(_ logging: LoggingConfiguration) throws -> [LogSinkID] {
        logLevel = logging.level
        setLogRedaction(logging.redaction)
        for name in logging.redactedParameters { try redactLogParameter(name) }
        for (name, value) in logging.fields.sorted(by: { $0.key < $1.key }) { try setLogField(name, value) }
        return try logging.sinks.map { try addLogSink($0) }
    }

    /// Adds a sink.
    /// - Parameter sink: The sink.
    /// - Returns: Its id, for ``removeLogSink(_:)``.
    /// - Throws: ``CourierError``: ``CourierError/Code/store`` when the file cannot be opened,
    ///   ``CourierError/Code/invalidArgument`` for a bad size or count, ``CourierError/Code/closed``.
    @discardableResult
    public func addLogSink(_ sink: LogSink) throws -> LogSinkID {
        guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { leave() }
        var id: UInt64 = 0
        var rc: Int32
        var detail = courier_error()
        switch sink.kind {
        case .standardError:
            rc = courier_log_add_stderr(&id, handle, sink.level.cValue)
        case .file(let path, let maxBytes, let maxFiles, let rotation):
            guard maxFiles >= 1, maxFiles <= Int(Int32.max) else {
                throw CourierError(.invalidArgument, message: "maxFiles must be at least 1")
            }
            rc = courier_log_add_rotating_file(&id, handle, sink.level.cValue, path, maxBytes, Int32(maxFiles),
                                               rotation.cValue, &detail)
        case .handler(let handler):
            let box = Unmanaged.passRetained(LogHandlerBox(handler)).toOpaque()
            // On failure the C core has already released the box through user_free.
            rc = courier_log_add_callback(&id, handle, sink.level.cValue, logTrampoline, box, releaseBox)
        }
        guard rc == COURIER_OK.rawValue else { throw CourierError(code: rc, detail: &detail, context: "log sink") }
        return LogSinkID(rawValue: id)
    }

    /// Removes a sink; a line being written on another thread may still reach it.
    /// - Parameter id: The id ``addLogSink(_:)`` returned.
    /// - Returns: Whether it was there.
    @discardableResult
    public func removeLogSink(_ id: LogSinkID) -> Bool {
        guard enter() else { return false }
        defer { leave() }
        return courier_log_remove_sink(handle, id.rawValue) == COURIER_OK.rawValue
    }

    /// Sets a field added to every line of this engine (nil removes it).
    /// - Parameters:
    ///   - name: The JSON key; not one of the keys the engine writes itself ("time", "level", ...).
    ///   - value: The value, or nil.
    /// - Throws: ``CourierError/Code/invalidArgument`` for a reserved or empty name.
    public func setLogField(_ name: String, _ value: String?) throws {
        guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { leave() }
        let rc = withOptionalCString(value) { courier_log_set_field(handle, name, $0) }
        try CourierError.check(rc, "log field '\(name)'")
    }

    /// Chooses how URLs are written in log lines.
    /// - Parameter redaction: The mode.
    public func setLogRedaction(_ redaction: LogRedaction) {
        guard enter() else { return }
        defer { leave() }
        _ = courier_log_set_redaction(handle, redaction.cValue)
    }

    /// Hides the values of one more query parameter (exact name, case-insensitive) under
    /// ``LogRedaction/secrets``.
    /// - Parameter name: The parameter name.
    /// - Throws: ``CourierError/Code/invalidArgument`` for an empty name.
    public func redactLogParameter(_ name: String) throws {
        guard enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { leave() }
        try CourierError.check(courier_log_redact_param(handle, name), "redacted parameter '\(name)'")
    }

    /// Writes a line of the app's own to the engine's sinks (HLNetworking's custom log info).
    /// - Parameters:
    ///   - level: The line's level (not ``LogLevel/off``).
    ///   - message: The message.
    ///   - event: The line's "event" value.
    public func log(_ level: LogLevel, _ message: String, event: String = "app") {
        guard level != .off, enter() else { return }
        defer { leave() }
        _ = courier_log_write(handle, level.cValue, event, message)
    }
}
