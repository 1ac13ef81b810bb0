import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// The daemon's HTTP/1 connections: Hummingbird's `http1()` child channel, with one handler
/// more. Hummingbird's pipeline turns NIO's HTTP/1 messages into version-less HTTP types
/// before any handler it lets us add sees them, so an HTTP/1.0 request was answered as if it
/// were HTTP/1.1 and its connection kept open, waiting for a next request an HTTP/1.0 client
/// never sends (a cheap way to hold the daemon's connections). ``HTTP10Close`` marks such a
/// request `Connection: close` while the version is still known, and Hummingbird closes the
/// connection after answering it.
struct HTTP1Server: ServerChildChannel, HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder
    let idleTimeout: TimeAmount

    /// A builder for `Application(server:)` (and for `.tls(…)` around it).
    static func builder(idleTimeout: TimeAmount) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in HTTP1Server(responder: responder, idleTimeout: idleTimeout) }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            // As Hummingbird's HTTP1Channel sets it up (its default decoder limits), with HTTP10Close before the conversion.
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = 80 * 1024
            limits.maxHeaderListSize = 80 * 1024
            limits.maxHeaderFieldCount = 1000
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(), withDecoderLimitConfiguration: limits
            )
            try channel.pipeline.syncOperations.addHandler(HTTP10Close())
            try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try channel.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(idleTimeout: .init(idleTimeout), logger: logger))
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

/// Marks an HTTP/1.0 request that does not ask for keep-alive `Connection: close` (so that
/// Hummingbird closes the connection after it), and says so in the answer's head. Lives on its
/// connection's event loop, like every channel handler.
final class HTTP10Close: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var closing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), head.version.major == 1, head.version.minor == 0, !head.isKeepAlive else {
            context.fireChannelRead(data)
            return
        }
        closing = true
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard closing, case .head(var head) = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}
