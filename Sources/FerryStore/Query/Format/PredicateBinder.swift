import Foundation
import FerryModel

extension FetchPredicate {
    /// Parses a Core Data predicate format string and checks it against `entity`.
    ///
    /// ```swift
    /// let predicate = try FetchPredicate(format: "manager.name ==[c] %@ AND id BETWEEN {1, 10}",
    ///                                    arguments: ["john"], entity: "Person", model: model)
    /// ```
    ///
    /// `%@` takes a value (`String`, any integer, `Double`, `Float`, `Decimal`,
    /// `Bool`, `Date`, `Data`, `UUID`, `URL`, `ObjectID`, `ManagedObject`, nil, or an
    /// array of these for `IN`); `%K` a key path; `%d`/`%i`/`%ld` an integer; `%f` a
    /// number; `%s` a string. `$NAME` takes its value from `variables` (all must
    /// be given, as with Core Data's templates).
    /// - Throws: ``PredicateFormatError`` quoting the predicate and pointing at the problem.
    public init(format: String, arguments: [Any?] = [], variables: [String: Any?] = [:],
                entity entityName: String, model: ManagedObjectModel) throws(PredicateFormatError) {
        guard let entity = model.entity(named: entityName) else {
            throw PredicateFormatError(code: .unknownKey, predicate: format, position: 0,
                                 message: "the model has no entity named '\(entityName)'", entity: nil, key: nil)
        }
        let parsed: (syntax: PredicateSyntax, argumentCount: Int)
        do {
            parsed = try PredicateParser.parse(format)
        } catch {
            throw PredicateFormatError(code: .syntax, predicate: format, position: error.position, message: error.message, entity: entityName, key: nil)
        }
        if parsed.argumentCount != arguments.count {
            throw PredicateFormatError(code: .argument, predicate: format, position: 0,
                                 message: "the predicate uses \(parsed.argumentCount) format argument(s) but \(arguments.count) were given",
                                 entity: entityName, key: nil)
        }
        let binder = PredicateBinder(source: format, entity: entity, model: model, arguments: arguments, variables: variables)
        self = try binder.bind(parsed.syntax)
    }
}

extension FetchRequest {
    /// A request for `entityName` filtered by a predicate format string.
    /// - Throws: ``PredicateFormatError`` for a bad predicate.
    public init(entityName: String, format: String, arguments: [Any?] = [], model: ManagedObjectModel) throws(PredicateFormatError) {
        self.init(entityName: entityName, predicate: try FetchPredicate(format: format, arguments: arguments, entity: entityName, model: model))
    }
}

extension FetchRequest {
    /// A request from one of the model's fetch request templates, with its
    /// `$VARIABLES` replaced (Core Data's `fetchRequestFromTemplate(withName:substitutionVariables:)`).
    /// Every variable the template uses must be given; the template is not changed.
    /// - Throws: ``PredicateFormatError``: `.unknownKey` for an unknown template
    ///   name, `.argument` for a missing variable, and any error of the predicate.
    public init(template name: String, substitutionVariables: [String: Any?] = [:], model: ManagedObjectModel) throws(PredicateFormatError) {
        guard let template = model.fetchRequestTemplate(named: name) else {
            let known = model.fetchRequestTemplates.keys.sorted().joined(separator: ", ")
            throw PredicateFormatError(code: .unknownKey, predicate: "", position: 0,
                                       message: "the model has no fetch request template named '\(name)' (it has: \(known.isEmpty ? "none" : known))",
                                       entity: nil, key: name)
        }
        var predicate: FetchPredicate?
        if let format = template.predicate {
            predicate = try FetchPredicate(format: format, variables: substitutionVariables, entity: template.entityName, model: model)
        }
        self.init(entityName: template.entityName, predicate: predicate, fetchLimit: template.fetchLimit)
    }
}

/// Turns a parsed predicate into a checked ``FetchPredicate`` for one entity.
struct PredicateBinder {
    let source: String
    let entity: EntityDescription
    let model: ManagedObjectModel
    let arguments: [Any?]
    let variables: [String: Any?]

