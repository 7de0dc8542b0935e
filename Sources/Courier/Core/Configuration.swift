// Configuration.swift — what an engine is opened with: base URL, defaults, limits, TLS, store.
// Values only; the C core checks them when the engine opens and decides what they mean.

internal import CCore

// MARK: - BodyEncoding

/// How the parameters of a request that carries them in its body (POST, PUT, PATCH, other
/// methods without a raw body) are encoded.
public enum BodyEncoding: Sendable, Hashable {
    /// `application/x-www-form-urlencoded` (the default).
    case form
    /// `application/json`: an object whose values are the parameter strings.
    case json

    var cValue: courier_body_encoding {
        switch self {
        case .form: return COURIER_BODY_FORM
        case .json: return COURIER_BODY_JSON
        }
    }
}

// MARK: - Configuration

/// The settings an ``Engine`` is opened with. The engine copies them at open; changing a
/// configuration later does not change an open engine.
public struct Configuration: Sendable {
    /// The base URL that relative request paths are joined to (http or https; may end with a
    /// path). Exactly one `/` is put between base and path.
    public var baseURL: String?
    /// Headers added to every request unless the request sets the same name.
    public var headers: HTTPHeaders
    /// Parameters added to every request unless it opts out (``Request/useDefaultParameters(_:)``).
    public var parameters: [(name: String, value: String)]
    /// Default timeout of a whole request, in seconds (> 0). Default ``defaultTimeout`` (60, the C core's).
    public var timeout: Double
    /// The C core's default timeout of a whole request, in seconds (`COURIER_SETTING_TIMEOUT_MS`).
    public static var defaultTimeout: Double { CoreDefaults.seconds(COURIER_SETTING_TIMEOUT_MS) }
    /// The User-Agent header; nil means "Courier/<version>".
    public var userAgent: String?
    /// Most requests (and connections) in flight to one host (>= 1). Default 5, as in the C core
    /// (OkHttp's default). Requests over the limit wait in the engine's queue, by priority.
    /// WebSockets are not held to it: each has its own connection besides.
    public var maxConnectionsPerHost: Int
    /// Most connections in all (>= 1). Default 64.
    public var maxConnections: Int
    /// How parameters that go in a body are encoded. Default ``BodyEncoding/form``.
    public var bodyEncoding: BodyEncoding
    /// Largest response body accepted, in bytes (> 0); larger ones fail with
    /// ``CourierError/Code/tooLarge``. Default 64 MiB.
    public var maxResponseBytes: Int64
    /// A PEM file of CA certificates to verify servers with, instead of the system's.
    public var caFile: String?
    /// Pins the server's public key: "sha256//BASE64HASH" (several separated by `;`) or a path to
    /// a PEM/DER public key. A mismatch fails with ``CourierError/Code/pinning``.
    public var pinnedPublicKey: String?
    /// For development only: true turns certificate and host name verification off.
    public var insecure: Bool
    /// The directory of the engine's store (cache, journal), created at open. nil (the default)
    /// means the durable default store named by ``appID`` (see there), or with ``temporaryStore``
    /// a private temporary directory removed when the engine closes.
    public var storeDirectory: String?
    /// The app's id ("com.example.notes", "notes"), naming the default store where the platform
    /// keeps an app's data, so frozen requests and the cache outlive the engine and the process:
    /// `$XDG_DATA_HOME/<app id>/courier` (else `~/.local/share/<app id>/courier`) on Linux,
    /// `~/Library/Application Support/<app id>/courier` on Darwin. nil (the default) means the
    /// program's name. One path component: not empty, no `/`, not `.` or `..`
    /// (``CourierError/Code/invalidArgument`` at open). Unused when ``storeDirectory`` is set.
    public var appID: String?
    /// true keeps the store, when ``storeDirectory`` is nil, in a private temporary directory
    /// removed when the engine closes, instead of the default store: for tests, demos and
    /// one-shot tools. Frozen requests then do not outlive the engine, and each freeze logs a
    /// warning on the engine's logger. Default false.
    public var temporaryStore: Bool
    /// true opens only a store that exists: when the store directory (``storeDirectory``, or the
    /// default store of ``appID``) does not exist, opening the engine fails with
    /// ``CourierError/Code/store`` ("no store at ...") and creates nothing. For tools and scripts
    /// that inspect or clean a store and must not make one from a typo. Default false (the
    /// directory is created at open). No effect with ``temporaryStore``.
    public var storeMustExist: Bool
    /// The most unread body a streamed response (``Engine/bytes(for:)-(Request)``) holds before its
    /// transfer is paused until the reader catches up, in bytes (at least 16 KiB). nil (the
    /// default) means the C core's default, 1 MiB (`COURIER_SETTING_STREAM_BUFFER_BYTES`).
    public var streamBufferBytes: Int64?
    /// A validator run on every response of requests that have none of their own; returning
    /// false fails the request with ``CourierError/Code/invalidResult``. Runs on the engine's
    /// worker thread: keep it quick, and never close the engine from it.
    public var validator: (@Sendable (Response) -> Bool)?
    /// How failed requests are retried unless they set their own rule. Default ``RetryPolicy/disabled``.
    public var retry: RetryPolicy
    /// HLNetworking's frequent-request guard, in seconds: a request identical to one sent less
    /// than this long ago (same method, URL, header lines and body) is refused with
    /// ``CourierError/Code/tooFrequent`` and nothing is sent. 0 (the default) turns it off.
    public var frequentGuard: Double
    /// Deprecated name of ``frequentGuard``.
    @available(*, deprecated, renamed: "frequentGuard")
    public var frequentGuardWindow: Double {
        get { frequentGuard }
        set { frequentGuard = newValue }
    }

