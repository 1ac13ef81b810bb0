/// Entity plans by name, remembering the last one: a save's objects mostly come
/// in runs of one entity, so most lookups skip hashing the name.
struct PlanCache {
    let layout: StoreLayout
    private var lastName: String?
    private var lastPlan: StoreLayout.EntityPlan?

    init(layout: StoreLayout) {
        self.layout = layout
    }

    mutating func plan(for entityName: String) -> StoreLayout.EntityPlan? {
        if let lastPlan, lastName == entityName { return lastPlan }
        lastName = entityName
        lastPlan = layout.plans[entityName]
        return lastPlan
    }
}
