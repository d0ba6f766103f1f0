extension ISOSignatureRecord {
    /// A pen-down stroke: points in millimetres from the record's origin (x right, y down).
    public typealias Stroke = [(x: Double, y: Double)]

    /// The record's ink as strokes, for drawing it back (a completed document's signature).
    ///
    /// Positions are X and Y divided by their scaling (units per millimetre; 100 when a record
    /// gives none). A stroke breaks where the pen is up — `S` = 0 when the record has an S channel,
    /// else `F` = 0 when it has an F channel — and where `T` skips a sample period (the pen left the
    /// surface between two samples). Records without X or Y have no ink. At most `maxPoints` points
    /// are kept (later ones are dropped), so a hostile record costs bounded work.
    public func strokes(maxPoints: Int = 50_000) -> [Stroke] {
        guard let xs = column(.x), let ys = column(.y) else { return [] }
        let xScale = description(of: .x)?.scaling?.value ?? ISOSignatureRecord.positionUnitsPerMillimetre
        let yScale = description(of: .y)?.scaling?.value ?? ISOSignatureRecord.positionUnitsPerMillimetre
        let down: [Int32]? = column(.s) ?? column(.f)
        let ticks = column(.t)
        var strokes: [Stroke] = []
        var current: Stroke = []
        var kept = 0
        for i in 0..<min(xs.count, ys.count) where kept < maxPoints {
            let penDown = down.map { $0[i] > 0 } ?? true
            let continuous = i > 0 && (ticks.map { Int64($0[i]) - Int64($0[i - 1]) <= 1 } ?? true)
            if !penDown || !continuous, !current.isEmpty {
                strokes.append(current)
                current = []
            }
            guard penDown else { continue }
            current.append((Double(xs[i]) / xScale, Double(ys[i]) / yScale))
            kept += 1
        }
        if !current.isEmpty { strokes.append(current) }
        return strokes
    }
}