    /// Settings that feature extensions (cache, journal, ...) apply to the C configuration, in
    /// order, after the ones above.
    var options: [any ConfigurationOption] = []

    /// A configuration with the defaults.
    /// - Parameter baseURL: The base URL that relative paths are joined to, or nil.
    public init(baseURL: String? = nil) {
        self.baseURL = baseURL
        self.headers = []
        self.parameters = []
        // The C core's defaults, read, never restated (`courier_setting_default`).
        self.timeout = Configuration.defaultTimeout
        self.userAgent = nil
        self.maxConnectionsPerHost = Int(CoreDefaults.value(COURIER_SETTING_MAX_CONNECTIONS_PER_HOST))
        self.maxConnections = Int(CoreDefaults.value(COURIER_SETTING_MAX_CONNECTIONS))
        self.bodyEncoding = .form
        self.maxResponseBytes = CoreDefaults.value(COURIER_SETTING_MAX_RESPONSE_BYTES)
        self.caFile = nil
        self.pinnedPublicKey = nil
        self.insecure = false
        self.storeDirectory = nil
        self.appID = nil
        self.temporaryStore = false
        self.storeMustExist = false
        self.streamBufferBytes = nil
        self.validator = nil
        self.retry = .disabled
        self.frequentGuard = 0
    }
}

// MARK: - Extension points

/// A setting a feature applies to the C configuration (`courier_config *`) before the engine
/// opens. Features in `Features/` add their settings to ``Configuration`` through this.
protocol ConfigurationOption: Sendable {
    /// Applies the setting.
    /// - Parameter config: The `courier_config *` being built.
    /// - Throws: ``CourierError`` if the C core refuses it.
    func apply(to config: OpaquePointer) throws
}

/// One named setting a feature keeps in ``Configuration``'s option list, so that a feature's
/// setting is a plain settable property (``Configuration/cacheMaxBytes``, ...): setting it again
/// replaces it, setting nil removes it (the C core's default then applies).
struct _NamedSetting: ConfigurationOption {
    let name: String
    let value: any Sendable
    let set: @Sendable (OpaquePointer) throws -> Void
    func apply(to config: OpaquePointer) throws { try set(config) }
}

extension Configuration {
    /// The value of the named setting, or nil when it is not set.
    /// - Parameter name: The setting's name (its property's).
    /// - Returns: The value.
    func setting<Value>(_ name: String, as type: Value.Type = Value.self) -> Value? {
        options.lazy.compactMap { $0 as? _NamedSetting }.last { $0.name == name }?.value as? Value
    }

    /// Replaces the named setting (nil removes it).
    /// - Parameters:
    ///   - name: The setting's name (its property's).
    ///   - value: The value, or nil for the C core's default.
    ///   - apply: Applies the value to the C configuration.
    mutating func setSetting<Value: Sendable>(_ name: String, _ value: Value?,
                                              apply: @escaping @Sendable (OpaquePointer, Value) throws -> Void) {
        options.removeAll { ($0 as? _NamedSetting)?.name == name }
        guard let value else { return }
        options.append(_NamedSetting(name: name, value: value, set: { try apply($0, value) }))
    }

    /// A copy changed by `change` (what the deprecated copy-returning setters do).
    /// - Parameter change: Changes the copy.
    /// - Returns: The copy.
    func with(_ change: (inout Configuration) -> Void) -> Configuration {
        var copy = self
        change(&copy)
        return copy
    }

    /// A copy with one more feature setting.
    /// - Parameter option: The setting.
    /// - Returns: The new configuration.
    func adding(_ option: any ConfigurationOption) -> Configuration {
        var copy = self
        copy.options.append(option)
        return copy
    }