    func bind(_ syntax: PredicateSyntax) throws(PredicateFormatError) -> FetchPredicate {
        switch syntax {
        case .constant(let value): return value ? .alwaysTrue : .alwaysFalse
        case .and(let parts): return .and(try parts.map { part throws(PredicateFormatError) in try bind(part) })
        case .or(let parts): return .or(try parts.map { part throws(PredicateFormatError) in try bind(part) })
        case .not(let inner): return .not(try bind(inner))
        case .comparison(let comparison): return try bind(comparison)
        }
    }

    // MARK: - Comparisons

    private func bind(_ comparison: ComparisonSyntax) throws(PredicateFormatError) -> FetchPredicate {
        if let modifier = comparison.modifier {
            return try bindQuantified(comparison, modifier)
        }
        if case .collectionOperator("count", .subquery(let collection, let variable, let inner, let position), let rest, _) = comparison.lhs, rest.isEmpty {
            return try bindSubqueryCount(collection, variable: variable, inner, at: position, comparison)
        }
        if case .collectionOperator("count", .keyPath(.implicit, let keys, let position), let rest, _) = comparison.lhs, rest.isEmpty {
            return try bindCount(keyPath: keys.joined(separator: "."), at: position, comparison)
        }
        if case .collectionOperator(let op, .keyPath(.implicit, let keys, let position), let rest, let opPosition) = comparison.lhs,
           let function = CollectionFunction(rawValue: op) {
            return try bindAggregate(function, keyPath: keys.joined(separator: "."), key: rest, at: position, operatorAt: opPosition, comparison)
        }
        var op = comparison.operator
        var keySide = comparison.lhs
        var valueSide = comparison.rhs
        if !isKeyPathLike(keySide), isKeyPathLike(valueSide) {
            // `3 < age` reads as `age > 3`; only the symmetric and ordering operators can be turned around.
            guard let flipped = Self.flipped(op) else {
                throw error(.unsupported, at: comparison.position, "a value on the left of \(op.rawValue) is not supported yet; put the key path on the left")
            }
            (keySide, valueSide, op) = (valueSide, keySide, flipped)
        }
        // `SELF.name` is `name`; bare `SELF` compares the object itself.
        if case .keyPath(.evaluatedObject, let keys, let position) = keySide {
            if keys.isEmpty { return try bindSelf(op, valueSide, at: comparison.position) }
            keySide = .keyPath(root: .implicit, keys: keys, position: position)
        }
        guard let path = try keyPath(of: keySide) else {
            throw error(.unsupported, at: keySide.position, "the left side must be a key path (\(keySide) is not supported here yet)")
        }
        let resolved = try resolve(path.keyPath, at: path.position)
        if isKeyPathLike(valueSide) {
            return try bindKeyPathComparison(path, resolved, op, valueSide, comparison)
        }
        let options = comparison.options
        switch op {
        case .equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual:
            let value = try value(of: valueSide, for: resolved, keyPath: path.keyPath)
            if !options.isEmpty {
                guard op == .equal || op == .notEqual, case .attribute(.string(let text)) = value else {
                    throw error(.unsupported, at: comparison.position, "[c] and [d] apply to == and != on strings and to the string operators")
                }
                let match = FetchPredicate.stringMatch(keyPath: path.keyPath, .equal, text, Self.stringOptions(options))
                return op == .equal ? match : .not(match)
            }
            return .comparison(keyPath: path.keyPath, Self.comparisonOperator(op), value)
        case .beginsWith, .contains, .endsWith, .like, .matches:
            guard resolved.final.attribute?.type == .string else {
                throw error(.typeMismatch, at: path.position, "\(op.rawValue) needs a String attribute; '\(path.keyPath)' is \(Self.describe(resolved))",
                            key: path.keyPath)
            }
            guard case .attribute(.string(let pattern)) = try value(of: valueSide, for: resolved, keyPath: path.keyPath) else {
                throw error(.typeMismatch, at: valueSide.position, "\(op.rawValue) needs a string on the right", key: path.keyPath)
            }
            if op == .matches, (try? NSRegularExpression(pattern: pattern)) == nil {
                throw error(.typeMismatch, at: valueSide.position, "'\(pattern)' is not a valid regular expression", key: path.keyPath)
            }
            return .stringMatch(keyPath: path.keyPath, Self.stringOperator(op), pattern, Self.stringOptions(options))
        case .in:
            return .membership(keyPath: path.keyPath, try values(of: valueSide, for: resolved, keyPath: path.keyPath))
        case .between:
            let bounds = try values(of: valueSide, for: resolved, keyPath: path.keyPath)
            guard bounds.count == 2 else {
                throw error(.typeMismatch, at: valueSide.position, "BETWEEN needs exactly two bounds, as in BETWEEN {1, 10}", key: path.keyPath)
            }
            return .and([.comparison(keyPath: path.keyPath, .greaterOrEqual, bounds[0]),
                         .comparison(keyPath: path.keyPath, .lessOrEqual, bounds[1])])
        }
    }

