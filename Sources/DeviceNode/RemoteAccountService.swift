import FleetProtocol

/// The ``AccountService`` of a device talking to a real coordinator: login asks it
/// for the token's user info over the wire (`auth.userinfo`).
public struct RemoteAccountService: AccountService {
    private let client: any ClientTransport

    public init(client: any ClientTransport) {
        self.client = client
    }

    public func userInfo(accessToken: String) async throws -> UserInfo {
        let reply = try await client.request(UserInfoRequest(accessToken: accessToken))
        return UserInfo(
            accountId: reply.accountID, accountName: reply.accountName, userId: reply.userID, userName: reply.userName,
            email: reply.email, host: reply.host, offlineSigningEnabled: reply.offlineSigningEnabled)
    }
}
