#!/usr/bin/env python3
"""Makes test PDFs with real producers, for Tests/CoordinatorTests/CaptiveRenderingTests.swift.

Usage: make_documents.py OUTDIR SEED

Writes OUTDIR/reportlab.pdf (reportlab, compressed: A4 portrait, US Letter landscape, US Legal,
and US Letter with a CropBox inset), OUTDIR/ghostscript.pdf (Ghostscript's pdfwrite from a
PostScript program: A4 portrait, A4 with /Rotate 90, A4 landscape) and OUTDIR/manifest.json:

  {"seed": N, "documents": [{"file", "producer", "pages": [{"media": [x0, y0, x1, y1],
   "crop": [...], "rotation": R, "width": W, "height": H, "marker": [x, y, w, h]}]}]}

Every page carries one solid magenta rectangle (the marker) placed from the seed; "marker" is
where it shows, in points from the top-left corner of the page as a viewer shows it (CropBox,
turned clockwise by /Rotate), computed here from the coordinates the producer drew it at. The
pages are busy (bands, shapes, text) so a blank or wrong page differs clearly from a right one.
"""
import json
import os
import random
import subprocess
import sys

from reportlab.lib.pagesizes import A4, legal, letter, landscape
from reportlab.pdfgen import canvas


def shown(rect, crop, rotation):
    """A user-space rectangle (x0, y0, x1, y1) as shown: (x, y, w, h) from the top-left corner."""
    ux0, uy0, ux1, uy1 = rect
    cx0, cy0, cx1, cy1 = crop
    if rotation == 0:
        return [ux0 - cx0, cy1 - uy1, ux1 - ux0, uy1 - uy0]
    if rotation == 90:
        return [uy0 - cy0, ux0 - cx0, uy1 - uy0, ux1 - ux0]
    if rotation == 180:
        return [cx1 - ux1, uy0 - cy0, ux1 - ux0, uy1 - uy0]
    return [cy1 - uy1, cx1 - ux1, uy1 - uy0, ux1 - ux0]


def page_entry(media, crop, rotation, marker):
    width, height = crop[2] - crop[0], crop[3] - crop[1]
    if rotation % 180:
        width, height = height, width
    return {"media": list(media), "crop": list(crop), "rotation": rotation, "width": width, "height": height,
            "marker": shown(marker, crop, rotation)}


def marker_in(rng, crop, size):
    """A marker rectangle of `size` somewhere inside `crop`, away from the edges."""
    w, h = size
    x0 = rng.uniform(crop[0] + 40, crop[2] - 40 - w)
    y0 = rng.uniform(crop[1] + 40, crop[3] - 40 - h)
    return (round(x0, 1), round(y0, 1), round(x0 + w, 1), round(y0 + h, 1))


def reportlab_document(path, rng):
    pages = []
    sizes = [("A4 portrait", A4, None), ("US Letter landscape", landscape(letter), None), ("US Legal", legal, None),
             ("US Letter with a CropBox", letter, (36, 54, 576, 738))]
    c = canvas.Canvas(path, pagesize=A4, pageCompression=1)
    c.setTitle("SignFleet rendering test (reportlab)")
    for number, (name, size, crop) in enumerate(sizes, start=1):
        c.setPageSize(size)
        media = (0, 0, size[0], size[1])
        if crop:
            c.setCropBox(crop)
        shown_crop = crop or media
        # Busy content: grey bands, outlined boxes, and text in two sizes.
        for band in range(0, int(size[1]), 90):
            c.setFillColorRGB(0.85, 0.88, 0.93)
            c.rect(0, band, size[0], 30, fill=1, stroke=0)
        c.setStrokeColorRGB(0.1, 0.3, 0.6)
        c.setLineWidth(2)
        for i in range(6):
            c.rect(50 + 60 * i, 120 + 25 * i, 120, 60, fill=0, stroke=1)
        c.setFillColorRGB(0, 0, 0)
        c.setFont("Helvetica-Bold", 28)
        c.drawString(shown_crop[0] + 50, shown_crop[3] - 80, "Page %d: %s" % (number, name))
        c.setFont("Times-Roman", 12)
        for line in range(24):
            c.drawString(shown_crop[0] + 50, shown_crop[3] - 120 - 18 * line,
                         "Line %d of page %d. The parties agree to the terms set out below." % (line + 1, number))
        marker = marker_in(rng, shown_crop, (180, 48))
        c.setFillColorRGB(1, 0, 1)
        c.rect(marker[0], marker[1], marker[2] - marker[0], marker[3] - marker[1], fill=1, stroke=0)
        pages.append(page_entry(media, shown_crop, 0, marker))
        c.showPage()
    c.save()
    return pages


def ghostscript_document(path, rng):
    sizes = [(595, 842, 0), (595, 842, 90), (842, 595, 0)]
    program = ["%!PS"]
    pages = []
    for number, (w, h, rotation) in enumerate(sizes, start=1):
        media = (0, 0, w, h)
        marker = marker_in(rng, media, (150, 44))
        program.append("<< /PageSize [%d %d] >> setpagedevice" % (w, h))
        if rotation:
            program.append("[ {ThisPage} << /Rotate %d >> /PUT pdfmark" % rotation)
        program.append("0.9 0.85 0.8 setrgbcolor 0 0 %d 120 rectfill 0 %d %d 60 rectfill" % (w, h - 200, w))
        program.append("0.2 0.5 0.2 setrgbcolor 3 setlinewidth 60 200 moveto %d %d lineto stroke" % (w - 60, h - 260))
        program.append("0 setgray /Helvetica-Bold findfont 26 scalefont setfont 50 %d moveto (Ghostscript page %d) show"
                       % (h - 90, number))
        program.append("/Times-Roman findfont 13 scalefont setfont")
        for line in range(20):
            program.append("50 %d moveto (Clause %d: the signer confirms the statements on page %d.) show"
                           % (h - 250 - 17 * line, line + 1, number))
        program.append("1 0 1 setrgbcolor %.1f %.1f %.1f %.1f rectfill"
                       % (marker[0], marker[1], marker[2] - marker[0], marker[3] - marker[1]))
        program.append("showpage")
        pages.append(page_entry(media, media, rotation, marker))
    source = path + ".ps"
    with open(source, "w", encoding="ascii") as out:
        out.write("\n".join(program) + "\n")
    subprocess.run(["gs", "-q", "-dNOPAUSE", "-dBATCH", "-dSAFER", "-dAutoRotatePages=/None", "-sDEVICE=pdfwrite",
                    "-o", path, source], check=True, timeout=120)
    os.remove(source)
    return pages


def main():
    directory, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    documents = [
        {"file": os.path.join(directory, "reportlab.pdf"), "producer": "reportlab"},
        {"file": os.path.join(directory, "ghostscript.pdf"), "producer": "ghostscript"},
    ]
    documents[0]["pages"] = reportlab_document(documents[0]["file"], rng)
    documents[1]["pages"] = ghostscript_document(documents[1]["file"], rng)
    with open(os.path.join(directory, "manifest.json"), "w", encoding="utf-8") as out:
        json.dump({"seed": seed, "documents": documents}, out)


if __name__ == "__main__":
    main()