    /// `manager.id < id`: two key paths of the same object.
    private func bindKeyPathComparison(_ path: (keyPath: String, position: Int), _ resolved: ResolvedKeyPath, _ op: ComparisonSyntax.Operator,
                                       _ valueSide: ExpressionSyntax, _ comparison: ComparisonSyntax) throws(PredicateFormatError) -> FetchPredicate {
        var otherSide = valueSide
        if case .keyPath(.evaluatedObject, let keys, let position) = otherSide, !keys.isEmpty {
            otherSide = .keyPath(root: .implicit, keys: keys, position: position)
        }
        guard let other = try keyPath(of: otherSide) else {
            throw error(.unsupported, at: valueSide.position, "\(valueSide) is not supported on the right of a comparison")
        }
        guard let comparisonOperator = Self.numericOperator(op), comparison.options.isEmpty else {
            throw error(.unsupported, at: comparison.position,
                        "two key paths compare with ==, !=, <, <=, > or >= (without [c] or [d]); put a constant on the right for \(op.rawValue)",
                        key: path.keyPath)
        }
        let otherResolved = try resolve(other.keyPath, at: other.position)
        do {
            try resolved.checkComparable(with: otherResolved, comparisonOperator, keyPath: path.keyPath, otherKeyPath: other.keyPath,
                                         entity: entity.name, model: model)
        } catch {
            throw self.error(.typeMismatch, at: other.position,
                             "'\(path.keyPath)' is \(Self.describe(resolved)) and '\(other.keyPath)' is \(Self.describe(otherResolved)); " +
                                 "they cannot be compared with \(op.rawValue)",
                             key: path.keyPath)
        }
        return .keyPathComparison(keyPath: path.keyPath, comparisonOperator, otherKeyPath: other.keyPath)
    }

    // MARK: - SELF

    /// `SELF == %@`, `SELF != %@`, `SELF IN %@` with objects or object IDs.
    func bindSelf(_ op: ComparisonSyntax.Operator, _ valueSide: ExpressionSyntax, at position: Int) throws(PredicateFormatError) -> FetchPredicate {
        switch op {
        case .equal, .notEqual:
            let ids = try objectIDs(of: valueSide, collection: false)
            return op == .equal ? .selfIn(ids) : .not(.selfIn(ids))
        case .in:
            return .selfIn(try objectIDs(of: valueSide, collection: true))
        default:
            throw error(.unsupported, at: position, "SELF compares with ==, != or IN")
        }
    }

    private func objectIDs(of expression: ExpressionSyntax, collection: Bool) throws(PredicateFormatError) -> [ObjectID] {
        let argument: Any?
        let what: String
        switch expression {
        case .argument(let index, _, _):
            argument = arguments[index]
            what = "argument \(index + 1)"
        case .keyPath(.variable(let name), let keys, let position) where keys.isEmpty:
            guard let entry = variables[name] else {
                throw error(.argument, at: position, "no value was given for $\(name); pass it in variables")
            }
            argument = entry
            what = "$\(name)"
        case .null:
            return []
        default:
            throw error(.typeMismatch, at: expression.position, "SELF compares with objects or object IDs given as arguments")
        }
        func id(_ element: Any?) -> ObjectID? {
            switch element {
            case let id as ObjectID: id
            case let object as ManagedObject: object.objectID
            default: nil
            }
        }
        if collection {
            let elements: [Any?]
            switch argument {
            case let array as [Any?]: elements = array
            case let array as [Any]: elements = array.map { $0 }
            case let set as Set<ManagedObject>: elements = Array(set)
            default:
                throw error(.argument, at: expression.position, "SELF IN needs an array of objects or object IDs; \(what) is \(Self.describe(argument))")
            }
            return try elements.map { element throws(PredicateFormatError) in
                guard let found = id(element) else {
                    throw error(.argument, at: expression.position, "SELF IN needs objects or object IDs; \(what) holds \(Self.describe(element))")
                }
                return found
            }
        }
        guard argument != nil, !(argument is NSNull) else { return [] }
        guard let found = id(argument) else {
            throw error(.argument, at: expression.position, "SELF compares with an object or an object ID; \(what) is \(Self.describe(argument))")
        }
        return [found]
    }

