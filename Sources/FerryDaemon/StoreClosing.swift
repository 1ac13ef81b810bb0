import Logging
import ServiceLifecycle

/// Closes the daemon's store once the services that use it have stopped, so that a stopped
/// daemon leaves its store as one file (``SQLiteStore/close()``). First in the daemon's
/// `ServiceGroup`, it is the last service a graceful shutdown stops. After a cancellation (a
/// shutdown past its bounds) it does not close the store under services that may still run:
/// the log then stays beside the file, and the next open reads it.
struct StoreClosing: Service {
    let opening: StoreOpening
    let logger: Logger

    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            logger.debug("the daemon was cancelled: its store is left open to the end of the process")
            return
        }
        await opening.closeStore()
    }
}
