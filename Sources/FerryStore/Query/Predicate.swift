import FerryModel

/// A filter over objects, compiled to SQL by the SQLite store and evaluated in
/// memory for unsaved changes.
///
/// This is the structured form; Core Data's format-string syntax is parsed
/// into it. Key paths may run through to-one relationships (`manager.name`).
public indirect enum FetchPredicate: Sendable, Hashable {
    /// Matches every object (`TRUEPREDICATE`).
    case alwaysTrue
    /// Matches no object (`FALSEPREDICATE`).
    case alwaysFalse
    /// Compares the value at a key path with a constant.
    case comparison(keyPath: String, ComparisonOperator, PredicateValue)
    /// Compares the values at two key paths of the same object (`manager.id < id`):
    /// two attributes of comparable types, or two to-ones to the same entity family.
    /// Nil rules as for constants: `==` holds when both are nil.
    case keyPathComparison(keyPath: String, ComparisonOperator, otherKeyPath: String)
    /// Matches the string at a key path (`BEGINSWITH`, `CONTAINS`, `ENDSWITH`,
    /// `LIKE`, `MATCHES`, or equality with `[c]`/`[d]`); nil never matches.
    case stringMatch(keyPath: String, StringOperator, String, StringOptions)
    /// The value at a key path is one of the constants (`IN {…}`).
    case membership(keyPath: String, [PredicateValue])
    /// `ANY`/`ALL`/`NONE`: the members of the to-many relationship at `keyPath`
    /// (reached through to-one relationships) and a predicate on each member.
    /// `ALL` holds for an empty relationship, `ANY` does not.
    case quantified(Quantifier, keyPath: String, FetchPredicate)
    /// `keyPath.@count op n`: the number of members of a to-many relationship.
    case count(keyPath: String, ComparisonOperator, Int64)
    /// `SUBQUERY(keyPath, $x, predicate).@count op n`: how many members match a predicate.
    case subqueryCount(keyPath: String, FetchPredicate, ComparisonOperator, Int64)
    /// `SELF IN {…}` / `SELF == x`: the evaluated object is one of these.
    case selfIn([ObjectID])
    /// `keyPath.@sum.key op value` and `@avg`, `@min`, `@max`: an aggregate of
    /// one numeric or date attribute over a to-many relationship's members.
    /// `@sum` of no members is 0; `@avg`, `@min` and `@max` of none are nil.
    case aggregate(CollectionFunction, keyPath: String, key: String, ComparisonOperator, PredicateValue)
    /// All sub-predicates hold.
    case and([FetchPredicate])
    /// At least one sub-predicate holds.
    case or([FetchPredicate])
    /// The sub-predicate does not hold.
    case not(FetchPredicate)

    /// `keyPath == value`.
    public static func equal(_ keyPath: String, _ value: PredicateValue) -> FetchPredicate {
        .comparison(keyPath: keyPath, .equal, value)
    }

    /// `keyPath == value` for an attribute value.
    public static func equal(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        .comparison(keyPath: keyPath, .equal, .attribute(value))
    }
}

/// The comparison operators of a ``FetchPredicate``.
public enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
}

/// The aggregate functions of key paths (`@sum`, `@avg`, `@min`, `@max`).
public enum CollectionFunction: String, Sendable, Hashable, CaseIterable {
    case sum, avg, min, max
}

/// How many members of a to-many relationship must match.
public enum Quantifier: String, Sendable, Hashable, CaseIterable {
    case any = "ANY", all = "ALL", none = "NONE"
}

/// The string operators of a ``FetchPredicate``.
public enum StringOperator: String, Sendable, Hashable, CaseIterable {
    /// `==[c]` and friends: equality under the options.
    case equal = "=="
    case beginsWith = "BEGINSWITH"
    case contains = "CONTAINS"
    case endsWith = "ENDSWITH"
    /// Whole-string match with `*` and `?` wildcards.
    case like = "LIKE"
    /// Whole-string match of an ICU regular expression.
    case matches = "MATCHES"
}

/// `[c]` case-insensitive and `[d]` diacritic-insensitive string comparison.
public struct StringOptions: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    /// Creates options from their raw bits.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// `[c]`: Unicode case folding.
    public static let caseInsensitive = StringOptions(rawValue: 1)
    /// `[d]`: diacritics are ignored.
    public static let diacriticInsensitive = StringOptions(rawValue: 2)
}

