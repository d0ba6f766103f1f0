import CZlib

/// A rendered line segment in signing-area millimetres (origin at the area's top-left corner).
public struct RenderedSegment: Hashable, Sendable {
    /// Start x.
    public var x0: Double
    /// Start y.
    public var y0: Double
    /// End x.
    public var x1: Double
    /// End y.
    public var y1: Double
    /// Stroke width in millimetres (pressure dependent for pens with pressure).
    public var width: Double
}

extension CapturedSignature {
    /// Stroke width in millimetres for a segment whose endpoints have these pressures.
    @inline(__always)
    func strokeWidth(_ p0: Double, _ p1: Double) -> Double {
        let base = configuration.pen.size / configuration.screen.pointsPerMillimetre
        guard characteristics.reportsPressure else { return base }
        return base * (0.25 + 0.75 * (p0 + p1) * 0.5)
    }

    /// Calls `body` for every rendered segment: consecutive pen-down samples (no lift, no gap in the
    /// sample clock) whose both ends lie inside the signing area. Samples outside the area stay in the
    /// biometric data (best data) but are not rendered, as the SDK's image is "what is actually rendered".
    @inline(__always)
    func forEachSegment(_ body: (Double, Double, Double, Double, Double) -> Void) {
        let area = configuration.area
        var previous: PenSample? = nil
        for sample in samples {
            defer { previous = sample }
            guard let p = previous, p.isDown, sample.isDown, sample.tick == p.tick + 1,
                  area.contains(x: p.x, y: p.y), area.contains(x: sample.x, y: sample.y) else { continue }
            body(p.x - area.x, p.y - area.y, sample.x - area.x, sample.y - area.y, strokeWidth(p.pressure, sample.pressure))
        }
    }

    /// The rendered segments, for inspection and tests.
    public func renderedSegments() -> [RenderedSegment] {
        var out: [RenderedSegment] = []
        forEachSegment { out.append(RenderedSegment(x0: $0, y0: $1, x1: $2, y1: $3, width: $4)) }
        return out
    }

    /// The rendered signature as SVG text (UTF-8), sized to the signing area in millimetres.
    ///
    /// Strokes are polylines with round caps; the width follows pressure (quantised to 0.05 mm).
    public func svg() -> String {
        String(decoding: svgBytes(), as: UTF8.self)
    }

