// Security.swift — security policies (HLNetworking's HLSecurityPolicyConfig), per engine and per
// request: pinning, the two verification switches, a CA file, a client certificate, certificate
// status (OCSP stapling). A value here;
// the C core (security.c) builds the TLS options from it.

internal import CCore

/// How the server's certificate is pinned (`courier_pinning_mode`).
public enum PinningMode: Sendable, Hashable {
    /// The CA verification alone.
    case none
    /// The server's public key must match a pin: "sha256//BASE64" (several separated by `;`) or a
    /// public key file. A mismatch fails with ``CourierError/Code/pinning``.
    case publicKey(String)
    /// The server's chain must hold one of the certificates of a PEM file (the leaf or a CA): they
    /// are the only trust anchors, whatever ``SecurityPolicy/allowInvalidCertificates`` says.
    case certificate(path: String)
}

/// A security policy: ``Configuration/security`` for every request, ``Request/security(_:)`` for one
/// (replacing the whole of the engine's, for it and its redirects).
public struct SecurityPolicy: Sendable, Hashable {
    /// The pinning. Default ``PinningMode/none``.
    public var pinning: PinningMode
    /// true accepts a certificate that does not verify (self-signed, expired, unknown CA); the name
    /// is still checked unless ``validatesDomainName`` is false. Development only. Default false.
    public var allowInvalidCertificates: Bool
    /// false accepts a certificate that names another host. Default true.
    public var validatesDomainName: Bool
    /// A PEM file of CA certificates to verify servers with, instead of the system's.
    public var caFile: String?
    /// The client certificate for mutual TLS: a PEM file (its key in ``clientKey`` or in the same
    /// file) or a PKCS#12 file (".p12", ".pfx").
    public var clientCertificate: String?
    /// The client certificate's key file, when not in the certificate's file.
    public var clientKey: String?
    /// The password of the client key (or of the PKCS#12 file).
    public var clientKeyPassword: String?
    /// true requires certificate status (OCSP stapling): the server must staple a good OCSP
    /// response for its certificate, else the request fails with ``CourierError/Code/tls`` before
    /// anything is sent (``CourierError/curlCode`` 91). Default false.
    public var requiresCertificateStatus: Bool

    /// A policy; every argument has the C core's default.
    /// - Parameters:
    ///   - pinning: The pinning.
    ///   - allowInvalidCertificates: Accept certificates that do not verify.
    ///   - validatesDomainName: Check the certificate's name.
    ///   - caFile: CA certificates instead of the system's.
    ///   - clientCertificate: A client certificate (PEM or PKCS#12).
    ///   - clientKey: Its key, when in another file.
    ///   - clientKeyPassword: The key's password.
    ///   - requiresCertificateStatus: Require a stapled OCSP response.
    public init(pinning: PinningMode = .none, allowInvalidCertificates: Bool = false,
                validatesDomainName: Bool = true, caFile: String? = nil, clientCertificate: String? = nil,
                clientKey: String? = nil, clientKeyPassword: String? = nil, requiresCertificateStatus: Bool = false) {
        self.pinning = pinning
        self.allowInvalidCertificates = allowInvalidCertificates
        self.validatesDomainName = validatesDomainName
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.clientKeyPassword = clientKeyPassword
        self.requiresCertificateStatus = requiresCertificateStatus
    }

    /// Builds the C policy, hands it to `set` (which copies it) and frees it.
    /// - Parameter set: Takes the `courier_security *`; returns a courier code.
    /// - Throws: ``CourierError`` (a file that cannot be read: ``CourierError/Code/notFound``).
    func withCPolicy(_ set: (OpaquePointer) -> Int32) throws {
        var created: OpaquePointer?
        try CourierError.check(courier_security_new(&created), "security")
        guard let policy = created else { throw CourierError(.noMemory) }
        defer { courier_security_free(policy) }
        switch pinning {
        case .none: break
        case .publicKey(let pins):
            try CourierError.check(courier_security_set_pinning(policy, COURIER_PINNING_PUBLIC_KEY, pins), "pinning")
        case .certificate(let path):
            try CourierError.check(courier_security_set_pinning(policy, COURIER_PINNING_CERTIFICATE, path), "pinning")
        }
        try CourierError.check(courier_security_set_allow_invalid_certificates(policy, allowInvalidCertificates ? 1 : 0),
                               "allowInvalidCertificates")
        try CourierError.check(courier_security_set_validates_domain_name(policy, validatesDomainName ? 1 : 0),
                               "validatesDomainName")
        if let caFile { try CourierError.check(courier_security_set_ca_file(policy, caFile), "caFile '\(caFile)'") }
        if let clientCertificate {
            try withOptionalCString(clientKey) { key in
                try withOptionalCString(clientKeyPassword) { password in
                    try CourierError.check(courier_security_set_client_certificate(policy, clientCertificate, key, password),
                                           "clientCertificate '\(clientCertificate)'")
                }
            }
        }
        if requiresCertificateStatus {
            try CourierError.check(courier_security_set_requires_certificate_status(policy, 1), "requiresCertificateStatus")
        }
        try CourierError.check(set(policy), "security")
    }
}

extension CourierError.Code {
    /// The client certificate or its key could not be loaded: not PEM/PKCS#12, a wrong password,
    /// a key of another certificate.
    public static let clientCertificate = CourierError.Code(COURIER_E_CLIENT_CERTIFICATE)
}

extension CourierError {
    /// See ``Code/clientCertificate``.
    public static let clientCertificate = Code.clientCertificate
}

extension Configuration {
    /// The engine's security policy, for every request without its own. Set, it replaces
    /// ``caFile``, ``pinnedPublicKey`` and ``insecure`` (which set fields of the same policy).
    public var security: SecurityPolicy? {
        get { setting("security") }
        set {
            setSetting("security", newValue) { config, policy in
                try policy.withCPolicy { courier_config_set_security(config, $0) }
            }
        }
    }
}

struct _SecurityOption: RequestOption {
    let policy: SecurityPolicy
    func apply(to request: OpaquePointer) throws {
        try policy.withCPolicy { courier_request_set_security(request, $0) }
    }
}

extension Request {
    /// This request's own security policy, replacing the whole of the engine's for it and every
    /// hop of its redirects. Such a request shares no connection verified under another policy,
    /// is never coalesced with another, and is not frozen.
    /// - Parameter policy: The policy.
    /// - Returns: The changed request.
    public func security(_ policy: SecurityPolicy) -> Request { adding(_SecurityOption(policy: policy)) }
}
