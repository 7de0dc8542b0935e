// MappingBenchmark.swift — `courier bench mapping`: one ~1 MB JSON document (an array of 5,000
// objects of 10 mixed fields), measured in the same run as
//   jansson        raw jansson parse + a walk that reads every value (the bar for the core)
//   mapping        the core: courier_json_tape_parse (limits, duplicate keys refused) + a mapping
//                  of the 10 fields with their types, read from the tape and written to a tape
//                  (courier_mapping_apply_tape)
//   swift_decode   Courier's ModelDecoder into [BenchRecord], parse included (the core's tape
//                  parser, courier_json_tape_parse)
//   jsondecoder    Foundation's JSONDecoder into the same [BenchRecord]
// plus, for the profile: each parser alone (jansson, the core's jansson parse, the core's tape
// parse), the core's parse with the top-level array split across the processors (opt-in), the
// mapping with renamed keys, the same mapping on a jansson document (mapping_jansson:
// courier_json_parse + courier_mapping_apply, the path before the tape), the Swift decoder on an
// already parsed document (a tape made from it, then the decoding) and with the split parse.
// Throughput is bytes of JSON text / median wall time of the runs, in MB/s (10^6 bytes).

import CBench
import Courier
import Foundation

/// The record both Swift decoders decode into.
public struct BenchRecord: Codable, Equatable, Sendable {
    public let id: Int
    public let name: String
    public let email: String
    public let price: Double
    public let quantity: Int
    public let active: Bool
    public let rating: Double
    public let createdAt: String
    public let tags: [String]
    public let note: String?

    enum CodingKeys: String, CodingKey {
        case id, name, email, price, quantity, active, rating
        case createdAt = "created_at"
        case tags, note
    }
}

public enum MappingBenchmark {
    /// What to run.
    public struct Options: Sendable {
        /// Objects in the document (5,000 make about 1 MB).
        public var objects = 5_000
        /// Timed runs per measurement; the median is reported.
        public var runs = 7
        /// Untimed runs before them.
        public var warmup = 2
        /// Only these measurements (for profiling one with perf); nil runs all.
        public var only: [String]?
        public init() {}
    }

    /// The measurements, in MB/s per run.
    public struct Report: Sendable {
        public var options: Options
        public var bytes: Int
        public var runs: [String: [Double]]

        /// The median MB/s of a measurement.
        public func median(_ name: String) -> Double? {
            guard let list = runs[name], !list.isEmpty else { return nil }
            let sorted = list.sorted()
            let n = sorted.count
            return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
        }
    }

    /// The measurements, in the order printed. The first four are the issue's.
    public static let names = ["jansson", "mapping", "swift_decode", "jsondecoder",
                               "jansson_parse_only", "core_parse_only", "tape_parse_only", "core_parse_split", "mapping_renamed",
                               "mapping_jansson", "swift_decode_parsed", "swift_decode_split"]

    /// Runs the benchmark.
    /// - Parameters:
    ///   - options: What to run.
    ///   - progress: Receives progress lines.
    /// - Returns: The report.
    /// - Throws: When a decoder fails on the document.
    public static func run(_ options: Options, progress: (String) -> Void = { _ in }) throws -> Report {
        var length = 0
        guard let text = cbench_mapping_document(Int32(options.objects), &length) else {
            throw CourierError(.noMemory)
        }
        defer { cbench_mapping_document_free(text) }
        let data = Data(bytes: text, count: length)
        let raw = UnsafeRawPointer(text)
        guard let mapping = cbench_mapping_new(0), let renamed = cbench_mapping_new(1) else { throw CourierError(.noMemory) }
        defer {
            cbench_mapping_free(mapping)
            cbench_mapping_free(renamed)
        }

        // The decoders agree before anything is timed.
        let ours = try ModelDecoder().decode([BenchRecord].self, from: data)
        let theirs = try JSONDecoder().decode([BenchRecord].self, from: data)
        guard ours == theirs, ours.count == options.objects,
              cbench_mapping_run(raw, length, mapping) == options.objects,
              cbench_mapping_run(raw, length, renamed) == options.objects,
              cbench_mapping_jansson_run(raw, length, mapping) == options.objects,
              cbench_mapping_paths_agree(raw, length, mapping) == 1,
              cbench_mapping_paths_agree(raw, length, renamed) == 1,
              cbench_jansson_parse_walk(raw, length) > 0, cbench_tape_parse_only(raw, length) > 0 else {
            throw CourierError(.internal, message: "the decoders disagree on the benchmark document")
        }

        let parsed = try JSON.parse(data)
        var split = ModelDecoder()
        split.parseThreads = 0
        let bodies: [String: () throws -> Void] = [
            "swift_decode_parsed": { _ = try ModelDecoder().decode([BenchRecord].self, from: parsed) },
            "jansson": { _ = cbench_jansson_parse_walk(raw, length) },
            "mapping": { _ = cbench_mapping_run(raw, length, mapping) },
            "swift_decode": { _ = try ModelDecoder().decode([BenchRecord].self, from: data) },
            "jsondecoder": { _ = try JSONDecoder().decode([BenchRecord].self, from: data) },
            "jansson_parse_only": { _ = cbench_jansson_parse_only(raw, length) },
            "core_parse_only": { _ = cbench_mapping_parse_only(raw, length) },
            "tape_parse_only": { _ = cbench_tape_parse_only(raw, length) },
            "core_parse_split": { _ = cbench_mapping_parse_split(raw, length) },
            "swift_decode_split": { _ = try split.decode([BenchRecord].self, from: data) },
            "mapping_renamed": { _ = cbench_mapping_run(raw, length, renamed) },
            "mapping_jansson": { _ = cbench_mapping_jansson_run(raw, length, mapping) },
        ]
        var report = Report(options: options, bytes: length, runs: [:])
        let selected = names.filter { options.only?.contains($0) ?? true }
        for _ in 0..<options.warmup {
            for name in selected { try bodies[name]!() }
        }
        // Interleaved: run i of every measurement, then run i + 1, so drift affects all alike.
        for run in 0..<options.runs {
            progress("run \(run + 1)/\(options.runs)")
            for name in selected {
                let start = DispatchTime.now().uptimeNanoseconds
                try bodies[name]!()
                let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                report.runs[name, default: []].append(Double(length) / seconds / 1e6)
            }
        }
        return report
    }