    /// Builds the C configuration. The caller frees it with `courier_config_free`.
    /// - Returns: A new `courier_config *`.
    /// - Throws: ``CourierError`` naming the setting the C core refused.
    func makeCConfig() throws -> OpaquePointer {
        var created: OpaquePointer?
        try CourierError.check(courier_config_new(&created), "configuration")
        guard let config = created else { throw CourierError(.noMemory) }
        do {
            if let baseURL {
                try CourierError.check(courier_config_set_base_url(config, baseURL), "baseURL '\(baseURL)'")
            }
            for line in headers {
                try CourierError.check(courier_config_add_header(config, line.name, line.value),
                                       "default header '\(line.name)'")
            }
            for parameter in parameters {
                try CourierError.check(courier_config_add_param(config, parameter.name, parameter.value),
                                       "default parameter '\(parameter.name)'")
            }
            try CourierError.check(courier_config_set_timeout_ms(config, Configuration.milliseconds(timeout)),
                                   "timeout \(timeout)")
            try withOptionalCString(userAgent) {
                try CourierError.check(courier_config_set_user_agent(config, $0), "userAgent")
            }
            try CourierError.check(courier_config_set_max_connections_per_host(config, Int32(clamping: maxConnectionsPerHost)),
                                   "maxConnectionsPerHost \(maxConnectionsPerHost)")
            try CourierError.check(courier_config_set_max_connections(config, Int32(clamping: maxConnections)),
                                   "maxConnections \(maxConnections)")
            try CourierError.check(courier_config_set_body_encoding(config, bodyEncoding.cValue), "bodyEncoding")
            try CourierError.check(courier_config_set_max_response_bytes(config, maxResponseBytes),
                                   "maxResponseBytes \(maxResponseBytes)")
            try withOptionalCString(caFile) { try CourierError.check(courier_config_set_ca_file(config, $0), "caFile") }
            try withOptionalCString(pinnedPublicKey) {
                try CourierError.check(courier_config_set_pinned_public_key(config, $0), "pinnedPublicKey")
            }
            try CourierError.check(courier_config_set_insecure(config, insecure ? 1 : 0), "insecure")
            try withOptionalCString(storeDirectory) {
                try CourierError.check(courier_config_set_store_dir(config, $0), "storeDirectory")
            }
            try withOptionalCString(appID) { try CourierError.check(courier_config_set_app_id(config, $0), "appID") }
            try CourierError.check(courier_config_set_temporary_store(config, temporaryStore ? 1 : 0), "temporaryStore")
            try CourierError.check(courier_config_set_store_must_exist(config, storeMustExist ? 1 : 0), "storeMustExist")
            if let streamBufferBytes {
                try CourierError.check(courier_config_set_stream_buffer_bytes(config, streamBufferBytes), "streamBufferBytes")
            }
            if let validator {
                let box = Unmanaged.passRetained(ValidatorBox(validator)).toOpaque()
                // On failure the C core has already released the box through user_free.
                try CourierError.check(courier_config_set_validator(config, validatorTrampoline, box, releaseBox),
                                       "validator")
            }
            try CourierError.check(retry.withCArguments { courier_config_set_retry(config, $0, $1, $2, $3) }, "retry")
            try CourierError.check(courier_config_set_frequent_guard_ms(config, RetryPolicy.milliseconds(frequentGuard)),
                                   "frequentGuard")
            for option in options { try option.apply(to: config) }
            return config
        } catch {
            courier_config_free(config)
            throw error
        }
    }

    /// Seconds to the C core's whole milliseconds, rounded up so a small positive timeout never
    /// becomes 0; non-positive and non-finite values become 0, which the C core refuses.
    /// - Parameter seconds: A duration in seconds.
    /// - Returns: Milliseconds.
    static func milliseconds(_ seconds: Double) -> Int64 {
        guard seconds > 0, seconds.isFinite else { return 0 }
        return Int64(min((seconds * 1000).rounded(.up), Double(Int64.max / 2)))
    }
}

// MARK: - The C core's defaults

/// The defaults of the C core's settings (`courier_setting_default`): what the facade's own
/// defaults (a configuration's, a default argument's) are read from, never restated.
enum CoreDefaults {
    /// The default of a setting, in its C unit (milliseconds, bytes or a count).
    /// - Parameter setting: The setting.
    /// - Returns: The value.
    static func value(_ setting: courier_setting) -> Int64 {
        var value: Int64 = 0
        _ = courier_setting_default(&value, setting)
        return value
    }

    /// The default of a setting in milliseconds, in seconds.
    /// - Parameter setting: The setting (a `_MS` one).
    /// - Returns: Seconds.
    static func seconds(_ setting: courier_setting) -> Double { Double(value(setting)) / 1000 }
}