    // MARK: - To-many

    /// `ANY employees.name == 'x'`: split the key path after its to-many step and bind
    /// the rest of the comparison against the destination entity.
    private func bindQuantified(_ comparison: ComparisonSyntax, _ modifier: ComparisonSyntax.Modifier) throws(PredicateFormatError) -> FetchPredicate {
        guard case .keyPath(.implicit, let keys, let position) = comparison.lhs else {
            throw error(.unsupported, at: comparison.lhs.position, "\(modifier.rawValue) needs a key path through a to-many relationship on the left")
        }
        var current = entity
        for (index, key) in keys.enumerated() {
            guard let relationship = current.relationship(named: key) else { break }
            guard let destination = model.entity(named: relationship.destinationEntityName) else { break }
            if relationship.isToMany {
                let collection = keys[...index].joined(separator: ".")
                let rest = Array(keys[(index + 1)...])
                let quantifier: Quantifier = switch modifier {
                case .any: .any
                case .all: .all
                case .notAny: .none
                }
                let binder = PredicateBinder(source: source, entity: destination, model: model, arguments: arguments, variables: variables)
                if rest.isEmpty {
                    // `ANY employees == %@`: the members themselves.
                    return .quantified(quantifier, keyPath: collection, try binder.bindSelf(comparison.operator, comparison.rhs, at: comparison.position))
                }
                var inner = comparison
                inner.modifier = nil
                inner.lhs = .keyPath(root: .implicit, keys: rest, position: position)
                return .quantified(quantifier, keyPath: collection, try binder.bind(.comparison(inner)))
            }
            current = destination
        }
        throw error(.typeMismatch, at: position,
                    "\(modifier.rawValue) needs a key path through a to-many relationship; '\(keys.joined(separator: "."))' has none",
                    key: keys.joined(separator: "."))
    }

    /// `employees.@sum.salary > 100`, `@avg`, `@min`, `@max`.
    private func bindAggregate(_ function: CollectionFunction, keyPath: String, key: [String], at position: Int, operatorAt opPosition: Int,
                               _ comparison: ComparisonSyntax) throws(PredicateFormatError) -> FetchPredicate {
        let path: ToManyKeyPath
        do {
            path = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
        } catch {
            throw self.error(.typeMismatch, at: position, "@\(function.rawValue) needs a to-many relationship; \(error.description)",
                             key: keyPath, cause: error)
        }
        guard key.count == 1 else {
            throw error(.typeMismatch, at: opPosition,
                        "@\(function.rawValue) needs one attribute of the members after it, as in \(keyPath).@\(function.rawValue).price", key: keyPath)
        }
        let binder = PredicateBinder(source: source, entity: path.destination, model: model, arguments: arguments, variables: variables)
        let member = try binder.resolve(key[0], at: opPosition)
        guard let attribute = member.final.attribute,
              attribute.type.isNumeric || (attribute.type == .date && (function == .min || function == .max)) else {
            throw error(.typeMismatch, at: opPosition,
                        "@\(function.rawValue) needs a number attribute (or a date for @min and @max); '\(key[0])' is \(Self.describe(member))", key: keyPath)
        }
        guard let op = Self.numericOperator(comparison.operator) else {
            throw error(.unsupported, at: comparison.position, "@\(function.rawValue) compares with ==, !=, <, <=, > or >=", key: keyPath)
        }
        let value = try binder.value(of: comparison.rhs, for: member, keyPath: key[0])
        return .aggregate(function, keyPath: keyPath, key: key[0], op, value)
    }

