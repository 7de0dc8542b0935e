// MappingBenchCommand.swift — `courier bench mapping`: raw jansson vs the core's mapping vs
// Courier's Swift decoder vs Foundation's JSONDecoder on one ~1 MB document (see
// Benchmarks/CourierBenchmarks/MappingBenchmark.swift).
import ArgumentParser
import CourierBenchmarks
import Foundation

struct MappingBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mapping",
        abstract: "JSON to models on a 1 MB document: jansson vs the core's mapping vs Courier's Swift decoder vs JSONDecoder.",
        discussion: """
            The document is an array of --objects objects with 10 fields of mixed types (about 1 MB
            for 5,000), made in memory. Measured in the same run, interleaved: raw jansson parse +
            walk (the bar for the core), the core's parse + mapping on the tape, Courier's ModelDecoder
            into a Decodable struct array (parse included), and Foundation's JSONDecoder into the
            same structs; plus each parser alone and a mapping that renames keys and the mapping on a jansson document (the path
            before the tape), for the profile.
            Medians of --runs runs, in MB/s (10^6 bytes/s). Targets: mapping >= 5x jansson;
            Courier's Swift decoding >= 1.2x JSONDecoder. Progress goes to stderr.
            """
    )

    @Option(help: "Objects in the document.")
    var objects = 5_000

    @Option(help: "Timed runs; medians are reported.")
    var runs = 7

    @Option(help: "Untimed runs first.")
    var warmup = 2

    @Option(help: ArgumentHelp("Comma-separated measurements to run alone (for profiling): jansson, mapping, swift_decode, jsondecoder, jansson_parse_only, core_parse_only, tape_parse_only, core_parse_split, mapping_renamed, mapping_jansson, swift_decode_parsed, swift_decode_split.", valueName: "list"))
    var only: String?

    @Flag(help: "Print one JSON object on stdout (jansson_mbps, mapping_mbps, swift_decode_mbps, jsondecoder_mbps, ...).")
    var json = false

    func validate() throws {
        guard objects > 0, objects <= 10_000_000 else { throw ValidationError("--objects must be 1...10000000") }
        guard runs > 0 else { throw ValidationError("--runs must be > 0") }
        guard warmup >= 0 else { throw ValidationError("--warmup must be >= 0") }
        for name in only?.split(separator: ",") ?? [] where !MappingBenchmark.names.contains(String(name)) {
            throw ValidationError("unknown measurement '\(name)'")
        }
    }

    func run() throws {
        var options = MappingBenchmark.Options()
        options.objects = objects
        options.runs = runs
        options.warmup = warmup
        options.only = only?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #if DEBUG
        printError("note: this is a debug build; measure with `swift build -c release`")
        #endif
        let report: MappingBenchmark.Report
        do {
            report = try MappingBenchmark.run(options) { printError($0) }
        } catch {
            printError("error: \(error)")
            throw ExitCode.failure
        }
        print(json ? MappingBenchmark.json(report) : MappingBenchmark.text(report), terminator: json ? "\n" : "")
    }
}
