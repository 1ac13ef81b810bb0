import Testing
@testable import FerryStore

@Suite("Predicate format strings: parsing")
struct PredicateParserTests {
    /// Input → canonical form (keywords upper-case, `==`, double-quoted strings, grouped compounds).
    static let accepted: [(String, String)] = [
        ("name == 'John'", #"name == "John""#),
        ("name = \"John\"", #"name == "John""#),
        ("name != 'x'", #"name != "x""#),
        ("name <> 'x'", #"name != "x""#),
        ("age < 3", "age < 3"),
        ("age =< 3", "age <= 3"),
        ("age => 3", "age >= 3"),
        ("age >= -2.5e3", "age >= -2.5e3"),
        ("flags == 0x1F", "flags == 31"),
        ("manager.name ==[c] 'john'", #"manager.name ==[c] "john""#),
        ("name BEGINSWITH[cd] 'caf'", #"name BEGINSWITH[cd] "caf""#),
        ("name contains[dc] 'x'", #"name CONTAINS[cd] "x""#),
        ("name endswith[n] 'x'", #"name ENDSWITH "x""#),
        ("name LIKE 'J*n?'", #"name LIKE "J*n?""#),
        ("name MATCHES '.*-suffix'", #"name MATCHES ".*-suffix""#),
        ("id IN {1, 2, 3}", "id IN {1, 2, 3}"),
        ("id in %@", "id IN %@#0"),
        ("counter BETWEEN {2, 5}", "counter BETWEEN {2, 5}"),
        ("ANY employees.name == 'Ann'", #"ANY employees.name == "Ann""#),
        ("some employees.name == 'Ann'", #"ANY employees.name == "Ann""#),
        ("ALL employees.age > 18", "ALL employees.age > 18"),
        ("NONE employees.age > 18", "NONE employees.age > 18"),
        ("employees.@count > 2", "employees.@count > 2"),
        ("employees.@sum.salary >= 100", "employees.@sum.salary >= 100"),
        ("employees.@avg.age < 40.5", "employees.@avg.age < 40.5"),
        ("SELF == %@", "SELF == %@#0"),
        ("SELF IN %@", "SELF IN %@#0"),
        ("manager == nil", "manager == NIL"),
        ("manager == NULL", "manager == NIL"),
        ("paid == YES AND made == no", "(paid == TRUE AND made == FALSE)"),
        ("a == 1 && b == 2 || c == 3", "((a == 1 AND b == 2) OR c == 3)"),
        ("a == 1 AND (b == 2 OR c == 3)", "(a == 1 AND (b == 2 OR c == 3))"),
        ("NOT a == 1", "NOT a == 1"),
        ("!(a == 1)", "NOT a == 1"),
        ("not not a == 1", "NOT NOT a == 1"),
        ("TRUEPREDICATE", "TRUEPREDICATE"),
        ("falsepredicate OR a == 1", "(FALSEPREDICATE OR a == 1)"),
        ("%K == %@", "%K#0 == %@#1"),
        ("%K BEGINSWITH %@ AND age > %d AND score < %f", "(%K#0 BEGINSWITH %@#1 AND age > %d#2 AND score < %f#3)"),
        ("count == %ld", "count == %d#0"),
        ("name == '%@'", #"name == "%@""#),
        ("name == $NAME", "name == $NAME"),
        ("parent.parentName == $parentName", "parent.parentName == $parentName"),
        ("SUBQUERY(employees, $e, $e.age > 30 AND $e.name BEGINSWITH 'A').@count > 0",
         #"SUBQUERY(employees, $e, ($e.age > 30 AND $e.name BEGINSWITH "A")).@count > 0"#),
        ("#not == 1", "#not == 1"),
        ("name == 'it\\'s'", #"name == "it's""#),
        ("name == \"tab\\there\"", #"name == "tab\there""#),
        ("name == '\\u00e9'", #"name == "é""#),
        ("name == 'Café'", #"name == "Café""#),
        ("(age) > 3", "age > 3"),
        ("((a == 1))", "a == 1"),
        ("  a   ==   1  ", "a == 1"),
        ("name == ''", #"name == """#),
        ("id IN {}", "id IN {}"),
        ("date > %@ AND date < %@", "(date > %@#0 AND date < %@#1)"),
    ]

    @Test("Accepted syntax, normalised", arguments: accepted.indices)
    func parsesAccepted(index: Int) throws {
        let (source, expected) = Self.accepted[index]
        let parsed = try PredicateParser.parse(source)
        #expect(parsed.syntax.description == expected, "\(source)")
        // The canonical form is a fixed point: it parses back to itself.
        if !expected.contains("%") {
            #expect(try PredicateParser.parse(expected).syntax.description == expected, "\(expected)")
        }
    }

    @Test("Format arguments are counted in order")
    func argumentCount() throws {
        #expect(try PredicateParser.parse("a == %@ AND %K == %d").argumentCount == 3)
        #expect(try PredicateParser.parse("a == '%@'").argumentCount == 0)
    }

    /// Input → (error offset, part of the message).
    static let rejected: [(String, Int, String)] = [
        ("", 0, "ends where a value or key was expected"),
        ("name", 4, "expected a comparison operator"),
        ("name == ", 8, "ends where a value or key was expected"),
        ("name == 'John", 8, "is not closed"),
        ("name === 'x'", 7, "expected a key, a value or an argument"),
        ("name == 'x' 'y'", 12, "after a complete predicate"),
        ("a == 1 AND", 10, "ends where a value"),
        ("(a == 1", 7, "expected ')'"),
        ("a == 1)", 6, "after a complete predicate"),
        ("name BEGINSWITH[x] 'a'", 15, "unknown comparison option 'x'"),
        ("name ==[c 'a'", 10, "expected ']'"),
        ("employees.@median > 1", 10, "unknown collection operator '@median'"),
        ("a == %q", 5, "unsupported format specifier '%q'"),
        ("a == $", 5, "must be followed by a variable name"),
        ("a == 1 ~ 2", 7, "unexpected character '~'"),
        ("SUBQUERY(employees, e, TRUEPREDICATE).@count > 0", 20, "expected the SUBQUERY variable"),
        ("id IN {1, 2", 11, "expected '}'"),
        ("a.", 2, "expected a key after '.'"),
        ("'x'.length == 1", 4, "cannot follow"),
        ("name == '\\u12'", 9, "four hexadecimal digits"),
        ("items[FIRST] == 1", 5, "array index operators"),
        // Nesting is bounded before the parser recurses (a few thousand levels used to overflow the stack).
        (String(repeating: "(", count: 101) + "a == 1" + String(repeating: ")", count: 101), 100, "nests more than 100 levels"),
        (String(repeating: "NOT ", count: 101) + "a == 1", 400, "nests more than 100 levels"),
        ("id IN " + String(repeating: "{", count: 200), 106, "nests more than 100 levels"),
    ]

    @Test("100 levels of nesting are still accepted")
    func deepButAllowed() throws {
        let source = String(repeating: "(", count: 100) + "a == 1" + String(repeating: ")", count: 100)
        #expect(try PredicateParser.parse(source).syntax.description == "a == 1")
    }

    @Test("Syntax errors point at the offending character", arguments: rejected.indices)
    func reportsRejected(index: Int) {
        let (source, position, message) = Self.rejected[index]
        do {
            let parsed = try PredicateParser.parse(source)
            Issue.record("accepted \(source) as \(parsed.syntax)")
        } catch {
            #expect(error.position == position, "\(source): \(error.message)")
            #expect(error.message.contains(message), "\(source): \(error.message)")
        }
    }

    @Test("The rendered error quotes the predicate with a caret")
    func rendered() {
        do {
            _ = try PredicateParser.parse("name ==[z] 'a'")
            Issue.record("accepted")
        } catch {
            #expect(error.rendered(in: "name ==[z] 'a'") == "unknown comparison option 'z'; use c, d or cd (at offset 7)\n  name ==[z] 'a'\n         ^")
        }
    }
}
