import Foundation

/// Exchanges a user's credentials for an expiring access token.
/// (Served from the coordinator issue on; defined here as the contract.)
public struct AccessTokenRequest: FleetRequest, Hashable {
    public typealias Reply = AccessTokenReply
    public static let messageType: MessageType = "auth.token"

    public var email: String
    /// The user's secret (an API key or password in the simulation).
    public var secret: String

    public init(email: String, secret: String) {
        self.email = email
        self.secret = secret
    }
}

public struct AccessTokenReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "auth.token.reply"

    public var accessToken: String
    public var expiresAt: Date

    public init(accessToken: String, expiresAt: Date) {
        self.accessToken = accessToken
        self.expiresAt = expiresAt
    }
}

/// What a device's login needs to know about the token's user.
public struct UserInfoRequest: FleetRequest, Hashable {
    public typealias Reply = UserInfoReply
    public static let messageType: MessageType = "auth.userinfo"

    public var accessToken: String

    public init(accessToken: String) { self.accessToken = accessToken }
}

public struct UserInfoReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "auth.userinfo.reply"

    public var accountID: String
    public var accountName: String
    public var userID: String
    public var userName: String
    public var email: String
    /// The base URL of the server's HTTP listener (signing pages).
    public var host: String
    public var offlineSigningEnabled: Bool

    public init(
        accountID: String, accountName: String, userID: String, userName: String, email: String, host: String,
        offlineSigningEnabled: Bool
    ) {
        self.accountID = accountID
        self.accountName = accountName
        self.userID = userID
        self.userName = userName
        self.email = email
        self.host = host
        self.offlineSigningEnabled = offlineSigningEnabled
    }
}

/// Registers a device's Ed25519 public key under the token's account.
public struct EnrollDevice: FleetRequest, Hashable {
    public typealias Reply = EnrollDeviceReply
    public static let messageType: MessageType = "device.enroll"

    public var accessToken: String
    public var deviceID: String
    /// Raw 32-byte Ed25519 public key.
    public var publicKey: [UInt8]
    /// The highest sequence the device holds a receipt for (absent from older devices): a server
    /// that has applied less lost items it acknowledged, and says so (docs/sync.md).
    public var acknowledgedThrough: UInt64?

    public init(accessToken: String, deviceID: String, publicKey: [UInt8], acknowledgedThrough: UInt64? = nil) {
        self.accessToken = accessToken
        self.deviceID = deviceID
        self.publicKey = publicKey
        self.acknowledgedThrough = acknowledgedThrough
    }
}

public struct EnrollDeviceReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "device.enroll.reply"

    public var deviceID: String
    public var accountID: String
    public var enrolledAt: Date
    /// The highest sync sequence the server has applied for this device (0 when new).
    public var lastAppliedSequence: UInt64

    public init(deviceID: String, accountID: String, enrolledAt: Date, lastAppliedSequence: UInt64) {
        self.deviceID = deviceID
        self.accountID = accountID
        self.enrolledAt = enrolledAt
        self.lastAppliedSequence = lastAppliedSequence
    }
}
