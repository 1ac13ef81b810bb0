import Foundation
import FerryModel

/// Something a predicate can be evaluated on: an object of a context, or a row
/// of the in-memory store.
package protocol PredicateSubject {
    /// The value at a key path through to-one relationships.
    func value(at keyPath: String) throws -> KeyPathValue
    /// The members of the to-many relationship at the end of a key path.
    func members(at keyPath: String) throws -> [Self]
    /// The subject's own ID.
    var objectID: ObjectID { get }
}

/// The value found at the end of a key path on one object.
package enum KeyPathValue: Sendable, Hashable {
    case null
    case attribute(AttributeValue)
    case object(ObjectID)
}

/// Evaluates a ``FetchPredicate`` in memory, with the same semantics as the SQL
/// the SQLite store generates:
///
/// - `==` with `nil` matches only nil; `!=` with a value also matches nil
///   (Foundation's in-memory rule, which the SQL store follows with `IS NOT`).
/// - Ordering comparisons with nil on either side are false.
/// - Strings compare by UTF-8 bytes (SQLite's BINARY collation).
package struct PredicateEvaluator {
    package init() {}

    /// Evaluates `predicate` on one object (or row).
    package func evaluate<Subject: PredicateSubject>(_ predicate: FetchPredicate, on subject: Subject) throws -> Bool {
        switch predicate {
        case .alwaysTrue: return true
        case .alwaysFalse: return false
        case .and(let parts):
            for part in parts where try !evaluate(part, on: subject) { return false }
            return true
        case .or(let parts):
            for part in parts where try evaluate(part, on: subject) { return true }
            return false
        case .not(let inner):
            return try !evaluate(inner, on: subject)
        case .comparison(let keyPath, let op, let constant):
            return Self.compare(try subject.value(at: keyPath), op, constant)
        case .keyPathComparison(let keyPath, let op, let otherKeyPath):
            let other: PredicateValue = switch try subject.value(at: otherKeyPath) {
            case .null: .null
            case .attribute(let value): .attribute(value)
            case .object(let id): .object(id)
            }
            return Self.compare(try subject.value(at: keyPath), op, other)
        case .stringMatch(let keyPath, let op, let pattern, let options):
            guard case .attribute(.string(let text)) = try subject.value(at: keyPath) else { return false }
            return Self.match(text, op, pattern, options)
        case .membership(let keyPath, let values):
            let value = try subject.value(at: keyPath)
            return values.contains { Self.equal(value, $0) }
        case .quantified(let quantifier, let keyPath, let inner):
            let members = try subject.members(at: keyPath)
            switch quantifier {
            case .any: return try members.contains { try evaluate(inner, on: $0) }
            case .all: return try members.allSatisfy { try evaluate(inner, on: $0) }
            case .none: return try !members.contains { try evaluate(inner, on: $0) }
            }
        case .count(let keyPath, let op, let number):
            return Self.compare(.attribute(.integer(Int64(try subject.members(at: keyPath).count))), op, .attribute(.integer(number)))
        case .selfIn(let ids):
            return ids.contains(subject.objectID)
        case .subqueryCount(let keyPath, let inner, let op, let number):
            let matching = try subject.members(at: keyPath).count { try evaluate(inner, on: $0) }
            return Self.compare(.attribute(.integer(Int64(matching))), op, .attribute(.integer(number)))
        case .aggregate(let function, let keyPath, let key, let op, let constant):
            let values = try subject.members(at: keyPath).compactMap { member -> AttributeValue? in
                if case .attribute(let value) = try member.value(at: key) { return value }
                return nil
            }
            return Self.compare(Self.aggregate(function, values), op, constant)
        }
    }

    /// The aggregate of member values, as SQLite computes it: `@sum` of none is 0
    /// (SQLite's TOTAL), the others are nil; numbers aggregate as Double, dates by time.
    static func aggregate(_ function: CollectionFunction, _ values: [AttributeValue]) -> KeyPathValue {
        switch function {
        case .sum:
            return .attribute(.double(values.compactMap(\.numericValue).reduce(0, +)))
        case .avg:
            let numbers = values.compactMap(\.numericValue)
            return numbers.isEmpty ? .null : .attribute(.double(numbers.reduce(0, +) / Double(numbers.count)))
        case .min, .max:
            let best = values.reduce(nil as AttributeValue?) { current, value in
                guard let current else { return value }
                let order = AttributeValue.compare(value, current)
                return (function == .min ? order == .orderedAscending : order == .orderedDescending) ? value : current
            }
            return best.map(KeyPathValue.attribute) ?? .null
        }
    }

    /// The string operators' meaning, shared with the SQLite store's SQL function.
    package static func match(_ text: String, _ op: StringOperator, _ pattern: String, _ options: StringOptions) -> Bool {
        let c = options.contains(.caseInsensitive)
        let d = options.contains(.diacriticInsensitive)
        switch op {
        case .equal:
            return StringMatching.normalized(text, caseInsensitive: c, diacriticInsensitive: d).precomposedStringWithCanonicalMapping
                == StringMatching.normalized(pattern, caseInsensitive: c, diacriticInsensitive: d).precomposedStringWithCanonicalMapping
        case .beginsWith: return StringMatching.beginsWith(text, pattern, caseInsensitive: c, diacriticInsensitive: d)
        case .contains: return StringMatching.contains(text, pattern, caseInsensitive: c, diacriticInsensitive: d)
        case .endsWith: return StringMatching.endsWith(text, pattern, caseInsensitive: c, diacriticInsensitive: d)
        case .like: return StringMatching.like(text, pattern, caseInsensitive: c, diacriticInsensitive: d)
        case .matches: return StringMatching.matches(text, pattern, caseInsensitive: c, diacriticInsensitive: d) ?? false
        }
    }

    static func compare(_ lhs: KeyPathValue, _ op: ComparisonOperator, _ rhs: PredicateValue) -> Bool {
        switch op {
        case .equal: return equal(lhs, rhs)
        case .notEqual: return !equal(lhs, rhs)
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            guard case .attribute(let left) = lhs, case .attribute(let right) = rhs,
                  let order = AttributeValue.compare(left, right) else { return false }
            switch op {
            case .less: return order == .orderedAscending
            case .lessOrEqual: return order != .orderedDescending
            case .greater: return order == .orderedDescending
            default: return order != .orderedAscending
            }
        }
    }

    static func equal(_ lhs: KeyPathValue, _ rhs: PredicateValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.attribute(let a), .attribute(let b)): return AttributeValue.compare(a, b) == .orderedSame
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    /// Whether a result with sort keys `lhs` comes before one with `rhs`;
    /// nil when the descriptors rank them equal (callers break the tie).
    package static func precedes(_ lhs: [KeyPathValue], _ rhs: [KeyPathValue], by descriptors: [FetchSortDescriptor]) -> Bool? {
        for (position, descriptor) in descriptors.enumerated() {
            let order: ComparisonResult
            if descriptor.caseInsensitive, case .attribute(.string(let a)) = lhs[position], case .attribute(.string(let b)) = rhs[position] {
                order = caseInsensitiveOrder(a, b)
            } else {
                order = Self.order(lhs[position], rhs[position])
            }
            if order == .orderedSame { continue }
            return descriptor.ascending ? order == .orderedAscending : order == .orderedDescending
        }
        return nil
    }

    /// Orders two strings by their Unicode case folding (then canonical
    /// composition), comparing UTF-8 bytes: the order of case-insensitive
    /// sorts, shared with the SQLite store's `ferry_casefold` collation.
    package static func caseInsensitiveOrder(_ a: String, _ b: String) -> ComparisonResult {
        let x = Array(StringMatching.normalized(a, caseInsensitive: true, diacriticInsensitive: false).precomposedStringWithCanonicalMapping.utf8)
        let y = Array(StringMatching.normalized(b, caseInsensitive: true, diacriticInsensitive: false).precomposedStringWithCanonicalMapping.utf8)
        if x == y { return .orderedSame }
        return x.lexicographicallyPrecedes(y) ? .orderedAscending : .orderedDescending
    }

    /// Orders two key-path values for sorting: nil first, then by value.
    package static func order(_ lhs: KeyPathValue, _ rhs: KeyPathValue) -> ComparisonResult {
        switch (lhs, rhs) {
        case (.null, .null): return .orderedSame
        case (.null, _): return .orderedAscending
        case (_, .null): return .orderedDescending
        case (.attribute(let a), .attribute(let b)): return AttributeValue.compare(a, b) ?? .orderedSame
        case (.object(let a), .object(let b)):
            let (x, y) = (a.primaryKey ?? 0, b.primaryKey ?? 0)
            return x < y ? .orderedAscending : (x > y ? .orderedDescending : .orderedSame)
        default: return .orderedSame
        }
    }
}

