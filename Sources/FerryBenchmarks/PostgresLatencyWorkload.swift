import Foundation
import Logging
import PostgresNIO
import FerryTestSupport

/// W4's reference, measured in the same run: PostgreSQL logical replication between two local
/// clusters: the reference W4 is measured against (docs/PERFORMANCE.md).
/// On this machine the same W4 binary gives p50s from 1.8 to 3.8 ms within an hour; a reference
/// taken minutes apart says whether a slow run is Ferry's or the machine's.
///
/// Like W4: one row inserted on A (durable commit: `fsync` and `synchronous_commit` on), then
/// waited for on B, whose apply worker commits durably too (the subscription's
/// `synchronous_commit = on`); saves 20–60 ms apart. The waiting side is woken, not polling (a
/// poll would take one of the two cores from the apply worker): a trigger on B's table, enabled
/// for replicated rows, sends `NOTIFY` with the row's id, and the time is taken when this
/// process's `LISTEN` connection gets it — as W4's reader is woken by B's commit.
enum PostgresLatencyWorkload {
    static func run(samples: Int) async throws {
        let settings = ["wal_level=logical", "max_wal_senders=4", "max_replication_slots=4"]
        let a = try PostgresCluster(durable: true, settings: settings)
        let b = try PostgresCluster(durable: true, settings: settings)
        defer { a.stop(); b.stop() }
        for cluster in [a, b] {
            try cluster.createDatabase("w4")
            try cluster.sql("CREATE TABLE person (id bigint PRIMARY KEY, name text NOT NULL)", database: "w4")
        }
        try a.sql("CREATE PUBLICATION w4 FOR TABLE person", database: "w4")
        try b.sql("""
            CREATE FUNCTION person_seen() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_notify('person_seen', NEW.id::text); RETURN NEW; END $$;
            CREATE TRIGGER person_seen AFTER INSERT ON person FOR EACH ROW EXECUTE FUNCTION person_seen();
            ALTER TABLE person ENABLE ALWAYS TRIGGER person_seen;
            """, database: "w4")
        try b.sql("""
            CREATE SUBSCRIPTION w4 CONNECTION 'host=127.0.0.1 port=\(a.port) user=ferry dbname=w4'
            PUBLICATION w4 WITH (synchronous_commit = 'on')
            """, database: "w4")
        try await waitForSubscription(on: b)

        let logger = {
            var logger = Logger(label: "w4-postgres")
            logger.logLevel = .error
            return logger
        }()
        let writer = try await PostgresConnection.connect(configuration: configuration(a), id: 1, logger: logger)
        let listener: PostgresConnection
        do {
            listener = try await PostgresConnection.connect(configuration: configuration(b), id: 2, logger: logger)
        } catch {
            try? await writer.close()
            throw error
        }
        let measured: Result<(fromInsert: [Double], fromCommit: [Double]), any Error>
        do {
            measured = .success(try await measure(samples: samples, writer: writer, listener: listener, logger: logger))
        } catch {
            measured = .failure(error)
        }
        try? await writer.close()
        try? await listener.close()
        let (fromInsert, fromCommit) = try measured.get()
        print(String(format: "W4 reference: PostgreSQL logical replication, %d rows inserted on A until B's LISTEN hears each: " +
                         "p50 %.2f ms, p99 %.2f ms, max %.1f ms",
                     samples, percentile(fromInsert, 0.5), percentile(fromInsert, 0.99), fromInsert.last ?? 0))
        print(String(format: "  the same from each insert's return (A's commit): p50 %.1f ms, p99 %.1f ms",
                     percentile(fromCommit, 0.5), percentile(fromCommit, 0.99)))
    }

    /// The samples, in ms, sorted: from each insert's call and from its return until B's notification.
    /// Fails when the whole run outlasts two minutes (a lost notification would otherwise wait forever).
    private static func measure(samples: Int, writer: PostgresConnection, listener: PostgresConnection,
                                logger: Logger) async throws -> (fromInsert: [Double], fromCommit: [Double]) {
        try await withThrowingTaskGroup(of: (fromInsert: [Double], fromCommit: [Double])?.self) { group in
            group.addTask {
                try await listener.listen(on: "person_seen") { notifications in
                    var seen = notifications.makeAsyncIterator()
                    /// Inserts row `id` on A and returns the milliseconds until B announces it, from the
                    /// call to insert and from its return (A's commit).
                    func insertAndWait(_ id: Int64) async throws -> (Double, Double) {
                        let start = DispatchTime.now().uptimeNanoseconds
                        try await writer.query("INSERT INTO person (id, name) VALUES (\(id), \("W4 \(id)"))", logger: logger)
                        let committed = DispatchTime.now().uptimeNanoseconds
                        while let notification = try await seen.next() {
                            if notification.payload == String(id) {
                                let shown = DispatchTime.now().uptimeNanoseconds
                                return (Double(shown - start) / 1e6, Double(shown - committed) / 1e6)
                            }
                        }
                        throw ReferenceFailure(description: "B's notifications ended before row \(id) came")
                    }
                    _ = try await insertAndWait(0)  // warm-up: the first row starts the apply worker's caches
                    var fromInsert: [Double] = []
                    var fromCommit: [Double] = []
                    for id in 1...Int64(samples) {
                        let (total, afterCommit) = try await insertAndWait(id)
                        fromInsert.append(total)
                        fromCommit.append(afterCommit)
                        try await Task.sleep(for: .milliseconds(Int.random(in: 20...60)))
                    }
                    return (fromInsert.sorted(), fromCommit.sorted())
                }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(120))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let samples = first else {
                throw ReferenceFailure(description: "B did not hear every row within 120 s")
            }
            return samples
        }
    }

    private static func configuration(_ cluster: PostgresCluster) -> PostgresConnection.Configuration {
        PostgresConnection.Configuration(host: "127.0.0.1", port: cluster.port, username: "ferry", password: nil, database: "w4", tls: .disable)
    }

    /// Waits until B's subscription has copied the (empty) table and streams changes (state `r`).
    private static func waitForSubscription(on cluster: PostgresCluster) async throws {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if try cluster.sql("SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'", database: "w4")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "0" { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ReferenceFailure(description: "B's subscription did not reach its streaming state within 60 s")
    }
}

/// Why the reference could not be measured.
struct ReferenceFailure: Error, CustomStringConvertible {
    let description: String
}
