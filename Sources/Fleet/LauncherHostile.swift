import Coordinator
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Hostile groups at launch (docs/scenarios.md, "Hostile groups"): the rival account the attackers
/// enroll in, created through the coordinator's admin API, and each hostile process's plan.
extension Launcher {
    /// The scenario's hostile groups by name.
    var hostileGroups: [String: HostileSettings] {
        Dictionary(configuration.scenario.groups.compactMap { group in group.hostile.map { (group.name, $0) } }, uniquingKeysWith: { a, _ in a })
    }

    /// Creates the rival account and its user (`POST /admin/accounts`, `POST /admin/accounts/rival/users`)
    /// and returns the user's secret, fresh for this run.
    func createRivalAccount() async throws -> String {
        guard let address = state.announced("http", by: "coordinator") else {
            throw LauncherError.childDidNotStart(process: "coordinator", waitingFor: "http", logFile: run.logFile(process: "coordinator"))
        }
        let secret = Self.randomSecret()
        try await adminPost(
            address: address, path: "admin/accounts",
            body: CoordinatorAdminRoutes.AccountRequest(id: RivalAccount.id, name: RivalAccount.name), acceptingConflict: true)
        try await adminPost(
            address: address, path: "admin/accounts/\(RivalAccount.id)/users",
            body: CoordinatorAdminRoutes.UserRequest(name: "Mallory", email: RivalAccount.email, secret: secret), acceptingConflict: false)
        return secret
    }

    /// n of a device id `<group>-<n>` (``FleetLayout/deviceID(group:number:)``).
    static func deviceNumber(_ id: String) -> Int { Int(id.split(separator: "-").last ?? "1") ?? 1 }

    /// The plan of a hostile group's process: each attacker's behaviour, and the honest target devices.
    func hostilePlan(for node: LaunchPlan.NodeProcess, settings: HostileSettings, rivalSecret: String) -> HostilePlan {
        var behaviours: [String: HostileBehaviour] = [:]
        for device in node.devices { behaviours[device.id] = settings.behaviour(ofDeviceNumber: Self.deviceNumber(device.id)) }
        let targets = configuration.plan.nodes.filter { $0.group == settings.target }.flatMap(\.devices).map(\.id)
        let squatters = configuration.plan.nodes.filter { $0.group == node.group }.flatMap(\.devices).map(\.id)
            .filter { settings.behaviour(ofDeviceNumber: Self.deviceNumber($0)) == .squat }
        return HostilePlan(
            behaviours: behaviours, squatters: squatters, targets: targets, targetStores: run.devicesDirectory,
            capturedItemsStore: run.coordinatorStore, logFile: run.hostileLogFile(process: node.process),
            every: settings.every, slowReaderMessages: settings.slowReaderMessages, rivalEmail: RivalAccount.email, rivalSecret: rivalSecret)
    }
}
