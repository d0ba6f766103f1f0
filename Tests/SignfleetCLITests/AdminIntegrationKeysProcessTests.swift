import FleetTesting
import Foundation
import Testing

/// `signfleet admin integration-keys` on a real store (docs/rest-api.md, "Authentication"): a key
/// registered, listed, consented to and revoked; the refusals name what was wrong.
@Suite struct AdminIntegrationKeysProcessTests {
    @Test(.timeLimit(.minutes(2))) func registerListConsentRevoke() async throws {
        let place = try AdminStoreDirectory("keys")
        defer { place.remove() }
        let directory = place.directory
        let admin = place.admin
        #expect(try await admin(["create-account", "--id", "acme", "--name", "Acme"]).status == 0)
        #expect(try await admin(["create-user", "--account", "acme", "--name", "Ann", "--email", "ann@acme.example", "--secret", "secret-123"]).status == 0)
        // An RSA public key, made by Python's cryptography (installed by scripts/install-deps.sh).
        let publicKey = directory.appendingPathComponent("key.pub.pem").path
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let made = try await ChildProcess.run(
            "/usr/bin/env",
            [
                python, "-c",
                """
                from cryptography.hazmat.primitives.asymmetric import rsa
                from cryptography.hazmat.primitives import serialization
                k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
                open('\(publicKey)', 'wb').write(k.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
                """,
            ])
        try #require(made.status == 0, "\(made.standardError)")

        let added = try await admin(["integration-keys", "add", "--account", "acme", "--name", "Backend", "--public-key-file", publicKey])
        #expect(added.status == 0, "\(added.err)")
        let id = try #require(added.out.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(added.out.hasPrefix("integration-key "))
        let listed = try await admin(["integration-keys", "list", "--account", "acme"])
        #expect(listed.out.contains(id) && listed.out.contains("in-force") && listed.out.contains("Backend"), "\(listed.out)")
        // A key of the authorization code grant: its secret is printed once, its redirect URIs kept.
        let app = try await admin([
            "integration-keys", "add", "--account", "acme", "--name", "Web app", "--secret", "--redirect-uri", "https://app.example/cb",
        ])
        #expect(app.status == 0 && app.out.contains("client-secret "), "\(app)")
        #expect(try await admin(["integration-keys", "list", "--account", "acme"]).out.contains(" code Web app"))
        #expect(listed.out.contains(" jwt Backend"), "\(listed.out)")
        let neither = try await admin(["integration-keys", "add", "--account", "acme", "--name", "Nothing"])
        #expect(neither.status != 0 && neither.err.contains("client secret"), "\(neither)")
        let badURI = try await admin(["integration-keys", "add", "--account", "acme", "--name", "X", "--secret", "--redirect-uri", "ftp://x"])
        #expect(badURI.status != 0 && badURI.err.contains("redirect URI"), "\(badURI)")
        let consent = try await admin(["integration-keys", "consent", id, "--email", "ann@acme.example"])
        #expect(consent.status == 0 && consent.out.contains("signature impersonation"), "\(consent)")
        let stranger = try await admin(["integration-keys", "consent", id, "--email", "nobody@else.example"])
        #expect(stranger.status != 0 && stranger.err.contains("no user"), "\(stranger)")
        let junk = directory.appendingPathComponent("junk.pem").path
        try Data("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n".utf8).write(to: URL(fileURLWithPath: junk))
        let notAKey = try await admin(["integration-keys", "add", "--account", "acme", "--name", "Bad", "--public-key-file", junk])
        #expect(notAKey.status != 0 && notAKey.err.contains("RSA public key"), "\(notAKey)")
        #expect(try await admin(["integration-keys", "revoke", id, "--account", "acme"]).status == 0)
        #expect(try await admin(["integration-keys", "list"]).out.contains("revoked-"))
        let again = try await admin(["integration-keys", "revoke", id, "--account", "acme"])
        #expect(again.status != 0 && again.err.contains("no integration key"), "\(again)")
    }
}