extension FetchRequest {
    /// Checks the entity, every key path and every constant against the model.
    package func validated(in model: ManagedObjectModel) throws(QueryError) -> EntityDescription {
        guard let entity = model.entity(named: entityName) else { throw QueryError.unknownEntity(entityName) }
        if let predicate { try Self.check(predicate, entity: entity, model: model) }
        for sort in sortDescriptors {
            let path = try ResolvedKeyPath.resolve(sort.keyPath, from: entity, in: model)
            if path.final.relationship != nil {
                throw QueryError.typeMismatch(entity: entity.name, keyPath: sort.keyPath, expected: "a relationship",
                                              value: "a sort order (sort by one of its attributes instead)")
            }
            if sort.caseInsensitive, let type = path.final.attribute?.type, type != .string {
                throw QueryError.typeMismatch(entity: entity.name, keyPath: sort.keyPath, expected: type.xcodeName,
                                              value: "a case-insensitive sort, which needs a String attribute")
            }
        }
        for keyPath in propertiesToFetch {
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            if let attribute = path.final.attribute, attribute.isTransient {
                throw QueryError.typeMismatch(entity: path.finalEntity.name, keyPath: keyPath, expected: "a transient attribute",
                                              value: "a property to fetch (transient values are never stored)")
            }
        }
        return entity
    }