    /// `SUBQUERY(employees, $e, $e.age > 30).@count > 0`: the inner predicate is
    /// bound against the members, with `$e.key` naming a member's key.
    private func bindSubqueryCount(_ collection: ExpressionSyntax, variable: String, _ inner: PredicateSyntax, at position: Int,
                                   _ comparison: ComparisonSyntax) throws(PredicateFormatError) -> FetchPredicate {
        guard case .keyPath(.implicit, let keys, let keyPosition) = collection else {
            throw error(.unsupported, at: collection.position, "SUBQUERY's collection must be a key path to a to-many relationship")
        }
        let keyPath = keys.joined(separator: ".")
        let path: ToManyKeyPath
        do {
            path = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
        } catch {
            throw self.error(.typeMismatch, at: keyPosition, "SUBQUERY needs a to-many relationship; \(error.description)", key: keyPath, cause: error)
        }
        let binder = PredicateBinder(source: source, entity: path.destination, model: model, arguments: arguments, variables: variables)
        let member = try binder.bind(try Self.rootingKeys(of: inner, at: variable, source: source, entity: entity.name))
        let counted = try bindCount(keyPath: keyPath, at: position, comparison)
        guard case .count(_, let op, let number) = counted else { return counted }
        return .subqueryCount(keyPath: keyPath, member, op, number)
    }

    /// Rewrites `$x.key` as `key` inside a SUBQUERY predicate; other key paths
    /// (the outer object's) are not supported there yet.
    private static func rootingKeys(of syntax: PredicateSyntax, at variable: String, source: String,
                                    entity: String) throws(PredicateFormatError) -> PredicateSyntax {
        func rooted(_ expression: ExpressionSyntax) throws(PredicateFormatError) -> ExpressionSyntax {
            switch expression {
            case .keyPath(.variable(let name), let keys, let position) where name == variable:
                guard !keys.isEmpty else {
                    throw PredicateFormatError(code: .unsupported, predicate: source, position: position,
                                               message: "comparing the SUBQUERY variable itself is not supported yet; compare one of its keys",
                                               entity: entity, key: nil)
                }
                return .keyPath(root: .implicit, keys: keys, position: position)
            case .keyPath(.implicit, _, let position), .keyPath(.evaluatedObject, _, let position):
                throw PredicateFormatError(code: .unsupported, predicate: source, position: position,
                                           message: "inside SUBQUERY, name the members' keys through $\(variable); " +
                                               "keys of the outer object are not supported yet",
                                           entity: entity, key: nil)
            case .collectionOperator(let op, let base, let keys, let position):
                return .collectionOperator(op: op, base: try rooted(base), keys: keys, position: position)
            default:
                return expression
            }
        }
        switch syntax {
        case .constant: return syntax
        case .and(let parts):
            return .and(try parts.map { part throws(PredicateFormatError) in try rootingKeys(of: part, at: variable, source: source, entity: entity) })
        case .or(let parts):
            return .or(try parts.map { part throws(PredicateFormatError) in try rootingKeys(of: part, at: variable, source: source, entity: entity) })
        case .not(let inner): return .not(try rootingKeys(of: inner, at: variable, source: source, entity: entity))
        case .comparison(var comparison):
            comparison.lhs = try rooted(comparison.lhs)
            comparison.rhs = try rooted(comparison.rhs)
            return .comparison(comparison)
        }
    }

    /// `employees.@count > 2`.
    private func bindCount(keyPath: String, at position: Int, _ comparison: ComparisonSyntax) throws(PredicateFormatError) -> FetchPredicate {
        do {
            _ = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
        } catch {
            throw self.error(.typeMismatch, at: position, "@count needs a to-many relationship; \(error.description)", key: keyPath, cause: error)
        }
        guard let op = Self.numericOperator(comparison.operator) else {
            throw error(.unsupported, at: comparison.position, "@count compares with ==, !=, <, <=, > or >=", key: keyPath)
        }
        let number: Int64
        switch comparison.rhs {
        case .integer(let value, _): number = value
        case .argument(let index, let specifier, let valuePosition):
            guard case .attribute(.integer(let value)) = try convert(arguments[index], specifier: specifier == "@" ? "d" : specifier,
                                                                      at: valuePosition, what: "argument \(index + 1)", keyPath: keyPath) else {
                throw error(.argument, at: valuePosition, "@count compares with a whole number", key: keyPath)
            }
            number = value
        default:
            throw error(.typeMismatch, at: comparison.rhs.position, "@count compares with a whole number", key: keyPath)
        }
        return .count(keyPath: keyPath, op, number)
    }

    // MARK: - Key paths

