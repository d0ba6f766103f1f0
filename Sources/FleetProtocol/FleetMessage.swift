/// A message body with a fixed wire type.
public protocol FleetMessageBody: Codable, Sendable {
    static var messageType: MessageType { get }
}

/// A request whose reply has a known body type. Every request gets exactly
/// one reply: a `Reply` or a ``FleetError``.
public protocol FleetRequest: FleetMessageBody {
    associatedtype Reply: FleetMessageBody
}

/// The message types this build defines, in one place, so that a receiver can
/// tell "unknown type" from "known type it does not serve".
public enum FleetMessageCatalog {
    /// Every request type with the type of its reply.
    public static let requests: [(request: MessageType, reply: MessageType)] = [
        (Hello.messageType, HelloReply.messageType),
        (Heartbeat.messageType, HeartbeatReply.messageType),
        (AccessTokenRequest.messageType, AccessTokenReply.messageType),
        (UserInfoRequest.messageType, UserInfoReply.messageType),
        (EnrollDevice.messageType, EnrollDeviceReply.messageType),
        (SyncPush.messageType, SyncAck.messageType),
        (SyncResultsQuery.messageType, SyncResultsReply.messageType),
        (TemplateListRequest.messageType, TemplateListReply.messageType),
        (TemplateFetchRequest.messageType, TemplateFetchReply.messageType),
        (RecipientViewRequest.messageType, RecipientViewReply.messageType),
        (SigningURLRequest.messageType, RecipientViewReply.messageType),
        (EnvelopeQuery.messageType, EnvelopeQueryReply.messageType),
        (EnvelopeVoid.messageType, EnvelopeQueryReply.messageType),
        (RecipientAction.messageType, EnvelopeQueryReply.messageType),
    ]

    public static let requestTypes: Set<MessageType> = Set(requests.map(\.request))
    public static let replyTypes: Set<MessageType> = Set(requests.map(\.reply)).union([FleetError.messageType])

    public static func isKnown(_ type: MessageType) -> Bool {
        requestTypes.contains(type) || replyTypes.contains(type)
    }
}
