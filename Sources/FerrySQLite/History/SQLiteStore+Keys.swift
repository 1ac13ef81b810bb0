import Foundation
import GRDB
import FerryStore
import FerrySigning

/// The store's keys (`Z_FERRY_KEY`) and how it signs what it records (docs/SYNC.md, "Signed change sets").
extension SQLiteStore {
    public func originKeys() throws -> [OriginKey] {
        try read { db in try Self.originKeys(in: db) }
    }

    public func recordOriginKey(_ key: OriginKey) throws {
        try write { db in try Self.record(key, in: db) }
    }

    static func originKeys(in db: Database) throws -> [OriginKey] {
        try Row.fetchAll(
            db.cachedStatement(sql: "SELECT Z_ORIGIN, Z_KEY, Z_FROM, Z_ENDORSEMENT, Z_SOURCE, Z_REVOKED FROM Z_FERRY_KEY ORDER BY Z_ORIGIN, Z_FROM"))
            .compactMap { row in
                guard let text: String = row[0], let origin = UUID(parsing: text), let source = OriginKey.Source(rawValue: row[4] ?? "") else { return nil }
                let revoked: Int64? = row[5]
                return OriginKey(origin: origin, publicKey: row[1], firstSequence: row[2], endorsement: row[3], source: source,
                                 revokedAfter: revoked.map(HybridTimestamp.init(rawValue:)))
            }
    }

    static func record(_ key: OriginKey, in db: Database) throws {
        try db.execute(sql: """
            INSERT OR REPLACE INTO Z_FERRY_KEY (Z_ORIGIN, Z_KEY, Z_FROM, Z_ENDORSEMENT, Z_SOURCE, Z_REVOKED) VALUES (?, ?, ?, ?, ?, ?)
            """, arguments: [key.origin.uuidString, key.publicKey, key.firstSequence, key.endorsement, key.source.rawValue, key.revokedAfter?.rawValue])
    }

    /// How the store at `path` signs: with `given`, else with the key file beside it when there is
    /// one. A key met for the first time becomes the store's (signing from its next sequence
    /// number: what it recorded before stays unsigned); a key that is not the store's newest is
    /// refused; a store with a key but none at hand records nothing (``ChangeSetSigning/unavailable(_:)``).
    static func signing(given: (any ChangeSetSigner)?, path: String, identifier: UUID, pool: DatabasePool) throws(StoreError) -> ChangeSetSigning {
        var key = given
        var problem: String?
        let defaultPath = StoreSigningKey.defaultPath(forStore: path)
        if key == nil {
            if FileManager.default.fileExists(atPath: defaultPath) {
                do { key = try StoreSigningKey(contentsOf: defaultPath) } catch { problem = error.description }
            } else {
                problem = "\(defaultPath): no key file there"
            }
        }
        do {
            return try pool.write { db throws -> ChangeSetSigning in
                let own = try originKeys(in: db).filter { $0.origin == identifier }
                guard let key else {
                    guard let newest = own.last else { return .unsigned }
                    return .unavailable("this store signs its change sets with key \(newest.publicKey), and this process cannot use it "
                                        + "(\(problem ?? "no key given")); open the store with its key (the daemon's store.signing_key), "
                                        + "or save through a process that can read it")
                }
                if let newest = own.last {
                    if newest.publicKey == key.publicKey { return .key(key) }
                    if own.contains(where: { $0.publicKey == key.publicKey }) {
                        throw StoreError.cannotOpen(path: path, reason: "the signing key given (public \(key.publicKey)) was rotated out; " +
                                                    "this store now signs with \(newest.publicKey): use that key's file")
                    }
                    throw StoreError.cannotOpen(path: path, reason: "the signing key given (public \(key.publicKey)) is not this store's " +
                                                "(it signs with \(newest.publicKey)): put the store's key file back, " +
                                                "or move the store to a new key with `ferry key rotate`")
                }
                let last = try HistoryLog(db: db, store: identifier).lastSequence(of: identifier)
                try record(OriginKey(origin: identifier, publicKey: key.publicKey, firstSequence: last + 1, source: .own), in: db)
                return .key(key)
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.storeFailure(failure(error))
        }
    }
}
