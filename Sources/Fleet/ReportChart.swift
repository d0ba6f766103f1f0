import Foundation

/// A line chart drawn as inline SVG (no scripts, no external loads): time on the
/// x axis, one or more series, and the run's fault windows shaded and labelled.
struct ReportChart {
    struct Series {
        var name: String
        var color: String
        var points: [(x: Double, y: Double)]
    }

    var id: String
    var title: String
    var unit: String
    var series: [Series]
    var faults: [AppliedFault]
    /// The x range, seconds since the run's start.
    var xMax: Double

    static let width = 900.0
    static let height = 260.0
    static let left = 60.0, right = 20.0, top = 30.0, bottom = 40.0

    func svg() -> String {
        let plotWidth = Self.width - Self.left - Self.right
        let plotHeight = Self.height - Self.top - Self.bottom
        let xSpan = max(xMax, 1)
        let yMaxRaw = series.flatMap { $0.points.map(\.y) }.max() ?? 0
        // Four grid steps of a round size.
        let yMax = 4 * Self.niceCeiling(max(yMaxRaw, 1e-9) * 1.05 / 4)
        func x(_ value: Double) -> Double { Self.left + min(max(value, 0), xSpan) / xSpan * plotWidth }
        func y(_ value: Double) -> Double { Self.top + plotHeight - max(value, 0) / yMax * plotHeight }

        var out = """
            <svg class="chart" id="\(id)" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(Int(Self.width)) \(Int(Self.height))" \
            width="\(Int(Self.width))" height="\(Int(Self.height))" role="img" aria-label="\(Self.escape(title))">
            <text x="\(Self.left)" y="18" class="title">\(Self.escape(title))</text>

            """
        // Fault windows first, under the lines; rows of labels so overlapping windows stay readable.
        for (index, fault) in faults.enumerated() {
            let start = x(fault.start)
            let end = x(fault.end ?? xSpan)
            let widthValue = max(end - start, 2)
            out += """
                <g class="fault"><rect x="\(Self.f(start))" y="\(Self.top)" width="\(Self.f(widthValue))" height="\(plotHeight)" />\
                <text x="\(Self.f(start + 2))" y="\(Self.f(Self.top + 12 + Double(index % 4) * 12))">\(Self.escape(fault.label))</text>\
                <title>\(Self.escape(fault.label)) \(Self.f(fault.start))s–\(fault.end.map { Self.f($0) + "s" } ?? "end")</title></g>

                """
        }
        // Axes and grid.
        for step in 0...4 {
            let value = yMax * Double(step) / 4
            let position = y(value)
            out += "<line class=\"grid\" x1=\"\(Self.left)\" y1=\"\(Self.f(position))\" x2=\"\(Self.left + plotWidth)\" y2=\"\(Self.f(position))\" />"
            out += "<text class=\"tick\" x=\"\(Self.left - 6)\" y=\"\(Self.f(position + 4))\" text-anchor=\"end\">\(Self.tick(value))</text>\n"
        }
        let xStep = Self.niceCeiling(xSpan / 8)
        var tickValue = 0.0
        while tickValue <= xSpan + 1e-9 {
            out += "<text class=\"tick\" x=\"\(Self.f(x(tickValue)))\" y=\"\(Self.f(Self.top + plotHeight + 16))\" text-anchor=\"middle\">\(Self.tick(tickValue))s</text>"
            tickValue += xStep
        }
        out += "\n<text class=\"tick\" x=\"\(Self.f(Self.left + plotWidth))\" y=\"\(Self.f(Self.height - 4))\" text-anchor=\"end\">time since start</text>"
        out += "<text class=\"tick\" x=\"12\" y=\"\(Self.f(Self.top - 6))\">\(Self.escape(unit))</text>\n"
        out += "<rect class=\"frame\" x=\"\(Self.left)\" y=\"\(Self.top)\" width=\"\(plotWidth)\" height=\"\(plotHeight)\" />\n"
        // Series and legend.
        for (index, line) in series.enumerated() {
            // A gap in the samples (no sync acks for a while) breaks the line rather than bridging it.
            for segment in Self.segments(line.points, maxGap: gapLimit) {
                let path = segment.map { "\(Self.f(x($0.x))),\(Self.f(y($0.y)))" }.joined(separator: " ")
                out += "<polyline class=\"series\" data-series=\"\(Self.escape(line.name))\" points=\"\(path)\" stroke=\"\(line.color)\" />\n"
            }
            let legendX = Self.left + plotWidth - 170 * Double(series.count - index)
            out += "<rect x=\"\(Self.f(legendX))\" y=\"8\" width=\"12\" height=\"12\" fill=\"\(line.color)\" />"
            out += "<text class=\"legend\" x=\"\(Self.f(legendX + 16))\" y=\"18\">\(Self.escape(line.name))</text>\n"
        }
        out += "</svg>"
        return out
    }

    /// Seconds without a point after which a line is broken.
    var gapLimit = 2.5

    /// `points` split where consecutive x values are more than `maxGap` apart.
    static func segments(_ points: [(x: Double, y: Double)], maxGap: Double) -> [[(x: Double, y: Double)]] {
        var result: [[(x: Double, y: Double)]] = []
        for point in points {
            if let last = result.last?.last, point.x - last.x <= maxGap {
                result[result.count - 1].append(point)
            } else {
                result.append([point])
            }
        }
        return result
    }

    /// 1, 2 or 5 times a power of ten, at least `value`.
    static func niceCeiling(_ value: Double) -> Double {
        guard value > 0 else { return 1 }
        let magnitude = pow(10, floor(log10(value)))
        for factor in [1.0, 2, 5, 10] where factor * magnitude >= value { return factor * magnitude }
        return 10 * magnitude
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func tick(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(format: value < 1 ? "%.2f" : "%.1f", value)
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
