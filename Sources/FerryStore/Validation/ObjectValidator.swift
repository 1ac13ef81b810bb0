import Foundation
import FerryModel

/// When a custom validator runs.
public enum ValidationPhase: String, Sendable, Hashable, CaseIterable {
    case insert, update, delete
}

/// A validation rule written in code for one entity (and its subentities),
/// registered with the container. Throw a ``ValidationError`` (or any error,
/// reported as `.custom`) to refuse the save.
public struct EntityValidator: Sendable {
    /// The entity the rule applies to; subentities inherit it.
    public var entityName: String
    /// The phases the rule runs in.
    public var phases: Set<ValidationPhase>
    /// The rule.
    public var validate: @Sendable (ManagedObject, ValidationPhase) throws -> Void

    /// Creates a rule.
    public init(entityName: String, phases: Set<ValidationPhase> = Set(ValidationPhase.allCases),
                validate: @escaping @Sendable (ManagedObject, ValidationPhase) throws -> Void) {
        self.entityName = entityName
        self.phases = phases
        self.validate = validate
    }
}

/// Checks one object against the model's rules and the custom validators.
struct ObjectValidator {
    let context: ManagedObjectContext

    /// Deny rules: a deleted object whose Deny relationship still has a
    /// destination that is not itself being deleted.
    func denyFailures(of object: ManagedObject) -> [ValidationError] {
        var failures: [ValidationError] = []
        for index in object.runtime.toOneIndexes + object.runtime.toManyIndexes {
            guard let relationship = object.runtime.relationship(at: index), relationship.deleteRule == .deny else { continue }
            let remaining = ((try? context.destinations(of: object, index)) ?? []).filter { !$0.isDeleted }
            guard !remaining.isEmpty else { continue }
            let names = remaining.prefix(3).map(\.objectID.uriString).joined(separator: ", ")
            failures.append(failure(.relationshipDeniedDelete, object, relationship.name,
                                    "cannot delete: relationship '\(relationship.name)' has the Deny rule and still holds \(remaining.count) object(s) " +
                                        "(\(names)); remove them from it or delete them first"))
        }
        return failures
    }

    /// Non-optional properties, bounds, lengths, patterns and to-many counts.
    func modelRuleFailures(of object: ManagedObject) -> [ValidationError] {
        guard object.runtime.hasModelRules else { return [] }
        var failures: [ValidationError] = []
        for (index, kind) in object.runtime.kinds.enumerated() {
            switch kind {
            case .attribute(let attribute):
                failures += attributeFailures(object, attribute, object.attributes[index])
            case .toOne(let relationship):
                if !relationship.isOptional && object.toOne[index].flatMap({ context.object(forKey: $0) }) == nil {
                    failures.append(failure(.missingMandatoryProperty, object, relationship.name,
                                            "the relationship is required; set it to a \(relationship.destinationEntityName)"))
                }
            case .toMany(let relationship):
                // Not loaded: empty for a new object, unchanged (and so already checked) for a saved one.
                guard let members = object.toMany[index] ?? (object.unloadedToManyIsEmpty ? RelationshipMembers([]) : nil) else { continue }
                let count = members.ordered.count { context.object(forKey: $0)?.isDeleted == false }
                if count == 0 {
                    if !relationship.isOptional {
                        let needed = max(relationship.minCount, 1)
                        failures.append(failure(.relationshipLacksMinimumCount, object, relationship.name,
                                                "the relationship is required and empty; add at least \(needed) \(relationship.destinationEntityName)"))
                    }
                    continue
                }
                if relationship.minCount > 0 && count < relationship.minCount {
                    failures.append(failure(.relationshipLacksMinimumCount, object, relationship.name,
                                            "holds \(count) object(s); at least \(relationship.minCount) are required"))
                }
                if relationship.maxCount > 0 && count > relationship.maxCount {
                    failures.append(failure(.relationshipExceedsMaximumCount, object, relationship.name,
                                            "holds \(count) object(s); at most \(relationship.maxCount) are allowed"))
                }
            }
        }
        return failures
    }

    /// The model's rules for one to-one or to-many relationship holding `count` objects (0 or 1 for a to-one).
    func relationshipFailures(_ object: ManagedObject, _ relationship: RelationshipInfo, count: Int) -> [ValidationError] {
        if count == 0 {
            guard !relationship.isOptional else { return [] }
            return [failure(relationship.isToMany ? .relationshipLacksMinimumCount : .missingMandatoryProperty, object, relationship.name,
                            "the relationship is required; set it to at least one \(relationship.destinationEntityName)")]
        }
        guard relationship.isToMany else { return [] }
        if relationship.minCount > 0 && count < relationship.minCount {
            return [failure(.relationshipLacksMinimumCount, object, relationship.name,
                            "holds \(count) object(s); at least \(relationship.minCount) are required")]
        }
        if relationship.maxCount > 0 && count > relationship.maxCount {
            return [failure(.relationshipExceedsMaximumCount, object, relationship.name,
                            "holds \(count) object(s); at most \(relationship.maxCount) are allowed")]
        }
        return []
    }