    /// The key path an expression names, or nil when it is a value.
    private func keyPath(of expression: ExpressionSyntax) throws(PredicateFormatError) -> (keyPath: String, position: Int)? {
        switch expression {
        case .keyPath(.implicit, let keys, let position):
            return (keys.joined(separator: "."), position)
        case .keyPathArgument(let index, let position):
            guard let text = arguments[index] as? String, !text.isEmpty else {
                throw error(.argument, at: position, "%K takes a key path as a String; argument \(index + 1) is \(Self.describe(arguments[index]))")
            }
            return (text, position)
        case .keyPath(.evaluatedObject, let keys, let position):
            guard !keys.isEmpty else {
                throw error(.unsupported, at: position, "SELF can only be compared with objects, with ==, != or IN")
            }
            return (keys.joined(separator: "."), position)
        case .keyPath(.variable(let name), let keys, let position) where !keys.isEmpty:
            throw error(.unsupported, at: position,
                        "$\(name).\(keys.joined(separator: ".")) is a value, not a key path of the fetched objects; compare it with one of their keys")
        case .collectionOperator(let op, _, _, let position):
            throw error(.unsupported, at: position, "@\(op) is not supported yet")
        case .subquery(_, _, _, let position):
            throw error(.unsupported, at: position, "SUBQUERY is supported as SUBQUERY(…).@count compared with a number")
        default:
            return nil
        }
    }

    /// Whether an expression stands for something on the object (rather than a value).
    private func isKeyPathLike(_ expression: ExpressionSyntax) -> Bool {
        switch expression {
        case .keyPath(.implicit, _, _), .keyPathArgument, .keyPath(.evaluatedObject, _, _), .collectionOperator, .subquery: return true
        default: return false
        }
    }

    func resolve(_ keyPath: String, at position: Int) throws(PredicateFormatError) -> ResolvedKeyPath {
        do {
            return try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
        } catch {
            switch error {
            case .unknownKey(let entityName, let key, _):
                throw self.error(.unknownKey, at: position, "'\(entityName)' has no property '\(key)' (in key path '\(keyPath)')", key: keyPath)
            case .toManyKeyNotAllowed(let entityName, let key, _):
                throw self.error(.unsupported, at: position,
                                 "'\(entityName).\(key)' is a to-many relationship; compare its members with ANY, ALL or NONE, or count them with @count",
                                 key: keyPath)
            case .notARelationship(let entityName, let key, _):
                throw self.error(.unknownKey, at: position, "'\(entityName).\(key)' is an attribute, so the key path cannot continue after it", key: keyPath)
            default:
                throw self.error(.unknownKey, at: position, error.description, key: keyPath)
            }
        }
    }

    // MARK: - Values

