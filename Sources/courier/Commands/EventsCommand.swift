// EventsCommand.swift — `courier events URL`: a server-sent events client. Prints each event as it
// arrives, in the stream's own form (event, id and data lines, then a blank line), flushed so that
// a pipe sees it at once; reconnects as EventSource does; exits 1 when the source ends for good.
import ArgumentParser
import Courier
import Foundation

struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Read server-sent events (text/event-stream) and print each as it arrives.",
        discussion: """
            Reconnects after a drop or a clean end (the server's retry time, else 3 s) with \
            Last-Event-ID. Ends, with exit status 1, when the server answers 204 or anything but a 200 \
            text/event-stream; Ctrl-C stops it.
            """)

    @Argument(help: "An absolute http or https URL.")
    var url: String

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let engine = try openCommandEngine(insecure: connection.insecure)
        defer { engine.close() }
        let request = connection.request(url)
        do {
            for try await event in try engine.events(for: request) {
                var text = ""
                if event.type != "message" { text += "event: \(event.type)\n" }
                if !event.lastEventID.isEmpty { text += "id: \(event.lastEventID)\n" }
                for line in event.data.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
                writeOut(Data((text + "\n").utf8))
            }
        } catch {
            printError("error: \(describe(error))")
            throw ExitCode.failure
        }
    }
}
