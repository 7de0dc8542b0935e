// WebSocketCommand.swift — `courier ws URL`: an interactive WebSocket client. Each line of stdin
// goes out as a text message; each message that arrives is printed as it arrives (text as it is,
// binary as hex), flushed so that a pipe sees it at once. At the end of stdin it sends a close
// with 1000 and prints what still arrives until the server's close.
import ArgumentParser
import Courier
import Foundation

struct WebSocketCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ws",
        abstract: "A WebSocket client: stdin lines out as text messages, messages in, each printed as it arrives.",
        discussion: """
            At the end of stdin, sends a close with 1000 and prints what still arrives until the \
            server's close (exit status 0). A refused handshake, a protocol error or a dropped \
            connection prints the error and exits with status 1.
            """)

    @Argument(help: "A ws:// or wss:// URL.")
    var url: String

    @Option(name: .customLong("subprotocol"), help: ArgumentHelp("A subprotocol to offer (repeatable).", valueName: "name"))
    var subprotocols: [String] = []

    @Flag(help: "Offer permessage-deflate (RFC 7692) compression.")
    var compression = false

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let engine = try openCommandEngine(insecure: connection.insecure)
        defer { engine.close() }
        let request = connection.request(url)
        var options = WebSocketOptions()
        options.subprotocols = subprotocols
        options.compression = compression
        do {
            let ws = try await engine.webSocket(request, options: options)
            // stdin, read on a thread of its own (a blocking read), sent in order.
            let lines = AsyncStream<String?> { continuation in
                Thread.detachNewThread {
                    while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                    continuation.yield(nil)
                    continuation.finish()
                }
            }
            let sender = Task {
                for await line in lines {
                    guard let line else {
                        try? ws.close(code: 1000)
                        return
                    }
                    try? await ws.send(line)
                }
            }
            defer { sender.cancel() }
            for try await message in ws {
                switch message {
                case .text(let text): writeOut(Data((text + "\n").utf8))
                case .data(let data): writeOut(Data((data.map { String(format: "%02x", $0) }.joined() + "\n").utf8))
                }
            }
            if let code = ws.closeCode, code != 1000 {
                printError("closed: \(code) \(ws.closeReason)")
            }
        } catch {
            printError("error: \(describe(error))")
            throw ExitCode.failure
        }
    }
}
