// swift-tools-version:6.1
// Courier: a C networking core (CCore, include/courier.h) with a Swift facade (Courier), the
// `courier` command-line tool, the loopback test server, benchmarks and tests.
import PackageDescription

// The trait Redis builds the stores on Redis (hiredis) into the core, as CMake's COURIER_REDIS
// does (docs/design/redis.md, "Stores on Redis"). It is off by default: a package that depends on Courier
// builds the same everywhere, whether the machine has hiredis or not, and without pkg-config's
// hiredis flags (Debian's hiredis.pc carries -D_FILE_OFFSET_BITS=64, which SwiftPM drops from a
// dependency with a warning on every build). Without the trait a redis:// store fails with
// CourierError.redisUnsupported. A dependent turns it on with
// `.package(url: ..., from: ..., traits: ["Redis"])`, this package with `swift build --traits Redis`
// (scripts/test does, so the Redis tests run).
let package = Package(
    name: "Courier",
    platforms: [.macOS(.v13)],
    // The tool is not a product: `swift run courier` works in this package all the same, and a
    // package that depends on Courier then never fetches swift-argument-parser (SwiftPM resolves
    // only what the products it uses need).
    products: [
        .library(name: "Courier", targets: ["Courier"]),
        .library(name: "CCore", targets: ["CCore"]),
        // The benchmarks' servers and clients, for Benchmarks/Peers (a package of its own that puts
        // Courier beside swift-nio's clients). No dependency of its own beyond Courier's.
        .library(name: "CourierBenchmarks", targets: ["CourierBenchmarks"]),
        // Spans (swift-distributed-tracing) and metrics (swift-metrics) of an engine's requests, each
        // its own product and trait (Tracing, Metrics: see `traits`): an app that uses only Courier
        // resolves neither package.
        .library(name: "CourierTracing", targets: ["CourierTracing"]),
        .library(name: "CourierMetrics", targets: ["CourierMetrics"]),
        // Adapters to other packages' types (docs/design/openapi.md): HTTPTypes' HTTPRequest and
        // HTTPResponse, Foundation's URLRequest, and Swift OpenAPI Generator's transport. Each needs
        // its package trait (below): without it the module is empty and its package is not fetched.
        .library(name: "CourierHTTPTypes", targets: ["CourierHTTPTypes"]),
        .library(name: "CourierOpenAPI", targets: ["CourierOpenAPI"]),
    ],
    traits: [
        .trait(name: "Redis", description: "Stores on Redis (redis:// store URLs) through the system's hiredis"),
        // The packages of the products CourierTracing, CourierMetrics, CourierHTTPTypes and
        // CourierOpenAPI are dependencies of these traits only (off by default, like Redis): SwiftPM
        // fetches a dependency's package for any product of this package, used or not, unless a trait
        // that is off guards it, so an app that depends on Courier alone resolves nothing more
        // (scripts/check-swift-consumer); without its trait a module is empty. A dependent names the
        // trait and uses the product: `.package(url: ..., from: ..., traits: ["OpenAPI"])`,
        // `.product(name: "CourierOpenAPI", package: "courier")`.
        .trait(name: "Tracing", description: "CourierTracing: spans of requests through swift-distributed-tracing"),
        .trait(name: "Metrics", description: "CourierMetrics: metrics of requests through swift-metrics"),
        .trait(name: "HTTPTypes", description: "Product CourierHTTPTypes' HTTPRequest/HTTPResponse interop (swift-http-types; its URLRequest interop needs no trait)"),
        .trait(name: "OpenAPI", description: "Product CourierOpenAPI: a ClientTransport for Swift OpenAPI Generator's clients (swift-openapi-runtime)",
               enabledTraits: ["HTTPTypes"]),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // `swift package generate-documentation --target Courier` (README); no target depends on it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // CourierTracing and CourierMetrics only, with the traits Tracing and Metrics on.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.0"),
        // For the products CourierHTTPTypes and CourierOpenAPI only, under their traits.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.8.0"),
    ],
    targets: [
        // The engine, in C. Its public header is include/courier.h, which includes its parts,
        // include/courier/*.h (with no include/CCore.h, SwiftPM makes include/ the module's umbrella
        // directory, read recursively).
        .target(
            name: "CCore",
            dependencies: ["CCurl", "CLMDB", "CJansson", "CWslay", "CCrypto", "CZlib",
                           .target(name: "CHiredis", condition: .when(traits: ["Redis"]))],
            path: ".",
            sources: ["CCore"],
            publicHeadersPath: "include",
            // No unsafe flags (SwiftPM refuses them in a package depended on by version): what leaves
            // the objects is decided in the sources (CCore/internal.h hides everything it declares;
            // include/courier.h marks the API with COURIER_API). COURIER_BUILDING selects the export
            // side of COURIER_API (dllexport on Windows).
            cSettings: [
                .define("_GNU_SOURCE"),
                .define("COURIER_BUILDING"),
                .define("COURIER_REDIS", .when(traits: ["Redis"])),
                // CCore is in folders by layer (docs/DESIGN.md, "CCore, by layer"); internal headers are included
                // from the top of CCore, e.g. "internal.h", "cache/cache_internal.h".
                .headerSearchPath("CCore"),
            ],
            linkerSettings: [
                .linkedLibrary("pthread", .when(platforms: [.linux])),
                .linkedLibrary("m", .when(platforms: [.linux])),
                // wslay has no pkg-config file on Debian (CWslay below), and a system library's
                // module map `link` reaches only Swift importers: named here for the C objects.
                .linkedLibrary("wslay"),
                .linkedLibrary("iconv", .when(platforms: [.macOS, .iOS, .tvOS, .watchOS, .visionOS])), // glibc has iconv built in
            ]
        ),
        // The C libraries the core uses, from the system: include and library paths come from
        // pkg-config; a missing one gets the install hint of the platform's package manager.
        .systemLibrary(
            name: "CCurl",
            path: "Sources/CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        .systemLibrary(
            name: "CLMDB",
            path: "Sources/CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .systemLibrary(
            name: "CJansson",
            path: "Sources/CJansson",
            pkgConfig: "jansson",
            providers: [.apt(["libjansson-dev"]), .brew(["jansson"])]
        ),
        // WebSocket framing (CCore/engine/ws.c). Debian's libwslay-dev ships no pkg-config file:
        // its header and library are in the compiler's default paths.
        .systemLibrary(
            name: "CWslay",
            path: "Sources/CWslay"
        ),
        // SHA-1 for the WebSocket handshake's Sec-WebSocket-Accept.
        .systemLibrary(
            name: "CCrypto",
            path: "Sources/CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // permessage-deflate for WebSocket (CCore/engine/ws_deflate.c).
        .systemLibrary(
            name: "CZlib",
            path: "Sources/CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        .systemLibrary(
            name: "CHiredis",
            path: "Sources/CHiredis",
            pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"]), .brew(["hiredis"])]
        ),
        // The loopback HTTP/1.1 server the tests, the demo and `courier serve` use.
        .target(
            name: "CourierTestServer",
            dependencies: ["CCrypto"], // SHA-1 for /ws/echo's handshake
            path: "Tests/TestServer",
            exclude: ["tool", "selftest.c"],
            publicHeadersPath: "include",
            linkerSettings: [.linkedLibrary("crypto")] // a module map's `link` reaches only Swift importers
        ),
        // The Swift facade.
        .target(
            name: "Courier",
            dependencies: ["CCore", .product(name: "Logging", package: "swift-log")],
            path: "Sources/Courier"
        ),
        // Sending HTTPTypes' HTTPRequest (inside `#if HTTPTypes`: empty without the trait) and
        // Foundation's URLRequest (no trait needed) through an Engine (docs/design/openapi.md).
        .target(
            name: "CourierHTTPTypes",
            dependencies: ["Courier", .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["HTTPTypes"]))],
            path: "Sources/CourierHTTPTypes"
        ),
        // A ClientTransport of swift-openapi-runtime that sends through an Engine
        // (docs/design/openapi.md); empty without the trait OpenAPI.
        .target(
            name: "CourierOpenAPI",
            dependencies: [
                "Courier", "CourierHTTPTypes",
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["OpenAPI"])),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime", condition: .when(traits: ["OpenAPI"])),
            ],
            path: "Sources/CourierOpenAPI"
        ),
        // The C side of the benchmarks: the peers' ceilings (a plain libcurl multi loop, raw LMDB)
        // and the Courier C API driven from C, so each is measured without Swift in the way.
        .target(
            name: "CBench",
            dependencies: ["CCore", "CCurl", "CLMDB", .target(name: "CHiredis", condition: .when(traits: ["Redis"]))],
            path: "Benchmarks/CBench",
            publicHeadersPath: "include",
            cSettings: [.define("_GNU_SOURCE"), .define("COURIER_REDIS", .when(traits: ["Redis"]))],
            linkerSettings: [.linkedLibrary("pthread", .when(platforms: [.linux]))]
        ),
        // SIGINT/SIGTERM handling for long-running commands (cleanups before exit, or a wait for
        // the signal): used by the tool's serve and download commands and by the benchmarks, so
        // the tool's own commands need nothing from the benchmark module.
        .target(
            name: "CourierSignals",
            path: "Sources/CourierSignals"
        ),
        // Benchmarks (transport, later cache and mapping), run by `courier bench ...`.
        .target(
            name: "CourierBenchmarks",
            dependencies: ["Courier", "CCore", "CBench", "CourierTestServer", "CourierSignals"],
            path: "Benchmarks/CourierBenchmarks"
        ),
        // The command-line tool: demo, get, post, serve, bench.
        .executableTarget(
            name: "courier",
            dependencies: [
                "Courier", "CourierTestServer", "CourierSignals", "CourierBenchmarks", "CBench",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/courier"
        ),
        .testTarget(
            name: "CourierTests",
            dependencies: [
                "Courier", "CourierTestServer",
                // HTTPTypesTests and OpenAPITransportTests, under the traits (scripts/test turns them
                // on); the OpenAPI client under Tests/CourierTests/OpenAPI was generated once and
                // committed (no generator here).
                "CourierHTTPTypes", "CourierOpenAPI",
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["HTTPTypes"])),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime", condition: .when(traits: ["OpenAPI"])),
            ],
            path: "Tests/CourierTests",
            exclude: ["OpenAPI/openapi.yaml", "OpenAPI/openapi-generator-config.yaml"]
        ),
        // A span per request from the C core's events, the W3C context injected by an interceptor
        // (docs/design/tracing.md).
        .target(
            name: "CourierTracing",
            dependencies: ["Courier", .product(name: "Tracing", package: "swift-distributed-tracing",
                                               condition: .when(traits: ["Tracing"]))],
            path: "Sources/CourierTracing"
        ),
        // Counters and timers of an engine's requests, cache and frozen requests.
        .target(
            name: "CourierMetrics",
            dependencies: ["Courier", .product(name: "CoreMetrics", package: "swift-metrics",
                                               condition: .when(traits: ["Metrics"]))],
            path: "Sources/CourierMetrics"
        ),
        .testTarget(
            name: "CourierTracingTests",
            dependencies: ["CourierTracing", "CourierTestServer",
                           .product(name: "InMemoryTracing", package: "swift-distributed-tracing",
                                    condition: .when(traits: ["Tracing"]))],
            path: "Tests/CourierTracingTests"
        ),
        .testTarget(
            name: "CourierMetricsTests",
            dependencies: ["CourierMetrics", "CourierTestServer",
                           .product(name: "MetricsTestKit", package: "swift-metrics",
                                    condition: .when(traits: ["Metrics"]))],
            path: "Tests/CourierMetricsTests"
        ),
    ],
    // Tools 6.1 (for the trait) would make Swift 6 the language mode; the sources are Swift 5 mode.
    swiftLanguageModes: [.v5]
)
