// swift-tools-version:5.9
// Courier's Swift facade side by side with the clients users would pick instead (AsyncHTTPClient),
// in a package of its own: Courier comes by path, so no dependent of Courier ever resolves
// swift-nio. Run: swift run -c release --package-path Benchmarks/Peers peers transport --json [--tls|--h2]
// Its first build takes several minutes (swift-nio, swift-nio-ssl, swift-nio-http2); the main
// test command never builds it (scripts/peers runs it).
import Foundation
import PackageDescription

// A path dependency's identity is its directory's name, which differs between checkouts (main,
// a worktree, CI's clone): read it off this file's place, two levels below the checkout.
let courier = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().lastPathComponent.lowercased()

let package = Package(
    name: "CourierPeers",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(path: "../.."),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        // `peers ws`: the WebSocket client of Vapor (over NIO). (`peers sse` has no Swift peer here:
        // mattt/EventSource 1.1.1, its only release, calls URLSession.bytes, which Linux's Foundation
        // lacks, and a package's files are not committed here: it measures Courier alone.)
        .package(url: "https://github.com/vapor/websocket-kit", exact: "2.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "peers",
            dependencies: [
                .product(name: "Courier", package: courier),
                .product(name: "CourierBenchmarks", package: courier),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "WebSocketKit", package: "websocket-kit"),
            ],
            path: "Sources/peers"
        ),
    ]
)
