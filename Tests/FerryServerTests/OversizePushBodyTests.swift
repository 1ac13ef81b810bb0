import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import NIOCore
import CompressNIO
@testable import FerryServer

/// `PushBodies.lines(of:maxBodyBytes:oversize:)`: how a relay takes a push body past its
/// `server.max_body_bytes` — one change set alone, within `server.max_change_set_bytes`, one at a time.
/// In process, through a router whose one route reads a body so and answers what it got.
@Suite("Push bodies past max_body_bytes")
struct OversizePushBodyTests {
    static let maxBodyBytes = 1024
    static let maxChangeSetBytes = 8192

    /// A router whose `POST /push` reads its body with `oversize`; while `hold` is set it keeps the
    /// slot a moment (so that a second request meets it taken). Answers `lines=N oversize=BOOL`.
    static func app(_ oversize: OversizeBodies, hold: Duration = .zero) -> some ApplicationProtocol {
        let router = Router()
        router.post("push") { request, _ -> String in
            let (lines, took) = try await PushBodies.lines(of: request, maxBodyBytes: maxBodyBytes, oversize: oversize)
            defer { if took { oversize.slots.give() } }
            if hold > .zero { try await Task.sleep(for: hold) }
            return "lines=\(lines.count) oversize=\(took)"
        }
        return Application(router: router)
    }

    static func slots() -> OversizeBodies {
        OversizeBodies(maxBytes: maxChangeSetBytes)
    }

    /// A line of `bytes` bytes (a JSON object; what is in it does not matter here).
    static func line(_ bytes: Int) -> String {
        #"{"x":""# + String(repeating: "a", count: bytes - 8) + #""}"#
    }

    @Test("A body within max_body_bytes takes no slot; one change set past it takes the slot, given back after")
    func withinAndPast() async throws {
        let oversize = Self.slots()
        try await Self.app(oversize).test(.router) { client in
            let small = try await client.execute(uri: "/push", method: .post, body: ByteBuffer(string: Self.line(500) + "\n" + Self.line(400)))
            #expect(String(buffer: small.body) == "lines=2 oversize=false")
            let large = try await client.execute(uri: "/push", method: .post, body: ByteBuffer(string: Self.line(5000)))
            #expect(large.status == .ok && String(buffer: large.body) == "lines=1 oversize=true", "\(large.status) \(String(buffer: large.body))")
        }
        // Given back: one more may be taken.
        #expect(oversize.slots.take())
    }

    @Test("Past max_body_bytes several change sets are refused (413, send fewer); past max_change_set_bytes one is too, naming the setting; slot given back")
    func refusals() async throws {
        let oversize = Self.slots()
        try await Self.app(oversize).test(.router) { client in
            let several = try await client.execute(uri: "/push", method: .post, body: ByteBuffer(string: Self.line(3000) + "\n" + Self.line(3000)))
            #expect(several.status == .contentTooLarge)
            #expect(String(buffer: several.body).contains("holds 2 change sets; send fewer change sets per request"), "\(String(buffer: several.body))")
            let huge = try await client.execute(uri: "/push", method: .post, body: ByteBuffer(string: Self.line(9000)))
            #expect(huge.status == .contentTooLarge)
            #expect(String(buffer: huge.body).contains("larger than server.max_change_set_bytes (8192 bytes)"), "\(String(buffer: huge.body))")
        }
        #expect(oversize.slots.take(), "a refused body kept the slot")
    }

    @Test("A gzip body that unpacks past max_body_bytes takes the slot too, and is bounded by max_change_set_bytes unpacked")
    func gzip() async throws {
        let oversize = Self.slots()
        let headers: HTTPFields = [.contentEncoding: "gzip"]
        try await Self.app(oversize).test(.router) { client in
            var text = ByteBuffer(string: Self.line(6000))
            let packed = try text.compress(with: .gzip())
            #expect(packed.readableBytes < Self.maxBodyBytes)
            let taken = try await client.execute(uri: "/push", method: .post, headers: headers, body: packed)
            #expect(String(buffer: taken.body) == "lines=1 oversize=true", "\(taken.status) \(String(buffer: taken.body))")
            var bomb = ByteBuffer(string: Self.line(100_000))
            let refused = try await client.execute(uri: "/push", method: .post, headers: headers, body: try bomb.compress(with: .gzip()))
            #expect(refused.status == .contentTooLarge, "\(String(buffer: refused.body))")
        }
        #expect(oversize.slots.take())
    }

    @Test("While one body past max_body_bytes is being taken, another gets 503 with Retry-After; a small one still goes")
    func oneAtATime() async throws {
        let oversize = Self.slots()
        try await Self.app(oversize, hold: .seconds(3)).test(.router) { client in
            async let first = client.execute(uri: "/push", method: .post, body: ByteBuffer(string: Self.line(5000)))
            // (The first holds the slot for three seconds once it has its body: time for the second under load.)
            var second: TestResponse?
            for _ in 0..<250 where second == nil {
                try await Task.sleep(for: .milliseconds(20))
                if oversize.slots.inUse == 1 {
                    second = try await client.execute(uri: "/push", method: .post, body: ByteBuffer(string: Self.line(5000)))
                }
            }
            let refused = try #require(second, "the first request never took the slot")
            #expect(refused.status == .serviceUnavailable && refused.headers[.retryAfter] == "1", "\(refused.status)")
            #expect(String(buffer: refused.body).contains("one at a time"), "\(String(buffer: refused.body))")
            let small = try await client.execute(uri: "/push", method: .post, body: ByteBuffer(string: Self.line(500)))
            #expect(String(buffer: small.body) == "lines=1 oversize=false")
            #expect(String(buffer: try await first.body) == "lines=1 oversize=true")
        }
    }
}
