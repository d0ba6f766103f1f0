import Foundation

/// A small line chart drawn as inline SVG (the HTML report loads nothing from outside).
struct SVGChart {
    struct Series {
        var name: String
        var color: String
        var points: [(x: Double, y: Double)]
        var dashed = false
    }

    var title: String
    var xLabel: String
    var yLabel: String
    var series: [Series]
    /// Tick positions and their labels on the x axis; `nil` gives evenly spaced numbers.
    var xTicks: [(Double, String)]? = nil
    var width = 760.0
    var height = 320.0

    func render() -> String {
        let (left, right, top, bottom) = (64.0, 16.0, 36.0, 48.0)
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let all = series.flatMap(\.points)
        let xMin = all.map(\.x).min() ?? 0
        let xMax = max(all.map(\.x).max() ?? 1, xMin + 1e-9)
        let yMax = niceCeiling(max(all.map(\.y).max() ?? 1, 1e-9))
        func px(_ x: Double) -> Double { left + (x - xMin) / (xMax - xMin) * plotWidth }
        func py(_ y: Double) -> Double { top + plotHeight - y / yMax * plotHeight }

        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(f(width)) \(f(height))\" width=\"\(f(width))\" height=\"\(f(height))\" role=\"img\">\n"
        svg += "<title>\(escape(title))</title>\n"
        svg += "<text x=\"\(f(left))\" y=\"20\" font-size=\"14\" font-weight=\"bold\">\(escape(title))</text>\n"
        // Grid and y ticks.
        for i in 0...4 {
            let value = yMax * Double(i) / 4
            let y = py(value)
            svg += "<line x1=\"\(f(left))\" x2=\"\(f(left + plotWidth))\" y1=\"\(f(y))\" y2=\"\(f(y))\" stroke=\"#ddd\"/>"
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(y + 4))\" font-size=\"11\" text-anchor=\"end\">\(label(value))</text>\n"
        }
        let ticks = xTicks ?? (0...5).map { i in
            let value = xMin + (xMax - xMin) * Double(i) / 5
            return (value, label(value))
        }
        for (value, text) in ticks where value >= xMin - 1e-9 && value <= xMax + 1e-9 {
            let x = px(value)
            svg += "<line x1=\"\(f(x))\" x2=\"\(f(x))\" y1=\"\(f(top))\" y2=\"\(f(top + plotHeight))\" stroke=\"#eee\"/>"
            svg += "<text x=\"\(f(x))\" y=\"\(f(top + plotHeight + 16))\" font-size=\"11\" text-anchor=\"middle\">\(escape(text))</text>\n"
        }
        svg += "<rect x=\"\(f(left))\" y=\"\(f(top))\" width=\"\(f(plotWidth))\" height=\"\(f(plotHeight))\" fill=\"none\" stroke=\"#888\"/>\n"
        svg += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 8))\" font-size=\"12\" text-anchor=\"middle\">\(escape(xLabel))</text>\n"
        svg += "<text x=\"14\" y=\"\(f(top + plotHeight / 2))\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 \(f(top + plotHeight / 2)))\">\(escape(yLabel))</text>\n"
        for (index, line) in series.enumerated() where !line.points.isEmpty {
            let path = line.points.map { "\(f(px($0.x))),\(f(py($0.y)))" }.joined(separator: " ")
            let dash = line.dashed ? " stroke-dasharray=\"6 4\"" : ""
            svg += "<polyline fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"2\"\(dash) points=\"\(path)\"><title>\(escape(line.name))</title></polyline>\n"
            let lx = left + 8 + Double(index) * 150
            svg += "<line x1=\"\(f(lx))\" x2=\"\(f(lx + 18))\" y1=\"\(f(top + 10))\" y2=\"\(f(top + 10))\" stroke=\"\(line.color)\" stroke-width=\"2\"\(dash)/>"
            svg += "<text x=\"\(f(lx + 22))\" y=\"\(f(top + 14))\" font-size=\"11\">\(escape(line.name))</text>\n"
        }
        return svg + "</svg>"
    }

    private func niceCeiling(_ value: Double) -> Double {
        let magnitude = pow(10, floor(log10(value)))
        for step in [1.0, 2, 2.5, 5, 10] where step * magnitude >= value { return step * magnitude }
        return 10 * magnitude
    }

    private func label(_ value: Double) -> String {
        value >= 100 || value == value.rounded() ? String(format: "%.0f", value) : String(format: "%.3g", value)
    }

    private func f(_ value: Double) -> String { String(format: "%.1f", value) }
}

func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
}