    /// Runs the per-key hook (``KeyValidating/validate(_:forKey:)``) of an object whose subclass
    /// adopts ``KeyValidating`` for the properties at `indexes`, in that order; nothing for others.
    func keyHookFailures(of object: ManagedObject, indexes: some Sequence<Int>) -> [ValidationError] {
        guard object.runtime.validatesKeys, let validating = object as? any KeyValidating else { return [] }
        var failures: [ValidationError] = []
        for index in indexes {
            let key = object.runtime.entity.properties[index].name
            let value: Any?
            do { value = try object.value(at: index, in: context) } catch { continue }
            do { try validating.validate(value, forKey: key) } catch { failures.append(wrapKeyed(error, object, key)) }
        }
        return failures
    }

    func wrapKeyed(_ error: Error, _ object: ManagedObject, _ key: String) -> ValidationError {
        if let validation = error as? ValidationError { return validation }
        return failure(.custom, object, key, "\(error)")
    }

    func attributeFailures(_ object: ManagedObject, _ attribute: AttributeInfo, _ value: AttributeValue?) -> [ValidationError] {
        guard let value else {
            return attribute.isOptional ? [] : [failure(.missingMandatoryProperty, object, attribute.name,
                                                        "the attribute is required; give it a \(attribute.type.xcodeName) value")]
        }
        let rules = attribute.validation
        var failures: [ValidationError] = []
        switch value {
        case .string(let text):
            let length = text.count
            if let minimum = rules.minimum?.numericValue, Double(length) < minimum {
                failures.append(failure(.stringTooShort, object, attribute.name, "is \(length) characters long; the minimum is \(Int(minimum))"))
            }
            if let maximum = rules.maximum?.numericValue, Double(length) > maximum {
                failures.append(failure(.stringTooLong, object, attribute.name, "is \(length) characters long; the maximum is \(Int(maximum))"))
            }
            if let pattern = rules.regularExpression, !wholeMatch(text, pattern) {
                failures.append(failure(.stringPatternMatching, object, attribute.name, "'\(text)' does not match the pattern \(pattern)"))
            }
        case .date(let date):
            if case .date(let minimum)? = rules.minimum, date < minimum {
                failures.append(failure(.dateTooSoon, object, attribute.name, "\(iso(date)) is before the earliest allowed date \(iso(minimum))"))
            }
            if case .date(let maximum)? = rules.maximum, date > maximum {
                failures.append(failure(.dateTooLate, object, attribute.name, "\(iso(date)) is after the latest allowed date \(iso(maximum))"))
            }
        default:
            guard attribute.type.isNumeric else { break }
            if let minimum = rules.minimum, AttributeValue.compare(value, minimum) == .orderedAscending {
                failures.append(failure(.numberTooSmall, object, attribute.name, "\(value.modelString) is below the minimum \(minimum.modelString)"))
            }
            if let maximum = rules.maximum, AttributeValue.compare(value, maximum) == .orderedDescending {
                failures.append(failure(.numberTooLarge, object, attribute.name, "\(value.modelString) is above the maximum \(maximum.modelString)"))
            }
        }
        return failures
    }

    /// Runs the subclass hook and the container's validators for one phase.
    func custom(_ object: ManagedObject, _ phase: ValidationPhase, hook: () throws -> Void) -> [ValidationError] {
        var failures: [ValidationError] = []
        do { try hook() } catch { failures.append(wrap(error, object)) }
        for validator in context.container.validators(for: object.runtime, phase: phase) {
            do { try validator.validate(object, phase) } catch { failures.append(wrap(error, object)) }
        }
        return failures
    }

    private func wrap(_ error: Error, _ object: ManagedObject) -> ValidationError {
        if let validation = error as? ValidationError { return validation }
        return failure(.custom, object, nil, "\(error)")
    }

    private func failure(_ code: ValidationError.Code, _ object: ManagedObject, _ key: String?, _ message: String) -> ValidationError {
        ValidationError(code: code, entityName: object.runtime.name, objectURI: object.objectID.uriString, key: key, message: message)
    }

    private func wholeMatch(_ text: String, _ pattern: String) -> Bool {
        guard let expression = context.container.regularExpression(pattern) else { return false }
        let range = NSRange(text.startIndex..., in: text)
        guard let match = expression.firstMatch(in: text, options: [.anchored], range: range) else { return false }
        return match.range == range
    }

    private func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
}
