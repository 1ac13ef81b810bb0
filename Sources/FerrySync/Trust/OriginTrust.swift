import Foundation
import Synchronization
import FerryStore
import FerrySigning

/// Which origins a store trusts, and with which keys (docs/SYNC.md, "Signed change sets"): the
/// keys its store holds (its own, pinned with `ferry trust add`, trusted on first use, endorsed by
/// a rotation), the keys of its configuration, and what it does with origins it knows no key of.
///
/// Shared by the replay (which checks every line with ``verifier``) and the sync rounds (which
/// ``learn(from:peer:)`` from the configured peers' states). Learned keys are written to the store
/// first, so a restart trusts what was trusted before it.
public final class OriginTrust: Sendable {
    /// What a store's configuration says about trust.
    public struct Policy: Sendable, Equatable {
        /// What happens to change sets of origins whose key is not known.
        public enum UnknownOrigins: String, Sendable, CaseIterable {
            /// Refused (4xx on a push, a failed round on a pull), never applied.
            case refuse
            /// Taken as they are, signed or not: only for a fleet moving to signatures (docs/SYNC.md).
            case accept
        }

        /// Keys given in the configuration (`trust.keys`), trusted whatever the store learned.
        public var pinned: [OriginKey]
        /// Keys revoked by the configuration (`trust.revoked`): origin, key, and from when.
        public var revocations: [Revocation]
        /// What happens to change sets of origins whose key is not known.
        public var unknownOrigins: UnknownOrigins
        /// Whether a configured peer's own key is trusted the first time the peer is seen.
        public var trustsPeersOnFirstUse: Bool

        public init(pinned: [OriginKey] = [], revocations: [Revocation] = [], unknownOrigins: UnknownOrigins = .refuse,
                    trustsPeersOnFirstUse: Bool = true) {
            self.pinned = pinned
            self.revocations = revocations
            self.unknownOrigins = unknownOrigins
            self.trustsPeersOnFirstUse = trustsPeersOnFirstUse
        }

        /// What a replay engine does unless told otherwise: check every change set of an origin
        /// whose key the store holds, and take the others as they are (a library caller applying
        /// change sets it produced itself). The daemon uses its configuration's policy.
        public static let storeKeysOnly = Policy(unknownOrigins: .accept, trustsPeersOnFirstUse: false)
    }

    /// A key revoked from a time on: its signatures on change sets made then or later are refused.
    public struct Revocation: Sendable, Hashable {
        public var origin: UUID
        public var publicKey: String
        public var after: HybridTimestamp

        public init(origin: UUID, publicKey: String, after: HybridTimestamp) {
            self.origin = origin
            self.publicKey = publicKey
            self.after = after
        }
    }

    /// What learning from a peer's state did, for the log.
    public enum Event: Sendable, Hashable, CustomStringConvertible {
        /// A key now trusted (first use, or a rotation endorsed by a trusted key).
        case learned(OriginKey, peer: String)
        /// A peer presents a key for an origin this store trusts another key for, without an
        /// endorsement by it: the key is not taken (an impostor, or a store whose key was replaced
        /// instead of rotated, which must then be pinned by hand).
        case conflict(origin: UUID, presented: String, trusted: String, peer: String)

        public var description: String {
            switch self {
            case .learned(let key, let peer):
                "trusting key \(key.publicKey) of \(key.origin.uuidString) for its change sets from \(key.firstSequence) on "
                    + "(\(key.source.rawValue), from peer \(peer))"
            case .conflict(let origin, let presented, let trusted, let peer):
                "peer \(peer) presents key \(presented) for \(origin.uuidString), which this store trusts with key \(trusted), without an endorsement by it; "
                    + "not taken. If that store's key was replaced rather than rotated (`ferry key rotate`), pin the new key: trust.keys, or `ferry trust add`"
            }
        }
    }

    /// The policy.
    public let policy: Policy
    private let store: any OriginKeyRing
    private let current: Mutex<ChangeSetVerifier>
    /// When the configured peers were last asked for keys (``shouldAskPeers(now:)``).
    private let lastAsked = Mutex<Date?>(nil)
    /// How often a refusal may send the daemon asking its peers for keys.
    static let askingInterval: TimeInterval = 5

    /// The trust of `store` under `policy`.
    /// - Throws: when the store's keys cannot be read.
    public init(store: any OriginKeyRing, policy: Policy = .storeKeysOnly) throws {
        self.store = store
        self.policy = policy
        self.current = Mutex(try Self.verifier(keys: store.originKeys(), policy: policy))
    }

    /// The keys trusted now, for checking lines on any thread.
    public var verifier: ChangeSetVerifier { current.withLock { $0 } }

    /// Reads the store's keys again (after `ferry trust` changed them, or a key was learned).
    public func reload() throws {
        let verifier = try Self.verifier(keys: store.originKeys(), policy: policy)
        current.withLock { $0 = verifier }
    }