    func value(of expression: ExpressionSyntax, for path: ResolvedKeyPath, keyPath: String) throws(PredicateFormatError) -> PredicateValue {
        let value: PredicateValue
        switch expression {
        case .string(let text, _): value = .attribute(.string(text))
        case .integer(let number, _): value = .attribute(.integer(number))
        case .decimal(let text, let position):
            if path.final.attribute?.type == .decimal, let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) {
                value = .attribute(.decimal(decimal))
            } else if let double = Double(text) {
                value = .attribute(.double(double))
            } else {
                throw error(.typeMismatch, at: position, "'\(text)' is not a number", key: keyPath)
            }
        case .boolean(let flag, _): value = .attribute(.boolean(flag))
        case .null: value = .null
        case .argument(let index, let specifier, let position):
            value = try convert(arguments[index], specifier: specifier, at: position, what: "argument \(index + 1)", keyPath: keyPath)
        case .keyPath(.variable(let name), let keys, let position) where keys.isEmpty:
            guard let entry = variables[name] else {
                throw error(.argument, at: position, "no value was given for $\(name); pass it in variables", key: keyPath)
            }
            value = try convert(entry, specifier: "@", at: position, what: "$\(name)", keyPath: keyPath)
        case .keyPath(.variable(let name), let keys, let position):
            value = try variableKeyPathValue(name, keys, at: position, keyPath: keyPath)
        case .collection(_, let position):
            throw error(.typeMismatch, at: position, "a collection only makes sense with IN or BETWEEN", key: keyPath)
        default:
            throw error(.unsupported, at: expression.position, "\(expression) is not supported as a value", key: keyPath)
        }
        do {
            try value.check(against: path, keyPath: keyPath, entity: entity.name)
        } catch {
            throw self.error(.typeMismatch, at: expression.position,
                             "'\(keyPath)' is \(Self.describe(path)); it cannot be compared with \(Self.describe(value))", key: keyPath)
        }
        return value
    }

    /// `$FETCH_SOURCE.name`: a key path read from an object given as a variable (a
    /// fetched property's source), or `$FETCHED_PROPERTY.userInfo.key`.
    private func variableKeyPathValue(_ name: String, _ keys: [String], at position: Int, keyPath: String) throws(PredicateFormatError) -> PredicateValue {
        guard let entry = variables[name] else {
            throw error(.argument, at: position, "no value was given for $\(name); pass it in variables", key: keyPath)
        }
        let path = keys.joined(separator: ".")
        switch entry {
        case let object as ManagedObject:
            guard let context = object.managedObjectContext else {
                throw error(.argument, at: position, "$\(name) is an object no longer registered with a context", key: keyPath)
            }
            let found: KeyPathValue
            do {
                found = try context.value(at: path, of: object)
            } catch {
                throw self.error(.unknownKey, at: position, "$\(name).\(path): \(error)", key: keyPath, cause: error)
            }
            switch found {
            case .null: return .null
            case .attribute(let value): return .attribute(value)
            case .object(let id): return .object(id)
            }
        case let property as FetchedPropertyDescription:
            guard keys.count == 2, keys[0] == "userInfo" else {
                throw error(.unsupported, at: position, "$\(name) offers userInfo.KEY (the fetched property's user info)", key: keyPath)
            }
            return property.userInfo[keys[1]].map { .attribute(.string($0)) } ?? .null
        default:
            throw error(.unsupported, at: position, "$\(name).\(path) needs $\(name) to be an object (as $FETCH_SOURCE in a fetched property)", key: keyPath)
        }
    }

    /// The values of a collection (`{a, b}`) or of an array argument, for IN and BETWEEN.
    private func values(of expression: ExpressionSyntax, for path: ResolvedKeyPath, keyPath: String) throws(PredicateFormatError) -> [PredicateValue] {
        switch expression {
        case .collection(let elements, _):
            return try elements.map { element throws(PredicateFormatError) in try value(of: element, for: path, keyPath: keyPath) }
        case .argument(let index, _, let position):
            return try convertCollection(arguments[index], at: position, what: "argument \(index + 1)", for: path, keyPath: keyPath)
        case .keyPath(.variable(let name), let keys, let position) where keys.isEmpty:
            guard let entry = variables[name] else {
                throw error(.argument, at: position, "no value was given for $\(name); pass it in variables", key: keyPath)
            }
            return try convertCollection(entry, at: position, what: "$\(name)", for: path, keyPath: keyPath)
        default:
            throw error(.typeMismatch, at: expression.position, "IN and BETWEEN need a collection such as {1, 2, 3} or an array argument", key: keyPath)
        }
    }

    private func convertCollection(_ argument: Any?, at position: Int, what: String, for path: ResolvedKeyPath,
                                   keyPath: String) throws(PredicateFormatError) -> [PredicateValue] {
        let elements: [Any?]
        switch argument {
        case let array as [Any?]: elements = array
        case let array as [Any]: elements = array.map { $0 }
        case let set as Set<AnyHashable>: elements = set.map { $0.base }
        default:
            throw error(.argument, at: position, "IN and BETWEEN need an array; \(what) is \(Self.describe(argument))", key: keyPath)
        }
        return try elements.map { element throws(PredicateFormatError) in
            let value = try convert(element, specifier: "@", at: position, what: "an element of \(what)", keyPath: keyPath)
            do { try value.check(against: path, keyPath: keyPath, entity: entity.name) } catch {
                throw self.error(.typeMismatch, at: position,
                                 "'\(keyPath)' is \(Self.describe(path)); it cannot be compared with \(Self.describe(value))", key: keyPath)
            }
            return value
        }
    }

    /// Converts a Swift argument to a predicate value, honouring `%d`, `%f`, `%s`.
    private func convert(_ argument: Any?, specifier: Character, at position: Int, what: String,
                         keyPath: String) throws(PredicateFormatError) -> PredicateValue {
        guard let argument, !(argument is NSNull) else { return .null }
        switch specifier {
        case "d", "i", "u", "D":
            guard let value = AttributeValue.coerce(argument, to: .integer64) else {
                throw error(.argument, at: position, "%\(specifier) takes an integer; \(what) is \(Self.describe(argument))", key: keyPath)
            }
            return .attribute(value)
        case "f", "g", "G", "e", "E":
            guard let value = AttributeValue.coerce(argument, to: .double) else {
                throw error(.argument, at: position, "%\(specifier) takes a number; \(what) is \(Self.describe(argument))", key: keyPath)
            }
            return .attribute(value)
        case "s":
            guard let text = argument as? String else {
                throw error(.argument, at: position, "%s takes a string; \(what) is \(Self.describe(argument))", key: keyPath)
            }
            return .attribute(.string(text))
        default:
            break
        }
        switch argument {
        case let value as AttributeValue: return .attribute(value)
        case let id as ObjectID: return .object(id)
        case let object as ManagedObject: return .object(object.objectID)
        case let text as String: return .attribute(.string(text))
        case let flag as Bool: return .attribute(.boolean(flag))
        case let date as Date: return .attribute(.date(date))
        case let data as Data: return .attribute(.binaryData(data))
        case let uuid as UUID: return .attribute(.uuid(uuid))
        case let url as URL: return .attribute(.uri(url))
        case let decimal as Decimal: return .attribute(.decimal(decimal))
        case let double as Double: return .attribute(.double(double))
        case let float as Float: return .attribute(.float(float))
        default:
            if let integer = AttributeValue.coerce(argument, to: .integer64) { return .attribute(integer) }
            throw error(.argument, at: position, "\(what) is \(Self.describe(argument)), which a predicate cannot compare", key: keyPath)
        }
    }

    // MARK: - Helpers

    private func error(_ code: PredicateFormatError.Code, at position: Int, _ message: String, key: String? = nil,
                       cause: (any Error)? = nil) -> PredicateFormatError {
        PredicateFormatError(code: code, predicate: source, position: position, message: message, entity: entity.name, key: key, cause: cause)
    }

    private static func flipped(_ op: ComparisonSyntax.Operator) -> ComparisonSyntax.Operator? {
        switch op {
        case .equal: .equal
        case .notEqual: .notEqual
        case .less: .greater
        case .lessOrEqual: .greaterOrEqual
        case .greater: .less
        case .greaterOrEqual: .lessOrEqual
        default: nil
        }
    }

    /// The comparison operators that also apply to numbers (counts, aggregates); nil for the others.
    private static func numericOperator(_ op: ComparisonSyntax.Operator) -> ComparisonOperator? {
        switch op {
        case .equal: .equal
        case .notEqual: .notEqual
        case .less: .less
        case .lessOrEqual: .lessOrEqual
        case .greater: .greater
        case .greaterOrEqual: .greaterOrEqual
        default: nil
        }
    }

    private static func comparisonOperator(_ op: ComparisonSyntax.Operator) -> ComparisonOperator {
        numericOperator(op) ?? .equal
    }

    private static func stringOperator(_ op: ComparisonSyntax.Operator) -> StringOperator {
        switch op {
        case .beginsWith: .beginsWith
        case .endsWith: .endsWith
        case .like: .like
        case .matches: .matches
        case .contains: .contains
        default: .equal
        }
    }

    private static func stringOptions(_ options: ComparisonSyntax.Options) -> StringOptions {
        var result: StringOptions = []
        if options.contains(.caseInsensitive) { result.insert(.caseInsensitive) }
        if options.contains(.diacriticInsensitive) { result.insert(.diacriticInsensitive) }
        return result
    }

    static func describe(_ path: ResolvedKeyPath) -> String {
        switch path.final {
        case .attribute(let attribute): "\(attribute.type.xcodeName.first.map { "AEIOU".contains($0) } == true ? "an" : "a") \(attribute.type.xcodeName)"
        case .relationship(let relationship): "a \(relationship.destinationEntityName) relationship"
        }
    }

    private static func describe(_ value: PredicateValue) -> String {
        switch value {
        case .null: "nil"
        case .object(let id): "the object \(id.uriString)"
        case .attribute(let attribute): "the \(attribute.naturalType.xcodeName) \(attribute.modelString)"
        }
    }

    private static func describe(_ argument: Any?) -> String {
        guard let argument else { return "nil" }
        return "a \(type(of: argument)) (\(argument))"
    }
}