    private static func check(_ predicate: FetchPredicate, entity: EntityDescription, model: ManagedObjectModel) throws(QueryError) {
        switch predicate {
        case .alwaysTrue, .alwaysFalse: return
        case .and(let parts), .or(let parts):
            for part in parts { try check(part, entity: entity, model: model) }
        case .not(let inner):
            try check(inner, entity: entity, model: model)
        case .comparison(let keyPath, _, let value):
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            try value.check(against: path, keyPath: keyPath, entity: entity.name)
        case .keyPathComparison(let keyPath, let op, let otherKeyPath):
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            let other = try ResolvedKeyPath.resolve(otherKeyPath, from: entity, in: model)
            try path.checkComparable(with: other, op, keyPath: keyPath, otherKeyPath: otherKeyPath, entity: entity.name, model: model)
        case .stringMatch(let keyPath, let op, let pattern, _):
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            guard path.final.attribute?.type == .string else {
                throw QueryError.typeMismatch(entity: entity.name, keyPath: keyPath, expected: path.final.attribute?.type.xcodeName ?? "a relationship",
                                              value: "\(op.rawValue), which needs a String attribute")
            }
            if op == .matches, (try? NSRegularExpression(pattern: pattern)) == nil {
                throw QueryError.invalidRegularExpression(entity: entity.name, keyPath: keyPath, pattern: pattern)
            }
        case .membership(let keyPath, let values):
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            for value in values { try value.check(against: path, keyPath: keyPath, entity: entity.name) }
        case .quantified(_, let keyPath, let inner):
            let path = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
            try check(inner, entity: path.destination, model: model)
        case .count(let keyPath, _, _):
            _ = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
        case .selfIn:
            return
        case .subqueryCount(let keyPath, let inner, _, _):
            let path = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
            try check(inner, entity: path.destination, model: model)
        case .aggregate(let function, let keyPath, let key, _, let value):
            let path = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
            let member = try ResolvedKeyPath.resolve(key, from: path.destination, in: model)
            guard let attribute = member.final.attribute, member.hops.isEmpty,
                  attribute.type.isNumeric || (attribute.type == .date && (function == .min || function == .max)) else {
                throw QueryError.typeMismatch(entity: path.destination.name, keyPath: "\(keyPath).@\(function.rawValue).\(key)",
                                              expected: "a number attribute (or a date for @min/@max)", value: "'\(key)'")
            }
            try value.check(against: member, keyPath: key, entity: path.destination.name)
        }
    }
}