/// A constant on the right-hand side of a comparison.
public enum PredicateValue: Sendable, Hashable {
    /// `nil` / `NULL`.
    case null
    /// An attribute value.
    case attribute(AttributeValue)
    /// An object, by ID (for comparisons with to-one relationships).
    case object(ObjectID)
}

/// How to order fetch results: by a key path (through to-one relationships),
/// ascending or not, and for strings optionally ignoring case.
///
/// Strings sort by their UTF-8 bytes (SQLite's BINARY collation); with
/// ``caseInsensitive`` they sort by their Unicode case folding instead (Core
/// Data's `caseInsensitiveCompare:`), so "adam" and "Bob" sort a, B. Nil sorts first.
public struct FetchSortDescriptor: Sendable, Hashable {
    /// The attribute key path to sort by.
    public var keyPath: String
    /// Ascending (the default) or descending.
    public var ascending: Bool
    /// Whether a String attribute sorts ignoring case (only for String attributes).
    public var caseInsensitive: Bool

    /// Creates a sort descriptor.
    public init(_ keyPath: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.keyPath = keyPath
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }
}

/// What to fetch: an entity, a filter, an order and a window.
///
/// Matches Core Data's defaults: subentities included, pending changes
/// included, no limit, no offset.
public struct FetchRequest: Sendable, Hashable {
    /// The entity to fetch; subentities are included unless ``includesSubentities`` is false.
    public var entityName: String
    /// The filter; nil matches everything.
    public var predicate: FetchPredicate?
    /// The order; ties and unsorted fetches come back in primary-key order.
    public var sortDescriptors: [FetchSortDescriptor]
    /// The most objects to return; 0 means no limit.
    public var fetchLimit: Int
    /// How many matches to skip first.
    public var fetchOffset: Int
    /// Whether objects of subentities are returned.
    public var includesSubentities: Bool
    /// Whether unsaved inserts, updates and deletes of the context are taken into account.
    /// Dictionary fetches ignore it and read the store, as Core Data's do.
    public var includesPendingChanges: Bool
    /// For ``ManagedObjectContext/fetchDictionaries(_:)``: the key paths to read
    /// (attributes or to-one relationships, through to-ones). Empty reads every
    /// persistent attribute and to-one relationship of the entity.
    public var propertiesToFetch: [String] = []
    /// For ``ManagedObjectContext/fetchDictionaries(_:)``: whether equal
    /// dictionaries are returned once (the first in order); limit and offset
    /// then apply to the distinct results.
    public var returnsDistinctResults = false
    /// For ``ManagedObjectContext/fetchDictionaries(_:)``: computed columns (`@count`, `@sum`, `@avg`,
    /// `@min`, `@max`), over all matches or per group (``FetchExpression``). Compiled to SQL by the SQLite store.
    public var expressions: [FetchExpression] = []
    /// For ``ManagedObjectContext/fetchDictionaries(_:)``: the key paths (attributes or to-ones,
    /// through to-ones) whose values form the groups the expressions are computed over (SQL's
    /// `GROUP BY`). ``propertiesToFetch`` may then name only these.
    public var propertiesToGroupBy: [String] = []
    /// For grouped fetches: which groups to keep (SQL's `HAVING`), over the result's columns — the
    /// group keys it returns and the expressions' names (`revenue > 1000`).
    public var havingPredicate: FetchPredicate?
    /// With a value above 0, ``ManagedObjectContext/fetchResults(_:)`` reads the matching IDs only, and
    /// the objects' values in batches of this many as the result is read (Core Data's `fetchBatchSize`):
    /// iterating a large result keeps about one batch in memory. 0 (the default) reads everything at
    /// once. ``ManagedObjectContext/fetch(_:)`` returns an `Array`, which holds every object, whatever this is.
    public var fetchBatchSize = 0

    /// Creates a fetch request.
    public init(
        entityName: String,
        predicate: FetchPredicate? = nil,
        sortDescriptors: [FetchSortDescriptor] = [],
        fetchLimit: Int = 0,
        fetchOffset: Int = 0,
        includesSubentities: Bool = true,
        includesPendingChanges: Bool = true
    ) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
        self.fetchLimit = fetchLimit
        self.fetchOffset = fetchOffset
        self.includesSubentities = includesSubentities
        self.includesPendingChanges = includesPendingChanges
    }

    /// A request for objects whose `keyPath` equals `value`.
    public init(entityName: String, where keyPath: String, equals value: AttributeValue?) {
        self.init(entityName: entityName, predicate: .equal(keyPath, value.map(PredicateValue.attribute) ?? .null))
    }
}
