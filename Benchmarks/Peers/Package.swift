// swift-tools-version:6.1
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
        // The trait OpenAPI: product CourierOpenAPI for `peers openapi` (tools 6.1 for `traits:`).
        .package(path: "../..", traits: ["OpenAPI"]),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        // `peers ws`: the WebSocket client of Vapor (over NIO). (`peers sse` has no Swift peer here:
        // mattt/EventSource 1.1.1, its only release, calls URLSession.bytes, which Linux's Foundation
        // lacks, and a package's files are not committed here: it measures Courier alone.)
        .package(url: "https://github.com/vapor/websocket-kit", exact: "2.16.2"),
        // `peers openapi`: AsyncHTTPClient's OpenAPI transport beside Courier's (CourierOpenAPI).
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", exact: "1.5.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.8.0"),
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
                .product(name: "CourierOpenAPI", package: courier),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            path: "Sources/peers",
            // The generated client's source document and generator settings (OpenAPI/openapi.yaml).
            exclude: ["OpenAPI/openapi.yaml", "OpenAPI/openapi-generator-config.yaml"]
        ),
    ],
    // Tools 6.1 (for the trait) would make Swift 6 the language mode; the sources are Swift 5 mode.
    swiftLanguageModes: [.v5]
)
