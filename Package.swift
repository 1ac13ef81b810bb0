// swift-tools-version: 6.1
import PackageDescription

// The module graph follows docs/ARCHITECTURE (DESIGN.md "Modules"): each target
// depends only on the rows below it, so a lower layer can never import a higher one.
let package = Package(
    name: "Ferry",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "FerryModel", targets: ["FerryModel"]),
        .library(name: "FerryStore", targets: ["FerryStore"]),
        .library(name: "FerrySQLite", targets: ["FerrySQLite"]),
        .library(name: "FerrySync", targets: ["FerrySync"]),
        .executable(name: "ferry", targets: ["ferry"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        .target(name: "FerryModel"),
        .target(name: "FerryStore", dependencies: ["FerryModel"]),
        .target(
            name: "FerrySQLite",
            dependencies: [
                "FerryStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The system SQLite module GRDB links: used to rebind prepared inserts in bulk saves.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // Merging change sets from other stores.
        .target(name: "FerrySync", dependencies: ["FerryModel", "FerryStore", "FerrySQLite"]),
        // Command implementations live in a library so the tests can reach their
        // helpers; the `ferry` executable is only `@main`.
        .target(
            name: "FerryCLI",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySQLite", "FerrySync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "ferry", dependencies: ["FerryCLI"]),
        .target(name: "FerryTestSupport", dependencies: ["FerryModel", "FerryStore", "FerrySQLite"]),
        // Benchmarks compare Ferry with raw sqlite3 calls in the same run (docs/PERFORMANCE.md).
        .executableTarget(
            name: "FerryBenchmarks",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySQLite", "FerrySync", "FerryTestSupport",
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        .testTarget(name: "FerryModelTests", dependencies: ["FerryModel", "FerryTestSupport"]),
        .testTarget(name: "FerryStoreTests", dependencies: ["FerryModel", "FerryStore", "FerryTestSupport"]),
        .testTarget(
            name: "FerrySQLiteTests",
            dependencies: ["FerrySQLite", "FerryTestSupport", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(name: "FerryCLITests", dependencies: ["FerryCLI", "FerryTestSupport"]),
        .testTarget(name: "FerrySyncTests", dependencies: ["FerrySync", "FerrySQLite", "FerryTestSupport"], exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)
