// CacheVerify.swift — `engine.cache.verify()`: the C core's integrity check of the cache store
// (courier_cache_verify), translated. The checking is in C (store.c); this file only converts.

import Foundation
internal import CCore

/// What ``Cache/verify()`` found in the store (one read snapshot, all engines and processes).
public struct CacheVerifyReport: Sendable, Hashable {
    /// Entries the scan found.
    public let entries: Int64
    /// The bytes of the entries the scan found (key + value, as the totals count them).
    public let bytes: Int64
    /// The store's own count of entries (``Cache/size()-4jl6w``).
    public let totalEntries: Int64
    /// The store's own count of bytes (``Cache/size()-4jl6w``).
    public let totalBytes: Int64
    /// Entries that do not decode or whose checksum does not match.
    public let damaged: Int64
    /// Index records whose entry is absent or newer, and records of no known kind.
    public let orphanIndex: Int64
    /// Entries without their expiry or write-order record.
    public let missingIndex: Int64
    /// Whether the totals differ from the scan.
    public let totalsMismatch: Bool
    /// The sum of the problems found (0: consistent).
    public let problems: Int64
    /// Size of data.mdb on disk.
    public let fileBytes: Int64
    /// Size of this process's map of data.mdb.
    public let mapBytes: Int64
    /// Bytes of the pages LMDB uses.
    public let usedBytes: Int64
    /// LMDB reported a damaged page (the store is recreated at the next open).
    public let unreadable: Bool
    /// This process found the store unusable when it opened it, moved it aside and started anew.
    public let movedAside: Bool
    /// Bytes of the pages of the trees.
    public let treeBytes: Int64
    /// Bytes of the pages on LMDB's free list (reused by later commits).
    public let freeBytes: Int64
    /// No problem found.
    public var isConsistent: Bool { problems == 0 }
}

extension CourierError.Code {
    /// ``Cache/verify()`` found the store inconsistent (courier_cache_verify's code; `verify()`
    /// itself returns the report rather than throwing it).
    public static let cacheInconsistent = CourierError.Code(COURIER_E_CACHE_INCONSISTENT)
}

extension CourierError {
    /// See ``Code/cacheInconsistent``.
    public static let cacheInconsistent = Code.cacheInconsistent
}

extension Cache {
    /// Checks the whole store: every entry readable and whole, both index records of every entry
    /// present, no index record without its entry, the totals equal to a scan. Reads only.
    /// - Returns: The report, also when the store is inconsistent (``CacheVerifyReport/isConsistent``).
    /// - Throws: ``CourierError`` when the store cannot be opened or read (``CourierError/Code/store``).
    public func verify() throws -> CacheVerifyReport {
        guard engine.enter() else { throw CourierError(.closed, message: "the engine is closed") }
        defer { engine.leave() }
        var r = courier_cache_verify_report()
        r.size = MemoryLayout<courier_cache_verify_report>.size
        var error = courier_error()
        let rc = courier_cache_verify(&r, engine.handle, &error)
        if rc != COURIER_OK.rawValue && rc != COURIER_E_CACHE_INCONSISTENT.rawValue {
            throw CourierError(code: rc, detail: &error)
        }
        return CacheVerifyReport(
            entries: r.entries, bytes: r.bytes, totalEntries: r.total_entries, totalBytes: r.total_bytes,
            damaged: r.damaged, orphanIndex: r.orphan_index, missingIndex: r.missing_index,
            totalsMismatch: r.totals_mismatch != 0, problems: r.problems, fileBytes: r.file_bytes,
            mapBytes: r.map_bytes, usedBytes: r.used_bytes, unreadable: r.unreadable != 0,
            movedAside: r.moved_aside != 0, treeBytes: r.tree_bytes, freeBytes: r.free_bytes)
    }
}
