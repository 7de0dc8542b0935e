// CourierCommand.swift — the root of the `courier` tool. Each subcommand lives in its own file
// under Commands/; adding one is adding that file and one line to `subcommands` below.
import ArgumentParser
import Courier

@main
struct CourierCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "Send HTTP requests with Courier, run its demo, test server and benchmarks.",
        discussion: "With no subcommand, runs `courier demo`.",
        version: "courier \(libraryVersion)",
        subcommands: [
            DemoCommand.self,
            GetCommand.self,
            PostCommand.self,
            DownloadCommand.self,
            EventsCommand.self,
            WebSocketCommand.self,
            ServeCommand.self,
            BenchCommand.self,
            CacheCommand.self,
            CookiesCommand.self,
            HSTSCommand.self,
            FrozenCommand.self,
            StressCommand.self,
        ],
        defaultSubcommand: DemoCommand.self
    )
}
