// swift-tools-version: 6.1
import PackageDescription

// The module graph follows docs/ARCHITECTURE.md: each target
// depends only on the rows below it, so a lower layer can never import a higher one.
let package = Package(
    name: "Ferry",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "FerryModel", targets: ["FerryModel"]),
        .library(name: "FerryStore", targets: ["FerryStore"]),
        .library(name: "FerrySigning", targets: ["FerrySigning"]),
        .library(name: "FerrySQLite", targets: ["FerrySQLite"]),
        .library(name: "FerrySync", targets: ["FerrySync"]),
        .library(name: "FerryServer", targets: ["FerryServer"]),
        .library(name: "FerryDaemon", targets: ["FerryDaemon"]),
        .library(name: "FerryRelay", targets: ["FerryRelay"]),
        // For an application's tests: replicas in one process, replicating as daemons do (docs/TESTING.md).
        .library(name: "FerryTesting", targets: ["FerryTesting"]),
        .executable(name: "ferry", targets: ["ferry"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // gzip of request and response bodies (zlib through NIO ByteBuffers); Hummingbird 2 has no compression of its own.
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // The one HTTP client of every peer (kept-alive connections, gzip, timeouts, cancellation, a
        // per-peer CA file). URLSession on Linux needed three workarounds and still ended the process on
        // a response cut inside its headers (docs/RELIABILITY.md). Already in the graph through Hummingbird.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // NIOHTTPTypesHTTP1 (already in the graph through Hummingbird): the daemon's HTTP/1 child
        // channel puts a handler before its HTTP/1-to-HTTP-types conversion (HTTP1Server.swift).
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Ed25519 signing keys of stores. Already in the graph through swift-certificates.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // The relay's change sets live in PostgreSQL: its client, pool and LISTEN/NOTIFY.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        .target(name: "FerryModel"),
        .target(name: "FerryStore", dependencies: ["FerryModel"]),
        // A store's Ed25519 key (swift-crypto): what signs its change sets and checks its peers'.
        // Apart from FerryStore, which only names a signer, so that FerryModel and
        // FerryStore keep no package dependency (scripts/fuzz compiles them alone).
        .target(
            name: "FerrySigning",
            dependencies: ["FerryStore", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .target(
            name: "FerrySQLite",
            dependencies: [
                // FerrySigning (swift-crypto): a store signs every change set it records with the key beside it.
                "FerryModel", "FerryStore", "FerrySigning",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The system SQLite module GRDB links: used to rebind prepared inserts in bulk saves.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // zlib, for change-set bodies stored compressed (20x smaller for W1's; docs/STORE.md).
                "CFerryZlib",
            ]
        ),
        // The system's zlib (zlib1g-dev) for FerrySQLite's stored bodies, called directly: through
        // compress-nio, a store-only application would build swift-nio for it.
        .target(name: "CFerryZlib", linkerSettings: [.linkedLibrary("z")]),
        // Merging change sets from other stores.
        .target(
            name: "FerrySync",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySigning",
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The HTTP API of docs/PROTOCOL.md and docs/openapi.yaml (Hummingbird 2).
        .target(
            name: "FerryServer",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySync", "FerrySigning",
                // The configuration files of `ferry run` and `ferry relay`, read one way (ConfigurationFile).
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CompressNIO", package: "compress-nio"),
                // Push streams end at the daemon's graceful shutdown (withGracefulShutdownHandler).
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The long-running daemon: configuration, peers, the sync loop, the server, systemd notification.
        .target(
            name: "FerryDaemon",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySigning", "FerrySQLite", "FerrySync", "FerryServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // `ferry relay`: the replication API over change sets kept in PostgreSQL, for fleets (docs/FLEET.md).
        // It never opens a store: it checks signatures (FerrySync's verifier) and stores lines as they are.
        .target(
            name: "FerryRelay",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySigning", "FerrySync", "FerryServer",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // Command implementations live in a library so the tests can reach their
        // helpers; the `ferry` executable is only `@main`.
        .target(
            name: "FerryCLI",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySigning", "FerrySQLite", "FerrySync", "FerryServer", "FerryDaemon", "FerryRelay",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .executableTarget(name: "ferry", dependencies: ["FerryCLI"]),
        // Replicas in one process for an application's tests: the daemon's sync runtime and routes joined by an
        // in-memory transport, a manual clock, partitions, a convergence check (docs/TESTING.md).
        .target(
            name: "FerryTesting",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySQLite", "FerrySync", "FerryServer", "FerryDaemon",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Helpers for Ferry's own tests: sample models, real `ferry` processes, a fault-injecting TCP proxy.
        .target(
            name: "FerryTestSupport",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySigning", "FerrySQLite", "FerrySync", "FerryServer", "FerryDaemon", "FerryTesting",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The `.blocking` test trait: suites that wait on processes run off Swift's cooperative pool.
        .target(name: "FerryTestTraits", dependencies: ["FerryStore"]),
        // Benchmarks compare Ferry with raw sqlite3 calls in the same run (docs/PERFORMANCE.md).
        .executableTarget(
            name: "FerryBenchmarks",
            dependencies: [
                "FerryModel", "FerryStore", "FerrySigning", "FerrySQLite", "FerrySync", "FerryTestSupport",
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // `--reads` compares the store's reads with GRDB's DatabasePool.read on the same file.
                .product(name: "GRDB", package: "GRDB.swift"),
                // W4's reference in the same run: PostgreSQL logical replication (already in the graph for the relay).
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(name: "FerryModelTests", dependencies: ["FerryModel", "FerryTestSupport"]),
        .testTarget(name: "FerryStoreTests", dependencies: ["FerryModel", "FerryStore", "FerrySigning", "FerryTestSupport"]),
        .testTarget(
            name: "FerrySQLiteTests",
            // (FerrySync: the migration parity tests apply earlier-version change sets to migrated stores.)
            dependencies: ["FerryTestTraits", "FerrySQLite", "FerrySync", "FerryTestSupport", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(name: "FerryCLITests", dependencies: ["FerryTestTraits", "FerryCLI", "FerryTestSupport"]),
        .testTarget(name: "FerrySyncTests", dependencies: ["FerryTestTraits", "FerrySync", "FerrySQLite", "FerrySigning", "FerryTestSupport",
                                                           .product(name: "GRDB", package: "GRDB.swift"),
                                                           .product(name: "CompressNIO", package: "compress-nio"),
                                                           .product(name: "NIOCore", package: "swift-nio")],
                    exclude: ["Fixtures"]),
        .testTarget(
            name: "FerryDaemonTests",
            dependencies: ["FerryTestTraits", "FerryModel", "FerrySQLite", "FerryDaemon", "FerryServer", "FerrySync", "FerrySigning", "FerryTestSupport",
                           "FerryTesting",
                           .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Yams", package: "Yams"),
                           .product(name: "CompressNIO", package: "compress-nio"), .product(name: "NIOCore", package: "swift-nio")]
        ),
        // The HTTP API in process, through Hummingbird's router test client.
        .testTarget(
            name: "FerryServerTests",
            dependencies: ["FerryServer", "FerrySync", "FerrySQLite", "FerryStore", "FerrySigning", "FerryModel", "FerryTestSupport",
                           .product(name: "HummingbirdTesting", package: "hummingbird"), .product(name: "CompressNIO", package: "compress-nio")]
        ),
        // FerryTesting as an application uses it.
        .testTarget(name: "FerryTestingTests", dependencies: ["FerryTesting", "FerryModel", "FerryStore"]),
        // Relays on real PostgreSQL clusters (started by the tests), fleets of daemons through them.
        .testTarget(
            name: "FerryRelayTests",
            dependencies: ["FerryTestTraits", "FerryRelay", "FerryServer", "FerryModel", "FerryStore", "FerrySQLite", "FerrySync", "FerrySigning",
                           "FerryTestSupport"]
        ),
        // Crashes, network faults, partitions, hostile input, credentials, slow clients, a full disk.
        .testTarget(
            name: "FerryReliabilityTests",
            dependencies: ["FerryTestTraits", "FerryModel", "FerryStore", "FerrySQLite", "FerrySync", "FerrySigning", "FerryTestSupport",
                           .product(name: "GRDB", package: "GRDB.swift")],
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
