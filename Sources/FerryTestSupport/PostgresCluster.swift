import Foundation

/// A real PostgreSQL cluster for a test or a benchmark: `initdb` into a folder of its own, started
/// on 127.0.0.1 at a free port with trust authentication for the role `ferry`, stopped by ``stop()``
/// (or when the value goes away). Debian's `postgresql` package provides the programs
/// (`scripts/install-deps` installs it); `FERRY_PG_BINDIR` names another folder of them.
///
/// PostgreSQL refuses to run as root, so a test running as root runs the cluster's programs as the
/// `postgres` user (`runuser`), in a folder that user owns.
public final class PostgresCluster: Sendable {
    /// The port it listens on (127.0.0.1).
    public let port: Int
    /// The data folder.
    public let dataFolder: String
    private let binaries: String
    private let asUser: String?
    private let holder: TemporaryDirectory
    /// The server's options (`pg_ctl -o`), kept for ``start()`` after ``stop()``.
    private let options: String

    /// Why a cluster could not be set up.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Creates and starts a cluster. `durable: false` turns off `fsync` (tests that do not measure
    /// speed or survive power loss: a cluster set up per test then starts in about a second);
    /// benchmarks keep it on, with `synchronous_commit`, as a production relay's database would.
    /// `settings` are more server settings, `name=value` (W4's reference: `wal_level=logical`).
    public init(durable: Bool = false, settings: [String] = []) throws {
        binaries = try Self.findBinaries()
        asUser = geteuid() == 0 ? "postgres" : nil
        holder = TemporaryDirectory(prefix: "ferry-pg")
        dataFolder = holder.file("data")
        if let asUser {
            // The folder above must let the postgres user through; the data folder is its own.
            _ = try FerryProcess.run(executable: "/bin/chmod", ["755", holder.path])
            try FileManager.default.createDirectory(atPath: dataFolder, withIntermediateDirectories: true)
            _ = try Self.checked(FerryProcess.run(executable: "/bin/chown", ["-R", "\(asUser):", dataFolder]), "chown")
        }
        try Self.checked(Self.run(binaries + "/initdb", ["-D", dataFolder, "-U", "ferry", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"],
                                  as: asUser), "initdb")
        var port = 0
        var lastError = ""
        var options = ""
        // (A free port can be taken by someone else before the server binds it: try a few.)
        for _ in 0..<5 {
            port = try DaemonPeer.freePort()
            options = "-c listen_addresses=127.0.0.1 -p \(port) -k \(dataFolder) -c max_connections=300 -c shared_buffers=128MB"
            if !durable { options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off" }
            for setting in settings { options += " -c \(setting)" }
            let status = try Self.startServer(binaries + "/pg_ctl",
                                              ["-D", dataFolder, "-l", dataFolder + "/server.log", "-o", options, "-w", "-t", "60", "start"],
                                              as: asUser, output: holder.file("pg_ctl.log"))
            if status == 0 { break }
            lastError = ((try? String(contentsOfFile: holder.file("pg_ctl.log"), encoding: .utf8)) ?? "")
                + ((try? String(contentsOfFile: dataFolder + "/server.log", encoding: .utf8)) ?? "")
            port = 0
        }
        guard port != 0 else { throw Failure(description: "pg_ctl start failed: \(lastError.suffix(2000))") }
        self.port = port
        self.options = options
    }

    /// Starts the server again after ``stop()``, on the same port (a database back after an outage).
    public func start() throws {
        let status = try Self.startServer(binaries + "/pg_ctl", ["-D", dataFolder, "-l", dataFolder + "/server.log", "-o", options, "-w", "-t", "60", "start"],
                                          as: asUser, output: holder.file("pg_ctl.log"))
        guard status == 0 else {
            let log = (try? String(contentsOfFile: holder.file("pg_ctl.log"), encoding: .utf8)) ?? ""
            throw Failure(description: "pg_ctl start failed again: \(log.suffix(2000))")
        }
    }

    /// Creates the database `name` (owned by `ferry`).
    public func createDatabase(_ name: String) throws {
        try Self.checked(Self.run(binaries + "/createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "ferry", name], as: nil), "createdb \(name)")
    }

    /// Runs `sql` with psql in database `database`; returns what it printed (unaligned, tuples only).
    @discardableResult
    public func sql(_ sql: String, database: String) throws -> String {
        let result = try Self.run(binaries + "/psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "ferry", "-d", database, "-At", "-v", "ON_ERROR_STOP=1",
                                                       "-c", sql], as: nil)
        try Self.checked(result, "psql")
        return result.standardOutput
    }

    /// Stops the server (fast shutdown: open connections are cut).
    public func stop() {
        _ = try? Self.run(binaries + "/pg_ctl", ["-D", dataFolder, "-m", "fast", "-w", "stop"], as: asUser)
    }

    deinit {
        stop()
    }

    /// Runs `pg_ctl start` with its output in the file `output` and waits for it (not for its output
    /// to end: the server it starts lives on). Spawned and reaped here with posix_spawn and waitpid:
    /// Foundation's `Process` was seen never to notice this `runuser` end (left a zombie), and the
    /// test then waited for it until its timeout.
    private static func startServer(_ program: String, _ arguments: [String], as user: String?, output: String) throws -> Int32 {
        let argv = (user.map { ["/sbin/runuser", "-u", $0, "--", program] } ?? [program]) + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, &cArguments, environ)
        guard spawned == 0 else { throw Failure(description: "could not start \(argv[0]): error \(spawned)") }
        let deadline = Date().addingTimeInterval(90)
        var status: Int32 = 0
        while Date() < deadline {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f) }
            if result < 0 { return errno == ECHILD ? 0 : -1 }
            usleep(20_000)
        }
        Glibc.kill(pid, SIGKILL)
        _ = waitpid(pid, &status, 0)
        throw Failure(description: "pg_ctl start did not end within 90 s")
    }

    private static func run(_ program: String, _ arguments: [String], as user: String?) throws -> FerryProcess.Result {
        if let user { return try FerryProcess.run(executable: "/sbin/runuser", ["-u", user, "--", program] + arguments, in: "/") }
        return try FerryProcess.run(executable: program, arguments, in: "/")
    }

    @discardableResult
    private static func checked(_ result: FerryProcess.Result, _ what: String) throws -> FerryProcess.Result {
        guard result.status == 0 else {
            throw Failure(description: "\(what) failed (exit \(result.status)): \(result.standardError.suffix(2000))\(result.standardOutput.suffix(500))")
        }
        return result
    }

    /// The folder of PostgreSQL's programs: `FERRY_PG_BINDIR`, else Debian's newest
    /// `/usr/lib/postgresql/N/bin`, else the folder of `initdb` on the `PATH`.
    static func findBinaries() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        if let folder = environment["FERRY_PG_BINDIR"], FileManager.default.isExecutableFile(atPath: folder + "/initdb") { return folder }
        let debian = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: debian)) ?? []).compactMap(Int.init).sorted(by: >)
        for version in versions where FileManager.default.isExecutableFile(atPath: "\(debian)/\(version)/bin/initdb") {
            return "\(debian)/\(version)/bin"
        }
        for folder in (environment["PATH"] ?? "").split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/initdb") {
            return String(folder)
        }
        throw Failure(description: "PostgreSQL's programs (initdb, pg_ctl) were not found: " +
                      "install Debian's postgresql package (scripts/install-deps does), or set FERRY_PG_BINDIR")
    }
}
