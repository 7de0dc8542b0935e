// ServeCommand.swift — `courier serve`: the loopback test server in the foreground.
import ArgumentParser
import CourierSignals
import Foundation

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the test server in the foreground until SIGINT or SIGTERM.",
        discussion: """
            Endpoints: /echo, /status/N, /delay/MS, /bytes/N, /json, /count, /headers?Name=Value,
            /redirect?to=URL, /etag/TAG, /cache?max_age=N, /close-mid-body, /hang, /reset, /slow-body/MS.
            """
    )

    @Option(help: "The port to listen on (0: a free port).")
    var port: Int = 0

    @Option(help: "The address to listen on.")
    var host: String = "127.0.0.1"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
    }

    func run() async throws {
        Interrupts.shared.install()  // before listening, so an early ^C is not lost
        let server: EmbeddedServer
        do {
            server = try EmbeddedServer(host: host, port: port)
        } catch {
            printError("error: \(error)")
            throw ExitCode.failure
        }
        print("listening on \(server.baseURL)")
        fflush(stdout)
        let signal = await Interrupts.shared.waitForSignal()
        let counts = server.counts
        server.stop()
        printError("stopped (signal \(signal)) after \(counts.requests) requests on \(counts.connections) connections")
    }
}
