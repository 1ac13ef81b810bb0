import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import NIOCore
import CompressNIO
@testable import FerryServer

/// A large gzip push body unpacked straight into its text (``GzipBodyText``), and what
/// `PushBodies.lines` makes of such bodies.
@Suite("Large gzip push bodies")
struct GzipBodyTextTests {
    /// A line of about `bytes` bytes, with characters of two, three and four bytes in it.
    static func line(_ bytes: Int, tag: String = "a") -> String {
        let unit = "{\"n\":\"\(tag) é ✓ 🐘 \"},"
        return "{\"changes\":[" + String(repeating: unit, count: bytes / unit.utf8.count) + "{}]}"
    }

    static func gzip(_ text: String) throws -> ByteBuffer {
        var input = ByteBuffer(string: text)
        return try input.compress(with: .gzip())
    }

    /// A router whose `POST /push` reads its body as a relay does and answers each line's length and hash.
    static func app(maxBodyBytes: Int, oversize: OversizeBodies?) -> some ApplicationProtocol {
        let router = Router()
        router.post("push") { request, _ -> String in
            let (lines, took) = try await PushBodies.lines(of: request, maxBodyBytes: maxBodyBytes, oversize: oversize)
            if took { oversize?.slots.give() }
            return lines.map { "\($0.utf8.count):\($0.hashValue)" }.joined(separator: ",") + " oversize=\(took)"
        }
        return Application(router: router)
    }

    static func answer(for lines: [String], oversize: Bool) -> String {
        lines.map { "\($0.utf8.count):\($0.hashValue)" }.joined(separator: ",") + " oversize=\(oversize)"
    }

    @Test("One large line, newlines after it: unpacked straight into the line, without them; through a relay's route, the one line past max_body_bytes")
    func oneLine() async throws {
        let line = Self.line(1_500_000)
        let packed = try Self.gzip(line + "\n\n")
        #expect(GzipBodyText.recordedLength(of: packed) == line.utf8.count + 2)
        #expect(GzipBodyText.text(of: packed, length: line.utf8.count + 2) == line)
        let oversize = OversizeBodies(maxBytes: 4 << 20)
        try await Self.app(maxBodyBytes: 1 << 20, oversize: oversize).test(.router) { client in
            let answer = try await client.execute(uri: "/push", method: .post, headers: [.contentEncoding: "gzip"], body: packed)
            #expect(answer.status == .ok && String(buffer: answer.body) == Self.answer(for: [line], oversize: true),
                    "\(String(buffer: answer.body).prefix(300))")
        }
        #expect(oversize.slots.take(), "the slot was given back")
    }

    @Test("Several large lines in one body are split as before")
    func severalLines() async throws {
        let lines = [Self.line(700_000, tag: "x"), Self.line(800_000, tag: "y"), Self.line(10, tag: "z")]
        let packed = try Self.gzip(lines.joined(separator: "\n") + "\n")
        try await Self.app(maxBodyBytes: 8 << 20, oversize: nil).test(.router) { client in
            let answer = try await client.execute(uri: "/push", method: .post, headers: [.contentEncoding: "gzip"], body: packed)
            #expect(answer.status == .ok && String(buffer: answer.body) == Self.answer(for: lines, oversize: false),
                    "\(String(buffer: answer.body).prefix(300))")
        }
    }

    @Test("Body not one whole gzip member of the length its trailer claims is unpacked as usual: cut, damaged, two members, claim too short or long, not gzip")
    func notThisBody() async throws {
        let line = Self.line(1_200_000)
        let length = line.utf8.count
        let packed = try Self.gzip(line)
        #expect(GzipBodyText.text(of: packed, length: length) == line)
        let cut = packed.getSlice(at: 0, length: packed.readableBytes / 2) ?? ByteBuffer()
        var damaged = packed
        damaged.setInteger(UInt8(0xFF), at: packed.readableBytes / 2)
        damaged.setInteger(UInt8(0x00), at: packed.readableBytes / 2 + 1)
        var twoMembers = packed
        var second = try Self.gzip(line)
        twoMembers.writeBuffer(&second)
        #expect(GzipBodyText.text(of: cut, length: length) == nil)
        #expect(GzipBodyText.text(of: damaged, length: length) == nil)
        #expect(GzipBodyText.text(of: twoMembers, length: length) == nil)
        #expect(GzipBodyText.text(of: packed, length: length - 1) == nil)
        #expect(GzipBodyText.text(of: packed, length: length + 1) == nil)
        #expect(GzipBodyText.recordedLength(of: ByteBuffer(string: String(repeating: "x", count: 100))) == nil)

        // Through the route, as the usual unpacking answers them.
        let damagedBody = damaged
        try await Self.app(maxBodyBytes: 8 << 20, oversize: nil).test(.router) { client in
            let bad = try await client.execute(uri: "/push", method: .post, headers: [.contentEncoding: "gzip"], body: damagedBody)
            #expect(bad.status == .badRequest && String(buffer: bad.body).contains("not valid gzip data"),
                    "\(bad.status) \(String(buffer: bad.body).prefix(200))")
            let notGzip = try await client.execute(uri: "/push", method: .post, headers: [.contentEncoding: "gzip"],
                                                   body: ByteBuffer(string: String(repeating: "x", count: 2_000_000)))
            #expect(notGzip.status == .badRequest && String(buffer: notGzip.body).contains("not valid gzip data"))
        }
    }
}
