// swift-tools-version:5.9
// Courier: a C networking core (CCore, include/courier.h) with a Swift facade (Courier), the
// `courier` command-line tool, the loopback test server, benchmarks and tests.
import PackageDescription

let package = Package(
    name: "Courier",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "Courier", targets: ["Courier"]),
        .library(name: "CCore", targets: ["CCore"]),
        .executable(name: "courier", targets: ["courier"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        // The engine, in C. Its one public header is include/courier.h.
        .target(
            name: "CCore",
            path: ".",
            sources: ["CCore"],
            publicHeadersPath: "include",
            cSettings: [
                .define("_GNU_SOURCE"),
                .unsafeFlags(["-fvisibility=hidden"]),
            ],
            linkerSettings: [
                .linkedLibrary("curl"),
                .linkedLibrary("lmdb"),
                .linkedLibrary("jansson"),
                .linkedLibrary("pthread"),
                .linkedLibrary("m"),
            ]
        ),
        // The loopback HTTP/1.1 server the tests, the demo and `courier serve` use.
        .target(
            name: "CourierTestServer",
            path: "Tests/TestServer",
            exclude: ["tool", "selftest.c"],
            publicHeadersPath: "include"
        ),
        // The Swift facade.
        .target(
            name: "Courier",
            dependencies: ["CCore", .product(name: "Logging", package: "swift-log")],
            path: "Sources/Courier"
        ),
        // The C side of the benchmarks: the peers' ceilings (a plain libcurl multi loop, raw LMDB)
        // and the Courier C API driven from C, so each is measured without Swift in the way.
        .target(
            name: "CBench",
            dependencies: ["CCore"],
            path: "Benchmarks/CBench",
            publicHeadersPath: "include",
            cSettings: [.define("_GNU_SOURCE")],
            linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("lmdb"), .linkedLibrary("pthread")]
        ),
        // Benchmarks (transport, later cache and mapping), run by `courier bench ...`.
        .target(
            name: "CourierBenchmarks",
            dependencies: ["Courier", "CCore", "CBench", "CourierTestServer"],
            path: "Benchmarks/CourierBenchmarks"
        ),
        // The command-line tool: demo, get, post, serve, bench.
        .executableTarget(
            name: "courier",
            dependencies: [
                "Courier", "CourierTestServer", "CourierBenchmarks", "CBench",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/courier"
        ),
        .testTarget(
            name: "CourierTests",
            dependencies: ["Courier", "CourierTestServer"],
            path: "Tests/CourierTests"
        ),
    ]
)
