// HSTSCommand.swift — `courier hsts ls | preload FILE | clear`: the HSTS list of a store directory
// (the one an app gives Configuration.storeDirectory), with --json for scripts. Every operation is
// the C core's list through the Swift facade.
import ArgumentParser
import Courier
import Foundation

struct HSTSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hsts",
        abstract: "List, preload and clear the HSTS hosts of a store directory.",
        subcommands: [HSTSListCommand.self, HSTSPreloadCommand.self, HSTSClearCommand.self]
    )
}

private func printJSONLine(_ object: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    writeOut(data + Data("\n".utf8))
}

struct HSTSListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the HSTS hosts.",
                                                    aliases: ["list"])
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options, storeMustExist: true) { engine in
            let hosts = try engine.hsts.all()
            if options.json {
                try printJSONLine(hosts.map {
                    ["host": $0.host, "include_subdomains": $0.includeSubdomains,
                     "expires": $0.expires.map { Int64($0.timeIntervalSince1970) } ?? 0] as [String: Any]
                })
                return
            }
            for h in hosts {
                let expires = h.expires.map { ISO8601DateFormatter().string(from: $0) } ?? "never"
                print("\(h.host)\t\(expires)\t\(h.includeSubdomains ? "subdomains" : "")")
            }
            if hosts.isEmpty { print("(empty)") }
        }
    }
}

struct HSTSPreloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preload",
        abstract: "Add the hosts of a file in curl's HSTS format ([.]host \"YYYYMMDD HH:MM:SS\" or \"unlimited\").")
    @OptionGroup var options: CacheOptions
    @Argument(help: "The file.") var file: String

    func run() throws {
        try withEngine(options, storeMustExist: false) { engine in
            let n = try engine.hsts.preload(from: file)
            if options.json { try printJSONLine(["added": n]) } else { print("added \(n) hosts") }
        }
    }
}

struct HSTSClearCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every HSTS host.")
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options, storeMustExist: true) { engine in
            let n = try engine.hsts.clear()
            if options.json { try printJSONLine(["removed": n]) } else { print("removed \(n) hosts") }
        }
    }
}