    /// Whether a refusal that keys could lift may ask the configured peers now: at most once per
    /// ``askingInterval``, so a stream of forged change sets cannot keep the daemon asking.
    public func shouldAskPeers(now: Date = Date()) -> Bool {
        guard policy.trustsPeersOnFirstUse else { return false }
        return lastAsked.withLock { last in
            if let last, now.timeIntervalSince(last) < Self.askingInterval { return false }
            last = now
            return true
        }
    }

    /// Takes what `state`, a configured peer's answer, teaches: the peer's own first key when no
    /// key of it is known (trust on first use), and every rotation endorsed by a key already
    /// trusted, for any origin. Keys are written to the store before they are used.
    /// - Throws: when the store cannot record a key.
    @discardableResult
    public func learn(from state: HistoryState, peer: String) throws -> [Event] {
        guard state.store != store.identifier, !state.keys.isEmpty else { return [] }
        var known = Dictionary(grouping: try store.originKeys() + policy.pinned, by: \.origin)
        var events: [Event] = []
        for (origin, published) in Dictionary(grouping: state.keys, by: \.origin) {
            let offered = published.sorted { $0.from < $1.from }
            var chain = (known[origin] ?? []).sorted { $0.firstSequence < $1.firstSequence }
            if chain.isEmpty {
                // A peer introduces its own key only; a relay (the fleet's directory of keys, pinned there by
                // its operator: docs/FLEET.md) introduces the key of every origin it carries.
                guard origin == state.store || state.isRelay, policy.trustsPeersOnFirstUse, let first = offered.first,
                      VerifyingKey(base64: first.key) != nil, first.from >= 1 else { continue }
                let key = OriginKey(origin: origin, publicKey: first.key, firstSequence: first.from, endorsement: first.endorsement, source: .firstUse)
                try store.recordOriginKey(key)
                chain = [key]
                events.append(.learned(key, peer: peer))
            }
            for entry in offered where !chain.contains(where: { $0.publicKey == entry.key }) {
                guard let key = Self.endorsedRotation(entry, of: origin, after: chain) else {
                    if origin == state.store, entry.key == state.publicKey, let trusted = chain.last {
                        events.append(.conflict(origin: origin, presented: entry.key, trusted: trusted.publicKey, peer: peer))
                    }
                    continue
                }
                try store.recordOriginKey(key)
                chain.append(key)
                events.append(.learned(key, peer: peer))
            }
            known[origin] = chain
        }
        if events.contains(where: { if case .learned = $0 { true } else { false } }) { try reload() }
        return events
    }

    /// `entry`, a key offered for `origin`, as a rotation of `chain` (the origin's keys trusted now, by
    /// first sequence number): when it signs from after the chain's last key and that key endorsed it
    /// (`ChangeSetSignature.rotationMessage`); nil otherwise. What stores and relays take from peers.
    public static func endorsedRotation(_ entry: PublishedKey, of origin: UUID, after chain: [OriginKey]) -> OriginKey? {
        guard let previous = chain.last, entry.from > previous.firstSequence, let endorsement = entry.endorsement,
              let previousKey = VerifyingKey(base64: previous.publicKey), VerifyingKey(base64: entry.key) != nil,
              previousKey.isValid(signature: endorsement,
                                  of: ChangeSetSignature.rotationMessage(origin: origin, firstSequence: entry.from, publicKey: entry.key))
        else { return nil }
        return OriginKey(origin: origin, publicKey: entry.key, firstSequence: entry.from, endorsement: endorsement, source: .rotation)
    }

    /// The verifier for `keys` (the store's) and the policy's pinned keys and revocations. A pinned
    /// key takes the place of a stored one with the same first sequence number.
    public static func verifier(keys: [OriginKey], policy: Policy) -> ChangeSetVerifier {
        var chains: [UUID: [ChangeSetVerifier.Entry]] = [:]
        let pinnedPlaces = Set(policy.pinned.map { "\($0.origin.uuidString) \($0.firstSequence)" })
        let stored = keys.filter { !pinnedPlaces.contains("\($0.origin.uuidString) \($0.firstSequence)") || $0.source == .pinned }
        for key in policy.pinned + stored {
            guard let verifying = VerifyingKey(base64: key.publicKey) else { continue }
            var revoked = key.revokedAfter
            for revocation in policy.revocations where revocation.origin == key.origin && revocation.publicKey == key.publicKey {
                revoked = min(revoked ?? revocation.after, revocation.after)
            }
            var chain = chains[key.origin, default: []]
            if let index = chain.firstIndex(where: { $0.key == verifying }) {
                if let revoked { chain[index].revokedAfter = min(chain[index].revokedAfter ?? revoked, revoked) }
                chains[key.origin] = chain
                continue
            }
            chain.append(ChangeSetVerifier.Entry(key: verifying, firstSequence: key.firstSequence, revokedAfter: revoked))
            chains[key.origin] = chain.sorted { $0.firstSequence < $1.firstSequence }
        }
        return ChangeSetVerifier(chains: chains, acceptsUnknownOrigins: policy.unknownOrigins == .accept)
    }
}
