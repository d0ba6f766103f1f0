/// Bounds that decoding enforces before it allocates anything.
///
/// Every length in the input is checked against these limits and against the
/// bytes actually left, so a hostile message cannot make the decoder allocate
/// memory proportional to a length it merely claims.
///
/// ```swift
/// let decoder = MessagePackDecoder(limits: .init(maxDepth: 16, maxInputSize: 1 << 20))
/// ```
public struct MessagePackLimits: Sendable, Hashable {
    /// Deepest nesting of arrays and maps; the top-level container is depth 1.
    /// Values above ``depthCeiling`` act as ``depthCeiling``: decoding recurses
    /// once per level (as Codable does), and the stack must not run out.
    public var maxDepth: Int
    /// Most elements in one array, or entries in one map.
    public var maxCollectionCount: Int
    /// Longest `str` payload in bytes.
    public var maxStringLength: Int
    /// Longest `bin` or `ext` payload in bytes.
    public var maxBinaryLength: Int
    /// Largest whole input in bytes.
    public var maxInputSize: Int

    /// The most nesting any decoder accepts, whatever `maxDepth` says.
    public static let depthCeiling = 512

    /// 64 levels, 1,000,000 elements, 16 MiB strings, 64 MiB binaries, 128 MiB inputs.
    public static let `default` = MessagePackLimits()

    /// Creates limits; every parameter has the default's value unless given.
    public init(
        maxDepth: Int = 64,
        maxCollectionCount: Int = 1_000_000,
        maxStringLength: Int = 16 << 20,
        maxBinaryLength: Int = 64 << 20,
        maxInputSize: Int = 128 << 20
    ) {
        self.maxDepth = maxDepth
        self.maxCollectionCount = maxCollectionCount
        self.maxStringLength = maxStringLength
        self.maxBinaryLength = maxBinaryLength
        self.maxInputSize = maxInputSize
    }
}