    /// The rendered signature as SVG bytes (UTF-8). Faster than ``svg()`` when writing to a file.
    public func svgBytes() -> [UInt8] {
        let area = configuration.area
        let color = configuration.pen.color
        // Upper bound: fixed text plus, per segment, a new polyline header and two points.
        let capacity = 512 + samples.count * 96
        return [UInt8].writing(capacity: capacity) { out in
            out.ascii("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"")
            out.fixed2(area.width)
            out.ascii("mm\" height=\"")
            out.fixed2(area.height)
            out.ascii("mm\" viewBox=\"0 0 ")
            out.fixed2(area.width)
            out.byte(0x20)
            out.fixed2(area.height)
            out.ascii("\">\n<g fill=\"none\" stroke=\"#")
            for c in [color.red, color.green, color.blue] {
                out.byte(hexDigit(c >> 4))
                out.byte(hexDigit(c & 0xF))
            }
            out.ascii("\" stroke-linecap=\"round\" stroke-linejoin=\"round\">\n")
            var open = false
            var lastX = Double.nan, lastY = Double.nan
            var lastBucket = -1
            forEachSegment { x0, y0, x1, y1, width in
                let bucket = roundToInt(width * 20)
                if !open || bucket != lastBucket || x0 != lastX || y0 != lastY {
                    if open { out.ascii("\"/>\n") }
                    out.ascii("<polyline stroke-width=\"")
                    out.fixed2(Double(bucket) / 20)
                    out.ascii("\" points=\"")
                    out.fixed2(x0)
                    out.byte(0x2C)
                    out.fixed2(y0)
                    open = true
                    lastBucket = bucket
                }
                out.byte(0x20)
                out.fixed2(x1)
                out.byte(0x2C)
                out.fixed2(y1)
                lastX = x1
                lastY = y1
            }
            if open { out.ascii("\"/>\n") }
            out.ascii("</g>\n</svg>\n")
        }
    }

    /// The ink coverage (0–255 per pixel, row-major) of the rendered strokes.
    func rasterize(pixelsPerMillimetre: Double) throws -> (width: Int, height: Int, coverage: [UInt8]) {
        let area = configuration.area
        let width = Int((area.width * pixelsPerMillimetre).rounded(.up))
        let height = Int((area.height * pixelsPerMillimetre).rounded(.up))
        guard width > 0, height > 0, width * height <= 64_000_000 else {
            throw CaptureError(code: .invalidConfiguration, message: "PNG of \(width)×\(height) pixels is empty or too large; change pixelsPerMillimetre")
        }
        var coverage = [UInt8](repeating: 0, count: width * height)
        let k = pixelsPerMillimetre
        coverage.withUnsafeMutableBufferPointer { cov in
            forEachSegment { x0, y0, x1, y1, w in
                let ax = x0 * k, ay = y0 * k, bx = x1 * k, by = y1 * k
                let r = w * k / 2
                let minPX = max(0, Int((min(ax, bx) - r - 1).rounded(.down)))
                let maxPX = min(width - 1, Int((max(ax, bx) + r + 1).rounded(.up)))
                let minPY = max(0, Int((min(ay, by) - r - 1).rounded(.down)))
                let maxPY = min(height - 1, Int((max(ay, by) + r + 1).rounded(.up)))
                guard minPX <= maxPX, minPY <= maxPY else { return }
                let dx = bx - ax, dy = by - ay
                let lengthSquared = dx * dx + dy * dy
                let inverse = lengthSquared > 0 ? 1 / lengthSquared : 0
                for py in minPY...maxPY {
                    let cy = Double(py) + 0.5
                    let row = py * width
                    for px in minPX...maxPX {
                        let cx = Double(px) + 0.5
                        var t = ((cx - ax) * dx + (cy - ay) * dy) * inverse
                        t = min(max(t, 0), 1)
                        let ex = ax + t * dx - cx, ey = ay + t * dy - cy
                        let d = (ex * ex + ey * ey).squareRoot()
                        let c = r + 0.5 - d
                        guard c > 0 else { continue }
                        let value = UInt8(min(c, 1) * 255)
                        if value > cov[row + px] { cov[row + px] = value }
                    }
                }
            }
        }
        return (width, height, coverage)
    }

    /// The rendered signature as a PNG (8-bit RGB, white background), compressed with zlib.
    ///
    /// - Parameter pixelsPerMillimetre: resolution (default 6, about 152 dpi).
    /// - Throws: ``CaptureError`` with ``CaptureError/Code/compressionFailed`` when zlib fails,
    ///   ``CaptureError/Code/invalidConfiguration`` when the image would be empty or too large.
    public func png(pixelsPerMillimetre: Double = 6) throws -> [UInt8] {
        let (width, height, coverage) = try rasterize(pixelsPerMillimetre: pixelsPerMillimetre)
        // Scanlines: filter byte 0 then RGB, ink blended over white by coverage.
        let color = configuration.pen.color
        let stride = 1 + width * 3
        var raw = [UInt8](repeating: 0, count: stride * height)
        raw.withUnsafeMutableBufferPointer { out in
            coverage.withUnsafeBufferPointer { cov in
                for y in 0..<height {
                    var o = y * stride + 1
                    for x in 0..<width {
                        let a = Int(cov[y * width + x])
                        out[o] = UInt8(255 - ((255 - Int(color.red)) * a + 127) / 255)
                        out[o + 1] = UInt8(255 - ((255 - Int(color.green)) * a + 127) / 255)
                        out[o + 2] = UInt8(255 - ((255 - Int(color.blue)) * a + 127) / 255)
                        o += 3
                    }
                }
            }
        }
        let compressed = try PNGEncoder.zlibCompress(raw)
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png.reserveCapacity(compressed.count + 64)
        var header: [UInt8] = []
        header.appendUInt32(UInt32(width))
        header.appendUInt32(UInt32(height))
        header.append(contentsOf: [8, 2, 0, 0, 0])  // depth 8, RGB, deflate, filter 0, no interlace
        PNGEncoder.appendChunk("IHDR", header, to: &png)
        PNGEncoder.appendChunk("IDAT", compressed, to: &png)
        PNGEncoder.appendChunk("IEND", [], to: &png)
        return png
    }
}

enum PNGEncoder {
    static func zlibCompress(_ input: [UInt8]) throws -> [UInt8] {
        var bound = compressBound(uLong(input.count))
        var output = [UInt8](repeating: 0, count: Int(bound))
        let status = output.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer { inp in
                compress2(out.baseAddress, &bound, inp.baseAddress, uLong(inp.count), 6)
            }
        }
        guard status == Z_OK else {
            throw CaptureError(code: .compressionFailed, message: "zlib compress2 failed with status \(status)")
        }
        output.removeLast(output.count - Int(bound))
        return output
    }

    static func crc(_ type: [UInt8], _ data: [UInt8]) -> UInt32 {
        var c = type.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) }
        c = data.withUnsafeBufferPointer { crc32(c, $0.baseAddress, uInt($0.count)) }
        return UInt32(truncatingIfNeeded: c)
    }

    static func appendChunk(_ type: String, _ data: [UInt8], to png: inout [UInt8]) {
        let typeBytes = Array(type.utf8)
        png.appendUInt32(UInt32(data.count))
        png.append(contentsOf: typeBytes)
        png.append(contentsOf: data)
        png.appendUInt32(crc(typeBytes, data))
    }
}

@inline(__always) func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x61 + v - 10 }

