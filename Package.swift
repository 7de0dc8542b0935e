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
            dependencies: ["CCore"],
            path: "Sources/Courier"
        ),
        // A plain libcurl multi loop: the ceiling the transport benchmark compares with.
        .target(
            name: "CCurlBench",
            path: "Benchmarks/CCurlBench",
            publicHeadersPath: "include",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        // Benchmarks (transport, later cache and mapping), run by `courier bench ...`.
        .target(
            name: "CourierBenchmarks",
            dependencies: ["Courier", "CCore", "CCurlBench", "CourierTestServer"],
            path: "Benchmarks/CourierBenchmarks"
        ),
        // The command-line tool: demo, get, post, serve, bench.
        .executableTarget(
            name: "courier",
            dependencies: ["Courier", "CourierTestServer", "CourierBenchmarks"],
            path: "Sources/courier"
        ),
        .testTarget(
            name: "CourierTests",
            dependencies: ["Courier", "CourierTestServer"],
            path: "Tests/CourierTests"
        ),
    ]
)
