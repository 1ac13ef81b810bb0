import Foundation
import FerryModel
import FerryStore

extension DuplicateRule {
    /// `changeSet` with every URI of a merged duplicate replaced by its survivor's (`aliases`),
    /// and each change of a merged object reduced to what the survivor's entity has.
    static func following(_ aliases: [String: String], in changeSet: ChangeSet, model: ManagedObjectModel) -> ChangeSet {
        func name(_ uri: String) -> String { aliases[uri] ?? uri }
        var result = changeSet
        result.changes = changeSet.changes.map { original in
            var change = original
            change.uri = name(change.uri)
            change.mergedInto = change.mergedInto.map(name)
            change.values = change.values.mapValues { value in
                if case .object(let target) = value { return .object(name(target)) }
                return value
            }
            change.added = change.added.mapValues { $0.map(name) }
            change.removed = change.removed.mapValues { $0.map(name) }
            change.positions = change.positions.mapValues { keys in
                Dictionary(keys.map { (name($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
            }
            // A change of a merged object now changes the survivor: keep what the survivor's entity has.
            if change.uri != original.uri, case .success(let parts) = ObjectURIComponents.parse(change.uri),
               let entity = model.entity(named: parts.entityName) {
                change.entity = entity.name
                change.values = change.values.filter { entity.property(named: $0.key) != nil }
                change.added = change.added.filter { entity.relationship(named: $0.key) != nil }
                change.removed = change.removed.filter { entity.relationship(named: $0.key) != nil }
                change.positions = change.positions.filter { entity.relationship(named: $0.key) != nil }
            }
            return change
        }
        // Changes of two merged objects in one change set now write one object with one clock: the
        // greater value wins, as when the two merge (``loserWins(loser:survivor:loserValue:survivorValue:)``).
        var winners: [String: [String: ChangeValue]] = [:]
        for change in result.changes where change.kind == .update || change.kind == .insert || change.kind == .restore {
            for (property, value) in change.values {
                if let known = winners[change.uri]?[property], !text(of: known).utf8.lexicographicallyPrecedes(text(of: value).utf8) { continue }
                winners[change.uri, default: [:]][property] = value
            }
        }
        for index in result.changes.indices {
            let uri = result.changes[index].uri
            for property in result.changes[index].values.keys { if let value = winners[uri]?[property] { result.changes[index].values[property] = value } }
        }
        return result
    }
}

/// Merging duplicates during a replay (docs/SYNC.md, "Uniqueness constraints across replicas"):
/// the loser's values that are later than the survivor's, its to-many members and every
/// reference to it move to the survivor; the loser's row goes, and its origin URI becomes an
/// alias of the survivor's. What a merge changes is the merge's own, recorded by it (not as
/// changes of this store), so every replica that merges the two ends the same.
extension MergeExecutor {
    /// Finds objects of this merge that share a unique key with another object, and merges each
    /// pair (the survivor is the one whose origin URI sorts first), recording the merges as a
    /// change set of this store. Merging can make new duplicates: a few rounds settle them.
    mutating func mergeFoundDuplicates() throws {
        guard store.model.hasUniquenessConstraints else { return }
        for _ in 0..<8 {
            let candidates = context.pendingConstrainedObjects()
            guard !candidates.isEmpty else { return }
            let collisions = try context.uniquenessCollisions(of: candidates)
            guard !collisions.isEmpty else { return }
            for collision in collisions where !collision.object.isDeleted && !collision.other.isDeleted {
                let objectURI = try uri(of: collision.object)
                let (survivorURI, loserURI) = DuplicateRule.order(objectURI, try uri(of: collision.other))
                let (survivor, loser) = objectURI == survivorURI ? (collision.object, collision.other) : (collision.other, collision.object)
                try mergeDuplicate(loser: loser, loserURI: loserURI, into: survivor, survivorURI: survivorURI, isReplayed: false)
            }
            try context.processPendingChanges()
        }
    }

    /// The origin URI of an object of the context.
    func uri(of object: ManagedObject) throws -> String {
        if let uri = annotation.originURIs[object.objectID] { return uri }
        if let uri = objects.first(where: { $0.value === object })?.key { return uri }
        return try store.originURI(of: object.objectID)
    }

    /// The clocks that decide a merge or a count repair: the stored ones, with the writes this
    /// merge makes (an object the change set created has none: its facts date from its insert).
    func stamps(of object: ManagedObject) throws -> [String: WriteStamp] {
        var result = object.objectID.isTemporaryID ? [:] : try store.lastWrites(of: object.objectID)
        let incoming = changeSet.stamp
        for property in annotation.writes[object.objectID] ?? [] { result[property] = incoming }
        for (property, stamp) in annotation.mergeStamps[object.objectID] ?? [:] { result[property] = stamp }
        return result
    }

    /// Merges `loser` into `survivor` (see the type's notes) and deletes the loser.
    mutating func mergeDuplicate(loser: ManagedObject, loserURI: String, into survivor: ManagedObject, survivorURI: String,
                                 isReplayed: Bool) throws {
        guard loser !== survivor, !loser.isDeleted, !survivor.isDeleted else { return }
        let model = store.model
        let loserStamps = try stamps(of: loser), survivorStamps = try stamps(of: survivor)
        var touched: [ObjectID: Set<String>] = [:]
        var stamped: [String: WriteStamp] = [:]
        // (A reference a local No Action delete left pointing at nothing counts as none.)
        func resolved(_ object: ManagedObject?) -> ManagedObject? {
            guard let object, context.isStored(object) || object.isInserted else { return nil }
            return object === loser ? survivor : object
        }

        for property in survivor.entity.properties where property.isPersistent {
            guard let theirs = loser.entity.property(named: property.name) else { continue }
            switch (property, theirs) {
            case (.attribute, .attribute):
                // Values: the later write wins; the survivor keeps its own when neither was written since its insert.
                let theirs = try loser.attributeValue(forKey: property.name), mine = try survivor.attributeValue(forKey: property.name)
                guard DuplicateRule.loserWins(loser: loserStamps[property.name], survivor: survivorStamps[property.name],
                                              loserValue: DuplicateRule.text(of: theirs.map(ChangeValue.attribute) ?? .null),
                                              survivorValue: DuplicateRule.text(of: mine.map(ChangeValue.attribute) ?? .null)),
                      let stamp = loserStamps[property.name] else { continue }
                try survivor.setAttributeValue(theirs, forKey: property.name)
                stamped[property.name] = stamp
                touched[survivor.objectID, default: []].insert(property.name)
            case (.relationship(let relationship), .relationship) where !relationship.isToMany && model.isRecorded(relationship, in: survivor.entity):
                let target = resolved(try loser.value(forKey: property.name) as? ManagedObject)
                let current = resolved(try survivor.value(forKey: property.name) as? ManagedObject)
                guard DuplicateRule.loserWins(loser: loserStamps[property.name], survivor: survivorStamps[property.name],
                                              loserValue: try target.map { try uri(of: $0) } ?? "null",
                                              survivorValue: try current.map { try uri(of: $0) } ?? "null"),
                      let stamp = loserStamps[property.name] else { continue }
                try survivor.setToOneValue(target, forKey: property.name)
                stamped[property.name] = stamp
                touched[survivor.objectID, default: []].insert(property.name)
                if let inverse = relationship.inverseName, let target { touched[target.objectID, default: []].insert(inverse) }
            case (.relationship(let relationship), .relationship) where relationship.isToMany:
                try moveMembers(of: relationship, from: loser, loserURI: loserURI, to: survivor, survivorURI: survivorURI,
                                loserStamps: loserStamps, survivorStamps: survivorStamps, stamped: &stamped, touched: &touched)
            case (.relationship(let relationship), .relationship):
                // A one-to-one whose fact the partner holds: the partner follows the survivor, unless it has one.
                guard let partner = resolved(try loser.value(forKey: property.name) as? ManagedObject), let inverse = relationship.inverseName else { continue }
                touched[partner.objectID, default: []].insert(inverse)
                if try survivor.value(forKey: property.name) == nil {
                    try survivor.setToOneValue(partner, forKey: property.name)
                }
            default:
                continue
            }
        }
        try carryValues(from: loser, loserURI: loserURI, loserStamps: loserStamps, into: survivor, survivorURI: survivorURI,
                        survivorStamps: survivorStamps, stamped: &stamped, touched: &touched)
        try moveOneWayReferences(from: loser, to: survivor, touched: &touched)
        // Positions of the loser's ordered members: the later of the two keys, as values.
        for relationship in survivor.entity.relationships where relationship.isOrdered && !relationship.isTransient {
            guard loser.entity.relationship(named: relationship.name) != nil else { continue }
            var keys = loser.objectID.isTemporaryID ? [:] : try store.positions(of: loser.objectID, relationship: relationship.name)
            keys.merge(annotation.positions[loser.objectID]?[relationship.name] ?? [:]) { _, new in new }
            var own = survivor.objectID.isTemporaryID ? [:] : try store.positions(of: survivor.objectID, relationship: relationship.name)
            own.merge(annotation.positions[survivor.objectID]?[relationship.name] ?? [:]) { _, new in new }
            for (member, key) in keys.sorted(by: { $0.key < $1.key }) {
                let clockKey = RecordedChange.positionKey(relationship.name, member)
                guard own[member] == nil || DuplicateRule.loserWins(loser: loserStamps[clockKey], survivor: survivorStamps[clockKey],
                                                                    loserValue: key, survivorValue: own[member] ?? "") else { continue }
                annotation.positions[survivor.objectID, default: [:]][relationship.name, default: [:]][member] = key
                if let stamp = loserStamps[clockKey] { stamped[clockKey] = stamp }
            }
        }
        if !stamped.isEmpty { annotation.mergeStamps[survivor.objectID, default: [:]].merge(stamped) { _, new in new } }
        for (id, properties) in touched { annotation.mergeTouched[id, default: []].formUnion(properties) }
        annotation.merges.append(MergedDuplicate(loser: loser.objectID, loserURI: loserURI, survivorURI: survivorURI, isReplayed: isReplayed))
        objects[loserURI] = survivor
        // Nothing the loser held is left to its delete rules.
        for relationship in loser.entity.relationships where !relationship.isTransient {
            if relationship.isToMany {
                try loser.mutableSetValue(forKey: relationship.name).removeAll()
            } else {
                try loser.setToOneValue(nil, forKey: relationship.name)
            }
        }
        context.delete(loser)
    }

    /// Moves the loser's members of a to-many relationship to the survivor, membership fact by
    /// membership fact, as if the facts about the loser had been written on the survivor: for each
    /// member, the later of the two facts decides whether it is a member (a membership kept since an
    /// insert has no clock and yields to any written fact; a member the survivor knows nothing of
    /// simply moves). Facts kept on this side include the loser's removals, so a member the loser
    /// dropped after the survivor added it goes too. Facts the members hold (their to-one inverse, or
    /// their side of a many-to-many) change on the member and are the merge's; their removals of the
    /// loser are found by the members' clocks.
    private mutating func moveMembers(of relationship: RelationshipDescription, from loser: ManagedObject, loserURI: String,
                                      to survivor: ManagedObject, survivorURI: String,
                                      loserStamps: [String: WriteStamp], survivorStamps: [String: WriteStamp],
                                      stamped: inout [String: WriteStamp], touched: inout [ObjectID: Set<String>]) throws {
        let model = store.model
        let recordedHere = model.isRecorded(relationship, in: survivor.entity)
        let inverse = model.inverse(of: relationship)
        let target = try survivor.mutableSetValue(forKey: relationship.name)
        for fact in try membershipFacts(of: relationship, held: recordedHere, by: loser, stamps: loserStamps) {
            let added = fact.member === loser ? survivor : fact.member
            let memberURI = try uri(of: added)
            let isMember = target.contains(added)
            var loserWins = true
            if recordedHere {
                let key = RecordedChange.membershipKey(relationship.name, memberURI)
                let survivorStamp = survivorStamps[key]
                if isMember || survivorStamp != nil {
                    loserWins = DuplicateRule.loserWins(loser: fact.stamp, survivor: survivorStamp,
                                                        loserValue: fact.isMember ? "true" : "false", survivorValue: isMember ? "true" : "false")
                }
                if loserWins, let stamp = fact.stamp { stamped[key] = stamp }
                touched[survivor.objectID, default: []].insert(key)
            }
            if let inverse {
                if inverse.isToMany {
                    let memberStamps = try stamps(of: added)
                    let old = RecordedChange.membershipKey(inverse.name, loserURI), new = RecordedChange.membershipKey(inverse.name, survivorURI)
                    touched[added.objectID, default: []].formUnion([old, new])
                    if !recordedHere {
                        if isMember || memberStamps[new] != nil {
                            loserWins = DuplicateRule.loserWins(loser: memberStamps[old], survivor: memberStamps[new],
                                                                loserValue: "true", survivorValue: isMember ? "true" : "false")
                        }
                        if loserWins, let stamp = memberStamps[old] { annotation.mergeStamps[added.objectID, default: [:]][new] = stamp }
                    }
                } else {
                    touched[added.objectID, default: []].insert(inverse.name)
                }
            }
            guard loserWins else { continue }
            if fact.isMember, !isMember { try target.insert(added) }
            if !fact.isMember, isMember { try target.remove(added) }
        }
        if !recordedHere, let inverse, inverse.isToMany {
            try moveRemovalsHeldByMembers(of: relationship, inverse: inverse, from: loser, loserURI: loserURI, to: survivor, survivorURI: survivorURI,
                                          touched: &touched)
        }
    }

    /// For a many-to-many whose facts the members keep: the members that dropped the loser (a removal
    /// fact naming it, and no longer its members) weigh that removal against their fact about the survivor,
    /// as if it had named the survivor. Found by a scan of the clocks: merges are rare.
    private mutating func moveRemovalsHeldByMembers(of relationship: RelationshipDescription, inverse: RelationshipDescription,
                                                    from loser: ManagedObject, loserURI: String, to survivor: ManagedObject, survivorURI: String,
                                                    touched: inout [ObjectID: Set<String>]) throws {
        let old = RecordedChange.membershipKey(inverse.name, loserURI), new = RecordedChange.membershipKey(inverse.name, survivorURI)
        var holders = try store.writes(of: old)
        let incoming = changeSet.stamp
        for (id, properties) in annotation.writes where properties.contains(old) { holders[id] = incoming }
        let target = try survivor.mutableSetValue(forKey: relationship.name)
        let current = Set(try loser.mutableSetValue(forKey: relationship.name).objects.map { ObjectIdentifier($0) })
        for (id, stamp) in holders.sorted(by: { $0.key.uriString < $1.key.uriString }) {
            guard let member = try? context.existingObject(with: id), !member.isDeleted, member !== loser,
                  !current.contains(ObjectIdentifier(member)) else { continue }
            let isMember = target.contains(member)
            let survivorStamp = try stamps(of: member)[new]
            guard !isMember && survivorStamp == nil
                    || DuplicateRule.loserWins(loser: stamp, survivor: survivorStamp, loserValue: "false", survivorValue: isMember ? "true" : "false")
            else { continue }
            annotation.mergeStamps[member.objectID, default: [:]][new] = stamp
            touched[member.objectID, default: []].formUnion([old, new])
            if isMember { try target.remove(member) }
        }
    }

    /// The loser's membership facts of a to-many relationship: its current members, and, when the
    /// facts are kept on its side (`held`), the members it removed that still exist here.
    private mutating func membershipFacts(of relationship: RelationshipDescription, held: Bool, by loser: ManagedObject,
                                 stamps: [String: WriteStamp]) throws -> [(member: ManagedObject, isMember: Bool, stamp: WriteStamp?)] {
        var facts: [(member: ManagedObject, isMember: Bool, stamp: WriteStamp?)] = []
        var named = Set<String>()
        for member in try loser.mutableSetValue(forKey: relationship.name).objects where !member.isDeleted && (member.isInserted || context.isStored(member)) {
            let uri = try uri(of: member)
            named.insert(uri)
            facts.append((member, true, held ? stamps[RecordedChange.membershipKey(relationship.name, uri)] : nil))
        }
        guard held else { return facts }
        let prefix = relationship.name + " "
        let removed = stamps.keys.filter { $0.hasPrefix(prefix) && !named.contains(String($0.dropFirst(prefix.count))) }.sorted()
        guard !removed.isEmpty else { return facts }
        let uris = removed.map { String($0.dropFirst(prefix.count)) }
        let aliases = try store.aliases(of: uris)
        for (key, uri) in zip(removed, uris) {
            let current = aliases[uri] ?? uri
            guard !named.contains(current), let member = try object(named: current) else { continue }
            named.insert(current)
            facts.append((member, false, stamps[key]))
        }
        return facts
    }

    /// The live object an origin URI names here, if any.
    private mutating func object(named uri: String) throws -> ManagedObject? {
        if let known = objects[uri] { return known.isDeleted ? nil : known }
        guard let id = try store.localObjectID(forOriginURI: uri), let found = try? context.existingObject(with: id), !found.isDeleted else { return nil }
        objects[uri] = found
        return found
    }

    /// Attribute values the survivor's entity has no attribute for (the loser's own, and those earlier
    /// merges carried to it) are carried to the survivor, the later write winning over one it carries
    /// already; values carried to the loser that the survivor's entity has are weighed as the loser's own.
    /// So a duplicate that merges into a sibling entity first, and then on into an object that has the
    /// attribute, ends as if it had merged there directly.
    private mutating func carryValues(from loser: ManagedObject, loserURI: String, loserStamps: [String: WriteStamp],
                                      into survivor: ManagedObject, survivorURI: String, survivorStamps: [String: WriteStamp],
                                      stamped: inout [String: WriteStamp], touched: inout [ObjectID: Set<String>]) throws {
        var facts = try carriedValues(of: loserURI)
        annotation.carried[loserURI] = nil
        for attribute in loser.entity.attributes where !attribute.isTransient && survivor.entity.attribute(named: attribute.name) == nil {
            let value = try loser.attributeValue(forKey: attribute.name).map(ChangeValue.attribute) ?? .null
            facts[attribute.name] = CarriedValue(entity: loser.entity.name, value: value, stamp: loserStamps[attribute.name])
        }
        guard !facts.isEmpty else { return }
        var kept = try carriedValues(of: survivorURI)
        for (name, fact) in facts.sorted(by: { $0.key < $1.key }) {
            if survivor.entity.attribute(named: name) != nil {
                let mine = try survivor.attributeValue(forKey: name).map(ChangeValue.attribute) ?? .null
                guard DuplicateRule.loserWins(loser: fact.stamp, survivor: survivorStamps[name],
                                              loserValue: DuplicateRule.text(of: fact.value), survivorValue: DuplicateRule.text(of: mine)),
                      let stamp = fact.stamp else { continue }
                if case .attribute(let value) = fact.value {
                    try survivor.setAttributeValue(value, forKey: name)
                } else {
                    try survivor.setAttributeValue(nil, forKey: name)
                }
                stamped[name] = stamp
                touched[survivor.objectID, default: []].insert(name)
            } else {
                if let known = kept[name], !DuplicateRule.loserWins(loser: fact.stamp, survivor: known.stamp,
                                                                    loserValue: DuplicateRule.text(of: fact.value),
                                                                    survivorValue: DuplicateRule.text(of: known.value)) { continue }
                kept[name] = fact
                annotation.carried[survivorURI, default: [:]][name] = fact
            }
        }
    }

    /// The values carried to `uri`: those the store keeps, with this merge's.
    func carriedValues(of uri: String) throws -> [String: CarriedValue] {
        var result = try store.carriedValues(of: uri)
        result.merge(annotation.carried[uri] ?? [:]) { _, new in new }
        return result
    }

    /// Writes of the change set to attributes its object had but the survivor it was merged into lacks
    /// (`following` drops them from the change): they update the values carried to the survivor.
    mutating func carryWrites(of original: ChangeSet, aliases: [String: String]) throws {
        let incoming = original.stamp
        for change in original.changes where change.kind != .delete && change.kind != .merge {
            guard let survivorURI = aliases[change.uri], case .success(let parts) = ObjectURIComponents.parse(survivorURI),
                  let survivorEntity = store.model.entity(named: parts.entityName), let entity = store.model.entity(named: change.entity) else { continue }
            var known = try carriedValues(of: survivorURI)
            for (name, value) in change.values.sorted(by: { $0.key < $1.key })
            where survivorEntity.attribute(named: name) == nil && entity.attribute(named: name) != nil {
                if let last = known[name], !DuplicateRule.loserWins(loser: incoming, survivor: last.stamp, loserValue: DuplicateRule.text(of: value),
                                                                   survivorValue: DuplicateRule.text(of: last.value)) { continue }
                let carried = CarriedValue(entity: entity.name, value: value, stamp: incoming)
                known[name] = carried
                annotation.carried[survivorURI, default: [:]][name] = carried
            }
        }
    }

    /// One-way to-one references (no inverse to move them by) to the loser now name the survivor.
    private func moveOneWayReferences(from loser: ManagedObject, to survivor: ManagedObject, touched: inout [ObjectID: Set<String>]) throws {
        for owner in store.model.entities {
            for relationship in owner.ownRelationships where !relationship.isToMany && !relationship.isTransient && relationship.inverseName == nil {
                guard loser.entity.isKind(of: relationship.destinationEntityName),
                      survivor.entity.isKind(of: relationship.destinationEntityName) else { continue }
                let referrers = try context.fetch(FetchRequest(entityName: owner.name, predicate: .equal(relationship.name, .object(loser.objectID))))
                for referrer in referrers where !referrer.isDeleted {
                    try referrer.setToOneValue(survivor, forKey: relationship.name)
                    touched[referrer.objectID, default: []].insert(relationship.name)
                }
            }
        }
    }
}