    static func ratio(_ report: Report, _ a: String, _ b: String) -> Double? {
        guard let x = report.median(a), let y = report.median(b), y > 0 else { return nil }
        return x / y
    }

    /// A table for people.
    /// - Parameter report: The report.
    /// - Returns: The text.
    public static func text(_ report: Report) -> String {
        let o = report.options
        var out = "Courier mapping benchmark: \(report.bytes) bytes, \(o.objects) objects x 10 fields, "
            + "\(o.runs) runs (median shown, MB/s = 10^6 bytes/s)\n\n"
        for name in names {
            guard let median = report.median(name) else { continue }
            let runs = (report.runs[name] ?? []).map { String(format: "%.1f", $0) }.joined(separator: " ")
            out += name.padding(toLength: 20, withPad: " ", startingAt: 0)
                + String(format: "%8.1f MB/s   ", median) + runs + "\n"
        }
        out += "\n"
        if let r = ratio(report, "mapping", "jansson") {
            out += String(format: "mapping / jansson:          %.2fx (target >= 5.00) ", r) + (r >= 5 ? "met\n" : "NOT met\n")
        }
        if let r = ratio(report, "mapping_jansson", "jansson") {
            out += String(format: "mapping_jansson / jansson:  %.2fx (the path before the tape)\n", r)
        }
        if let r = ratio(report, "swift_decode", "jsondecoder") {
            out += String(format: "swift_decode / jsondecoder: %.2fx (target >= 1.20) ", r) + (r >= 1.2 ? "met\n" : "NOT met\n")
        }
        return out
    }

    /// One JSON object: `jansson_mbps`, `mapping_mbps`, `swift_decode_mbps`, `jsondecoder_mbps`, the
    /// profile's extra medians, every run, the ratios and whether the targets are met.
    /// - Parameter report: The report.
    /// - Returns: The JSON text.
    public static func json(_ report: Report) -> String {
        var object: [String: Any] = ["bytes": report.bytes, "objects": report.options.objects, "runs": report.options.runs]
        var runs: [String: Any] = [:]
        for name in names {
            object["\(name)_mbps"] = report.median(name).map { ($0 * 10).rounded() / 10 } ?? NSNull()
            runs[name] = (report.runs[name] ?? []).map { ($0 * 10).rounded() / 10 }
        }
        object["runs_mbps"] = runs
        let mapping = ratio(report, "mapping", "jansson")
        let swift = ratio(report, "swift_decode", "jsondecoder")
        func rounded(_ r: Double?) -> Any { r.map { ($0 * 100).rounded() / 100 } ?? NSNull() }
        let ratios: [String: Any] = ["mapping_vs_jansson": rounded(mapping), "swift_decode_vs_jsondecoder": rounded(swift),
                                     "mapping_jansson_vs_jansson": rounded(ratio(report, "mapping_jansson", "jansson"))]
        let met: [String: Bool] = ["mapping_vs_jansson_5": (mapping ?? 0) >= 5,
                                   "swift_decode_vs_jsondecoder_1_2": (swift ?? 0) >= 1.2]
        object["ratios"] = ratios
        object["targets_met"] = met
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
