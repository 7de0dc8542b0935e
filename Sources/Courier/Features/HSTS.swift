// HSTS.swift — HTTP Strict Transport Security (RFC 6797) and Alt-Svc (RFC 7838): the settings,
// whether a response was upgraded, and the manager of the engine's HSTS list. The C core keeps the
// list and upgrades the URLs (CCore/http/hsts.c); this file converts.

import Foundation
internal import CCore

// MARK: - Configuration

extension Configuration {
    /// HTTP Strict Transport Security (on by default): a host that sent Strict-Transport-Security
    /// over https is reached over https:// even when a request (or a redirect) says http://, until
    /// its max-age passes. The list is kept in the store, shared by the engines and processes on it.
    /// false: nothing is learnt or upgraded (the store's list is left as it is).
    public var hsts: Bool {
        get { setting("hsts") ?? true }
        set {
            setSetting("hsts", newValue) { config, on in
                try CourierError.check(courier_config_set_hsts(config, on ? 1 : 0), "hsts")
            }
        }
    }

    /// Alternative services (off by default): libcurl remembers the Alt-Svc fields of https
    /// responses, in the file "alt-svc.txt" of the store directory, and later connections to the
    /// origin go to the alternative.
    public var altSvc: Bool {
        get { setting("altSvc") ?? false }
        set {
            setSetting("altSvc", newValue) { config, on in
                try CourierError.check(courier_config_set_alt_svc(config, on ? 1 : 0), "altSvc")
            }
        }
    }
}

// MARK: - Responses

extension Response {
    /// true when the request's URL (or a redirect hop's) went from http:// to https:// because its
    /// host is a known HSTS host; ``url`` then says https://. false for responses made in Swift.
    public var hstsUpgraded: Bool {
        guard let storage else { return false }
        return courier_response_hsts_upgraded(storage.pointer) != 0
    }
}

// MARK: - The list

/// One known HSTS host.
public struct HSTSEntry: Sendable, Hashable {
    /// The host, lowercase.
    public var host: String
    /// Whether its subdomains are HSTS hosts too.
    public var includeSubdomains: Bool
    /// When it stops being one; nil: never (a preloaded "unlimited" line).
    public var expires: Date?

    /// - Parameters:
    ///   - host: The host.
    ///   - includeSubdomains: Whether its subdomains are HSTS hosts too.
    ///   - expires: When it stops being one; nil: never.
    public init(host: String, includeSubdomains: Bool, expires: Date?) {
        self.host = host
        self.includeSubdomains = includeSubdomains
        self.expires = expires
    }
}

extension Engine {
    /// The engine's HSTS list: list, clear, preload.
    public var hsts: HSTS { HSTS(engine: self) }
}

/// The manager of an engine's HSTS list. Thread-safe; each call reads or writes the store.
public struct HSTS: Sendable {
    let engine: Engine

    private func call<R>(_ body: (OpaquePointer, inout courier_error) throws -> R) throws -> R {
        try engine.withHandle { handle in
            var error = courier_error()
            return try body(handle, &error)
        }
    }

    /// Every known host as the store has it now, expired ones left out, sorted by host.
    /// - Returns: The hosts.
    /// - Throws: ``CourierError`` (``CourierError/Code/invalidArgument`` when HSTS is off).
    public func all() throws -> [HSTSEntry] {
        try call { handle, error in
            var list: OpaquePointer?
            let rc = courier_hsts_list(&list, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            defer { courier_hsts_entries_free(list) }
            return (0..<courier_hsts_entries_count(list)).map { i in
                var h = courier_hsts_entry()
                h.size = MemoryLayout<courier_hsts_entry>.size
                courier_hsts_entries_at(&h, list, i)
                return HSTSEntry(host: String(borrowedCString: h.host), includeSubdomains: h.include_subdomains != 0,
                                 expires: h.expires == 0 ? nil : Date(timeIntervalSince1970: Double(h.expires)))
            }
        }
    }

    /// Empties the list, in the store (for every engine and process on it).
    /// - Returns: How many hosts went.
    /// - Throws: ``CourierError``.
    @discardableResult
    public func clear() throws -> Int {
        try call { handle, error in
            var removed: Int64 = 0
            let rc = courier_hsts_clear(&removed, handle, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(removed)
        }
    }

    /// Adds the hosts of a file in curl's HSTS format (`[.]host "YYYYMMDD HH:MM:SS"` or
    /// `"unlimited"`; a leading "." means includeSubDomains).
    /// - Parameter path: The file.
    /// - Returns: How many hosts were added or changed.
    /// - Throws: ``CourierError`` (``CourierError/Code/notFound`` when there is no such file).
    @discardableResult
    public func preload(from path: String) throws -> Int {
        try call { handle, error in
            var added: Int64 = 0
            let rc = courier_hsts_preload(&added, handle, path, &error)
            if rc != COURIER_OK.rawValue { throw CourierError(code: rc, detail: &error) }
            return Int(added)
        }
    }
}
