import FerryStore

/// The OrgChart sample's `Person` as a typed subclass, shared by tests and benchmarks.
/// Register it with `classes: ["Person": OrgChartPerson.self]`.
public final class OrgChartPerson: ManagedObject {
    /// The person's number.
    public var id: Int64? {
        get { self[attribute: "id"] }
        set { self[attribute: "id"] = newValue }
    }

    /// The person's name.
    public var name: String? {
        get { self[attribute: "name"] }
        set { self[attribute: "name"] = newValue }
    }

    /// Whom the person reports to.
    public var manager: OrgChartPerson? {
        get { self[toOne: "manager"] }
        set { self[toOne: "manager"] = newValue }
    }

    /// Who reports to the person.
    public var employees: RelationshipSet { self[toMany: "employees"] }
}
