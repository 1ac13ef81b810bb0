import Foundation
import Testing
@testable import FerryServer
import FerryTestSupport

@Suite("Access tokens")
struct AccessTokensTests {
    @Test("Roles come from the tokens file; admin may do what a peer may")
    func roles() throws {
        let directory = TemporaryDirectory()
        try """
            # peers
            peer 0123456789abcdef0123
            fedcba9876543210fedc

            admin ADMIN-0123456789abcdef
            """.write(toFile: directory.file("tokens"), atomically: true, encoding: .utf8)
        let tokens = try AccessTokens(file: directory.file("tokens"))
        #expect(tokens.role(of: "0123456789abcdef0123") == .peer)
        #expect(tokens.role(of: "fedcba9876543210fedc") == .peer)
        #expect(tokens.role(of: "ADMIN-0123456789abcdef") == .admin)
        #expect(tokens.role(of: "0123456789abcdef012") == nil)
        #expect(tokens.role(of: "0123456789abcdef01234") == nil)
        #expect(tokens.role(of: "") == nil)
        #expect(tokens.adminToken == "ADMIN-0123456789abcdef")
        #expect(AccessTokens.Role.admin.allows(.pull) && AccessTokens.Role.admin.allows(.push) && AccessTokens.Role.admin.allows(.admin))
        #expect(AccessTokens.Role.peer.allows(.pull) && AccessTokens.Role.peer.allows(.push) && !AccessTokens.Role.peer.allows(.admin))
    }

    @Test("Pull-only and push-only tokens, and a push token limited to some origins")
    func limitedTokens() throws {
        let directory = TemporaryDirectory()
        let a = UUID(), b = UUID()
        try """
            pull PULL-0123456789abcdef
            push PUSH-0123456789abcdef origins=\(a.uuidString),\(b.uuidString)
            peer PEER-0123456789abcdef origins=\(a.uuidString)
            """.write(toFile: directory.file("tokens"), atomically: true, encoding: .utf8)
        let tokens = try AccessTokens(file: directory.file("tokens"))
        let pull = try #require(tokens.grant(of: "PULL-0123456789abcdef"))
        #expect(pull.role == .pull && pull.pushOrigins == nil && pull.role.allows(.pull) && !pull.role.allows(.push))
        let push = try #require(tokens.grant(of: "PUSH-0123456789abcdef"))
        #expect(push.role == .push && push.pushOrigins == [a, b] && push.role.allows(.push) && !push.role.allows(.pull))
        #expect(tokens.grant(of: "PEER-0123456789abcdef")?.pushOrigins == [a])
        #expect(tokens.adminToken == nil)
        // origins= on a token that cannot push, or with a bad identifier, is refused with the line.
        for (index, text) in ["pull PULL-0123456789abcdef origins=\(a.uuidString)", "push PUSH-0123456789abcdef origins=not-a-uuid",
                              "reader PULL-0123456789abcdef"].enumerated() {
            let file = directory.file("bad-\(index)")
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            #expect {
                try AccessTokens(file: file)
            } throws: { error in
                "\(error)".contains(":1:") && !"\(error)".contains("0123456789abcdef")
            }
        }
    }

    @Test("A file that is not a tokens file, and a token listed under two roles, are refused with the line; nothing of a token is printed")
    func notATokensFile() throws {
        let directory = TemporaryDirectory()
        let cases = [
            ("root:$6$Zq0yHs3x$abcdefghijklmnopqrstuv:19000:0:99999:7:::\n", "line", "is this a tokens file"),
            ("peer 0123456789abcdef0123\nadmin 0123456789abcdef0123\n", "line 1", "with other rights"),
        ]
        for (index, (text, place, problem)) in cases.enumerated() {
            let file = directory.file("tokens-\(index)")
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            #expect {
                try AccessTokens(file: file)
            } throws: { error in
                let message = "\(error)"
                return message.contains(place) && message.contains(problem) && !message.contains("0123456789abcdef0123") && !message.contains("Zq0yHs3x")
            }
        }
        // The same token twice under one role is only a repetition.
        try "peer 0123456789abcdef0123\npeer 0123456789abcdef0123\n".write(toFile: directory.file("twice"), atomically: true, encoding: .utf8)
        #expect(try AccessTokens(file: directory.file("twice")).role(of: "0123456789abcdef0123") == .peer)
    }

    @Test("A tokens file others can read, or reached through a symbolic link, gets a warning; one only its owner reads gets none")
    func permissions() throws {
        let directory = TemporaryDirectory()
        let file = directory.file("tokens")
        try "peer 0123456789abcdef0123\n".write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        #expect(AccessTokens.warnings(forFile: file).contains { $0.contains("chmod 600") })
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        #expect(AccessTokens.warnings(forFile: file).isEmpty)
        try FileManager.default.createSymbolicLink(atPath: directory.file("link"), withDestinationPath: file)
        #expect(AccessTokens.warnings(forFile: directory.file("link")).contains { $0.contains("symbolic link") })
    }

    @Test("The constant-time comparison is an exact comparison")
    func comparison() {
        let samples = ["", "a", "ab", "abc", "abd", "abcd", "ABC", "é", "e\u{301}"]
        for a in samples {
            for b in samples {
                #expect(AccessTokens.constantTimeEqual(Array(a.utf8), Array(b.utf8)) == (Array(a.utf8) == Array(b.utf8)), "\(a) vs \(b)")
            }
        }
    }

    @Test("A bad tokens file is refused with the line, never the token")
    func errors() throws {
        let directory = TemporaryDirectory()
        func message(_ text: String) throws -> String {
            try text.write(toFile: directory.file("tokens"), atomically: true, encoding: .utf8)
            do {
                _ = try AccessTokens(file: directory.file("tokens"))
                return "no error"
            } catch {
                return error.description
            }
        }
        #expect(try message("root SECRET-0123456789abcdef\n").contains("tokens:1: the role must be one of 'pull', 'push', 'peer', 'admin'"))
        #expect(try !message("root SECRET-0123456789abcdef\n").contains("SECRET"))
        #expect(try message("peer short\n").contains("shorter than 16 characters"))
        #expect(try message("# nothing\n\n").contains("no tokens"))
        #expect(try message("peer a b c\n").contains("expected 'ROLE TOKEN'"))
        do {
            _ = try AccessTokens(file: directory.file("missing"))
            Issue.record("a missing file was accepted")
        } catch {
            #expect(error.description.contains("cannot read the tokens file"))
        }
    }
}
