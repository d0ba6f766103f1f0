import Envelopes
import FleetProtocol
import Foundation

/// Renders the captive signing page: one self-contained HTML document (inline CSS and JS
/// under a per-response nonce, nothing loaded from elsewhere) showing the envelope's pages with
/// the recipient's tabs in place, a signature pad driven by pointer events (mouse, pen with
/// pressure, finger), and Finish, Finish Later and Decline.
///
/// Every string that came from a user (envelope name, subject, message, names, tab labels and
/// values, error text) goes through ``escape(_:)``; tabs are placed by generated CSS classes,
/// never by inline `style` attributes, so the policy needs no `unsafe-inline`.
enum SigningPage {
    /// Canvas size of the signature pad, in CSS pixels.
    static let padSize = (width: 600, height: 200)
    /// The resolution page images are drawn at for `scale=1`: one image pixel per CSS pixel,
    /// so a page shows at its true size (1 pt = 1/72 in = 4/3 CSS px).
    static let imageDPI = 96.0

    /// Escapes text for HTML element content and quoted attribute values.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// JSON safe to place inside a `<script type="application/json">` element.
    static func scriptJSON(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let text = (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return text.replacingOccurrences(of: "<", with: "\\u003c").replacingOccurrences(of: ">", with: "\\u003e")
            .replacingOccurrences(of: "&", with: "\\u0026")
    }

    /// The Content-Security-Policy of a page: only this response's inline code, images from this
    /// origin, forms posted here and (after the post) redirected to the return URL's origin.
    static func contentSecurityPolicy(nonce: String, returnURL: String?) -> String {
        var formAction = "'self'"
        if let returnURL, let source = formSource(returnURL) { formAction += " \(source)" }
        return "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; img-src 'self' data:; "
            + "connect-src 'self'; form-action \(formAction); frame-ancestors 'none'; base-uri 'none'"
    }

    /// A CSP source for the return URL: its origin for http(s), its scheme otherwise; `nil`
    /// when it has characters a source may not contain.
    static func formSource(_ url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else { return nil }
        guard scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+.-".contains($0)) }) else { return nil }
        guard scheme == "http" || scheme == "https" else { return "\(scheme):" }
        // The host as browsers compare it: IDNA's ASCII form (`xn--…`). Foundation's `host` decodes
        // punycode to Unicode, and a CSP naming the Unicode host blocks the redirect.
        guard let host = components.encodedHost?.lowercased(), !host.isEmpty,
            host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-".contains($0)) })
        else { return nil }
        return "\(scheme)://\(host)\(components.port.map { ":\($0)" } ?? "")"
    }

    /// The page's HTML. `pageImages` says whether pages are drawn by the renderer
    /// (``CaptivePageImages``); without it each page shows its text layer and says why.
    static func render(_ model: SigningPageModel, nonce: String, pageImages: Bool = false) -> String {
        let text = SigningPageStrings(locale: model.locale)
        let e = escape
        var css = baseCSS
        var body = ""
        for (documentIndex, document) in model.documents.enumerated() {
            body += "<section class=\"document\"><h2>\(e(document.name))</h2>"
            body += "<p class=\"doc-link\"><a href=\"/signing/\(model.token)/documents/\(e(document.id))\">\(e(text.openPDF))</a></p>"
            let pageCount = max(document.pageCount, 1)
            for page in 1...pageCount {
                let geometry = page <= document.pages.count ? document.pages[page - 1] : PDFPageGeometry.letter
                // Sized in whole pixels as pdftoppm sizes the image (rounding up), so the image is drawn 1:1.
                let pixels = imagePixels(geometry)
                let box = "g-\(documentIndex)-\(page)"
                css += ".\(box){width:\(pixels.width)px;aspect-ratio:\(pixels.width)/\(pixels.height)}"
                let caption = "\(document.name) · \(text.page) \(page)/\(document.pageCount)"
                body += "<p class=\"page-label\" id=\"label-\(documentIndex)-\(page)\">\(e(caption))</p>"
                body += "<div class=\"page \(box)\" data-page=\"\(page)\" data-width=\"\(number(geometry.width))\" "
                    + "data-height=\"\(number(geometry.height))\" data-rotation=\"\(geometry.rotation)\">"
                if pageImages {
                    let source = "/signing/\(model.token)/documents/\(e(document.id))/pages/\(page)"
                    body += "<img class=\"page-image\" src=\"\(source)\" srcset=\"\(source) 1x, \(source)?scale=2 2x\" "
                        + "width=\"\(pixels.width)\" height=\"\(pixels.height)\" loading=\"lazy\" alt=\"\(e(caption))\">"
                }
                body += "<p class=\"render-note\(pageImages ? " hidden" : "")\" role=\"status\">\(e(text.notDrawn))</p>"
                // The text layer sits under the image: what shows (and is read aloud) when it is missing.
                let runs = page <= document.text.count && geometry.rotation == 0 ? document.text[page - 1] : []
                for (runIndex, run) in runs.enumerated() {
                    let name = "x-\(documentIndex)-\(page)-\(runIndex)"
                    let top = run.top - PDFTextPreview.defaultPageHeight + geometry.cropBox.y1
                    css += ".\(name){left:\(points(run.x - geometry.cropBox.x0));top:\(points(top));font-size:\(points(run.size))}"
                    body += "<span class=\"pdf-text \(name)\">\(e(run.text))</span>"
                }
                // Document order is reading order (top to bottom, then left to right), so Tab follows it.
                let tabs = model.tabs.filter { $0.tab.documentId == document.id && $0.tab.pageNumber == page }
                    .sorted { ($0.tab.frame.y, $0.tab.frame.x, $0.index) < ($1.tab.frame.y, $1.tab.frame.x, $1.index) }
                for item in tabs {
                    css += tabCSS(item, on: geometry)
                    body += tabHTML(item, model: model, text: text)
                }
                body += "</div>"
            }
            body += "</section>"
        }
        let data = SigningPageData(
            envelopeID: model.envelopeID, transactionID: model.transactionID, recipientID: model.recipientID,
            recipientName: model.recipientName, canvas: ["width": padSize.width, "height": padSize.height],
            tabs: model.tabs.map {
                SigningPageData.Tab(
                    index: $0.index, type: $0.tab.type.rawValue, required: !$0.tab.optional && !$0.tab.locked, locked: $0.tab.locked,
                    value: $0.tab.value, group: $0.tab.groupName, selected: $0.tab.selected)
            })
        let signer = model.recipientEmail.map { "\(e(model.recipientName)) &lt;\(e($0))&gt;" } ?? e(model.recipientName)
        let error = model.error.map { "<p class=\"error\" id=\"error\" role=\"alert\" data-kind=\"server\">\(e($0))</p>" }
            ?? "<p class=\"error hidden\" id=\"error\" role=\"alert\"></p>"
        return """
            <!DOCTYPE html>
            <html lang="\(e(model.locale ?? "en"))">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <title>\(e(text.title)): \(e(model.envelopeName))</title>
            <style nonce="\(nonce)">\(css)</style>
            </head>
            <body>
            <header>
            <h1 id="envelope-name">\(e(model.envelopeName))</h1>
            <p class="subject">\(e(model.emailSubject))</p>
            <p class="message">\(e(model.emailMessage))</p>
            <p class="signer">\(e(text.signingAs)) <span id="signer-name">\(signer)</span></p>
            </header>
            <form id="signing-form" method="post" action="/signing/\(model.token)">
            <input type="hidden" name="csrf" value="\(e(model.csrf))">
            \(error)
            <main>\(body)</main>
            <footer>
            <button type="submit" name="action" value="finish" id="finish" class="primary">\(e(text.finish))</button>
            <button type="submit" name="action" value="later" id="finish-later" formnovalidate>\(e(text.finishLater))</button>
            <details id="decline-box"><summary id="decline">\(e(text.decline))</summary>
            <label for="decline-reason">\(e(text.reason))</label>
            <textarea id="decline-reason" name="reason" maxlength="500"></textarea>
            <button type="submit" name="action" value="decline" id="confirm-decline" formnovalidate>\(e(text.confirmDecline))</button>
            </details>
            </footer>
            </form>
            <dialog id="pad" aria-labelledby="pad-title">
            <h2 id="pad-title" class="pad-title">\(e(text.adoptTitle))</h2>
            <p id="pad-help">\(e(text.drawHere))</p>
            <canvas id="pad-canvas" width="\(padSize.width)" height="\(padSize.height)" role="img" aria-label="\(e(text.padName))"></canvas>
            <p class="pad-info" id="pad-info" aria-live="polite"></p>
            <div class="pad-typed"><label for="pad-typed">\(e(text.typeInstead))</label>\
            <input type="text" id="pad-typed" maxlength="\(SigningForm.maxTypedLength)" autocomplete="name"></div>
            <div class="pad-buttons">
            <button type="button" id="pad-clear">\(e(text.clear))</button>
            <button type="button" id="pad-cancel">\(e(text.cancel))</button>
            <button type="button" id="pad-adopt" class="primary">\(e(text.adopt))</button>
            </div>
            </dialog>
            <script type="application/json" id="sf-data">\(scriptJSON(data))</script>
            <script type="application/json" id="sf-text">\(scriptJSON(["signFirst": text.signFirst, "reasonFirst": text.reasonFirst, "drawFirst": text.drawFirst, "signedAgain": text.signedAgain]))</script>
            <script nonce="\(nonce)">\(script)</script>
            </body>
            </html>
            """
    }

    /// A page's size in CSS pixels at its true size: points × 96/72, rounded up as pdftoppm does.
    static func imagePixels(_ page: PDFPageGeometry) -> (width: Int, height: Int) {
        func side(_ points: Double) -> Int { Int(min(max((points * imageDPI / 72).rounded(.up), 1), 20_000)) }
        return (side(page.width), side(page.height))
    }

    /// A tab's box as percentages of its page's shown size, so it stays on its spot at any zoom
    /// or width. A tab's frame is in points from the shown page's top-left corner.
    static func tabCSS(_ item: PageTab, on page: PDFPageGeometry) -> String {
        let frame = item.tab.frame
        return ".t-\(item.index){left:\(percent(frame.x, of: page.width));top:\(percent(frame.y, of: page.height));"
            + "width:\(percent(frame.width, of: page.width));height:\(percent(frame.height, of: page.height))}"
    }

    /// A length in points for generated CSS: clamped, never NaN.
    static func points(_ value: Double) -> String {
        "\(number(min(max(value, 0), 14_400)))pt"
    }

    static func percent(_ value: Double, of whole: Double) -> String {
        let share = whole > 0 ? value / whole * 100 : 0
        return "\(number(min(max(share, 0), 100)))%"
    }

    /// A finite number with at most three decimals (0 for NaN, infinities and absurd sizes). Trailing zeros are
    /// cut by hand: a regular expression here cost a fifth of a page open (Foundation's on Linux).
    static func number(_ value: Double) -> String {
        guard value.isFinite, abs(value) < 1e12 else { return "0" }
        let thousandths = Int((value * 1000).rounded())
        let whole = thousandths / 1000, fraction = abs(thousandths % 1000)
        let sign = thousandths < 0 && whole == 0 ? "-" : ""
        guard fraction > 0 else { return "\(sign)\(whole)" }
        var digits = String(fraction + 1000).dropFirst()  // three digits, leading zeros kept
        while digits.last == "0" { digits = digits.dropLast() }
        return "\(sign)\(whole).\(digits)"
    }

    /// A tab's markup. Every field has a visible `<label>` (the tab's name, else its kind); a
    /// signature field is one button that holds its preview, so signing again is a key press away.
    static func tabHTML(_ item: PageTab, model: SigningPageModel, text: SigningPageStrings) -> String {
        let e = escape
        let tab = item.tab
        let index = item.index
        let required = !tab.optional && !tab.locked
        let name = tab.name ?? tab.label
        let classes = "tab t-\(index) tab-\(tab.type.rawValue)"
        let open = "<div class=\"\(classes)\"\(name.map { " title=\"\(e($0))\"" } ?? "")>"
        func label(_ fallback: String) -> String {
            "<label class=\"tab-label\" for=\"tab-\(index)\">\(e(name ?? fallback))\(required ? " *" : "")</label>"
        }
        switch tab.type {
        case .signHere, .initialHere:
            let caption = tab.type == .signHere ? text.signHere : text.initialHere
            return """
                \(open)<button type="button" class="sign-tab" id="sign-\(index)" data-index="\(index)" \
                data-required="\(required)"><span class="sign-caption">\(e(caption))</span>\
                <canvas class="sig-preview hidden" id="preview-\(index)" width="\(padSize.width)" height="\(padSize.height)" \
                aria-hidden="true"></canvas></button>\
                <input type="hidden" name="sig-\(index)" id="sig-\(index)" value=""></div>
                """
        case .checkbox:
            return "\(open)<input type=\"checkbox\" name=\"tab-\(index)\" id=\"tab-\(index)\" value=\"on\"\(tab.selected ? " checked" : "")\(tab.locked ? " disabled" : "")>\(label(text.checkbox))</div>"
        case .radio:
            let group = e(tab.groupName ?? "\(index)")
            return "\(open)<input type=\"radio\" name=\"radio-\(group)\" id=\"tab-\(index)\" value=\"\(index)\"\(tab.selected ? " checked" : "")\(tab.locked ? " disabled" : "")>\(label(text.option))</div>"
        case .fullName:
            return "\(open)<span class=\"filled\" id=\"tab-\(index)\">\(e(model.recipientName))</span></div>"
        case .dateSigned:
            return "\(open)<span class=\"filled\" id=\"tab-\(index)\">\(e(text.dateSigned))</span></div>"
        case .formula:
            return "\(open)<span class=\"filled\" id=\"tab-\(index)\">\(e(tab.value ?? ""))</span></div>"
        case .text, .company, .title:
            let kind = tab.type == .text ? text.textField : tab.type == .company ? text.company : text.jobTitle
            return "\(open)\(label(kind))<input type=\"text\" name=\"tab-\(index)\" id=\"tab-\(index)\" maxlength=\"10000\" value=\"\(e(tab.value ?? ""))\"\(required ? " required" : "")\(tab.locked ? " readonly" : "")></div>"
        }
    }

    static let baseCSS = """
        *{box-sizing:border-box}body{margin:0;font:15px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#e9edf2;color:#1d2733}\
        header{background:#1d3557;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:22px}header p{margin:2px 0}\
        .subject{font-weight:600}.signer{margin-top:8px;font-size:14px}\
        main{padding:8px 12px 120px}.document h2{text-align:center;font-size:17px;margin:18px 0 0}.doc-link{text-align:center;margin:4px}\
        .page{position:relative;max-width:100%;margin:0 auto 18px;background:#fff;box-shadow:0 2px 8px rgba(0,0,0,.18)}\
        .page-label{margin:14px auto 4px;text-align:center;font-size:12px;color:#3d4754}\
        .page-image{position:absolute;left:0;top:0;width:100%;height:100%;z-index:1;background:#fff}\
        .render-note{position:absolute;left:8px;right:8px;top:8px;margin:0;z-index:2;background:#fff8e1;color:#5c3d00;border:1px solid #e0b44c;padding:6px 10px;border-radius:6px;font-size:13px}\
        .pdf-text{position:absolute;white-space:pre;font-family:Helvetica,Arial,sans-serif;color:#222;line-height:1}\
        .tab{position:absolute;z-index:3;display:flex;align-items:center;justify-content:center}\
        .sign-tab{position:relative;width:100%;height:100%;padding:0;border:2px dashed #b36b00;background:#fff6df;color:#5c3b00;font-weight:700;cursor:pointer;border-radius:4px}\
        .tab.signed .sign-tab{border:1px solid transparent;border-bottom-color:#1d3557;background:transparent}.tab.signed .sign-caption{display:none}\
        .sig-preview{position:absolute;left:0;top:0;width:100%;height:100%}\
        .tab input[type=text]{width:100%;height:100%;border:1px solid #3f6fa3;background:#eef5ff;padding:2px 6px;font:inherit}\
        .tab input[type=checkbox],.tab input[type=radio]{width:80%;height:80%;margin:0}\
        .tab-label{position:absolute;font-size:11px;line-height:1.2;color:#1d2733;background:rgba(255,255,255,.92);padding:0 3px;white-space:nowrap;border-radius:3px}\
        .tab-text .tab-label,.tab-company .tab-label,.tab-title .tab-label{left:0;bottom:100%}\
        .tab-checkbox .tab-label,.tab-radio .tab-label{left:100%;margin-left:4px;top:50%;transform:translateY(-50%)}\
        .filled{font-size:14px;border-bottom:1px solid #9aa5b1;width:100%}\
        :focus-visible{outline:3px solid #1a5fb4;outline-offset:2px}\
        footer{position:fixed;bottom:0;left:0;right:0;z-index:5;background:#fff;border-top:1px solid #c9d1db;padding:10px 16px;display:flex;gap:10px;align-items:flex-start;flex-wrap:wrap}\
        button{font:inherit;padding:8px 16px;border:1px solid #6b7785;border-radius:6px;background:#fff;color:#1d2733;cursor:pointer}\
        button.primary{background:#f5b400;border-color:#9c7000;font-weight:700}\
        details{margin:0}summary{cursor:pointer;padding:8px 16px;border:1px solid #b03021;color:#a82c1e;border-radius:6px;list-style:none;line-height:1.4}\
        details[open] textarea{display:block;width:320px;height:60px;margin:6px 0}\
        .error{background:#fdecea;color:#8a1c12;border:1px solid #f5c2bd;margin:12px auto;max-width:612px;padding:8px 12px;border-radius:6px}\
        .hidden{display:none}dialog{border:none;border-radius:10px;box-shadow:0 8px 30px rgba(0,0,0,.35);max-width:96vw}\
        #pad-canvas{display:block;border:1px solid #6b7785;background:#fff;touch-action:none;max-width:100%;cursor:crosshair}\
        .pad-typed{display:flex;gap:8px;align-items:center;margin:10px 0}.pad-typed input{flex:1;font:inherit;padding:6px 8px;border:1px solid #6b7785;border-radius:4px}\
        .pad-buttons{display:flex;gap:8px;justify-content:flex-end}.pad-info{font-size:12px;color:#3d4754;min-height:1em}
        """

    /// The page's script: the signature pad on pointer events or a typed name, previews drawn
    /// without stretching, checks before posting, and errors cleared once fixed; a page image
    /// that fails to load shows the page's note and text layer instead.
    static let script = """
        (function(){'use strict';
        var data=JSON.parse(document.getElementById('sf-data').textContent);
        var text=JSON.parse(document.getElementById('sf-text').textContent);
        var form=document.getElementById('signing-form'),pad=document.getElementById('pad'),canvas=document.getElementById('pad-canvas');
        var info=document.getElementById('pad-info'),errorBox=document.getElementById('error'),typed=document.getElementById('pad-typed');
        var points=[],stroke=-1,drawing=false,pointerType='mouse',current=null,opener=null;
        var errorKind=errorBox.classList.contains('hidden')?null:'server';
        function showError(kind,m){errorKind=kind;errorBox.textContent=m;errorBox.classList.remove('hidden');errorBox.scrollIntoView({block:'center'});}
        function hideError(){errorKind=null;errorBox.textContent='';errorBox.classList.add('hidden');}
        function missingSignature(){for(var i=0;i<data.tabs.length;i++){var t=data.tabs[i];
        if((t.type==='signHere'||t.type==='initialHere')&&t.required&&!document.getElementById('sig-'+t.index).value)return t;}return null;}
        document.querySelectorAll('.page-image').forEach(function(img){function failed(){img.classList.add('hidden');
        img.parentNode.querySelector('.render-note').classList.remove('hidden');}
        img.addEventListener('error',failed);if(img.complete&&img.naturalWidth===0&&img.getAttribute('src'))failed();});
        function position(e){var r=canvas.getBoundingClientRect();return[(e.clientX-r.left)*canvas.width/r.width,(e.clientY-r.top)*canvas.height/r.height];}
        function add(e){var p=position(e);var pressure=e.pointerType==='mouse'?0.5:(e.pressure||0);
        points.push([Math.round(p[0]*100)/100,Math.round(p[1]*100)/100,Math.round(pressure*1000)/1000,Math.round(e.timeStamp*1000)/1000,stroke]);}
        function strokes(c,list){c.lineCap='round';c.lineJoin='round';c.strokeStyle='#0a2a8a';
        for(var i=1;i<list.length;i++){var a=list[i-1],b=list[i];if(a[4]!==b[4])continue;c.lineWidth=1+3*(a[2]+b[2]);c.beginPath();c.moveTo(a[0],a[1]);c.lineTo(b[0],b[1]);c.stroke();}}
        function redrawPad(){var c=canvas.getContext('2d');c.clearRect(0,0,canvas.width,canvas.height);strokes(c,points);}
        /* A preview gets its field's own pixel size and the pad's drawing scaled evenly into it: never stretched. */
        function fitted(target){target.classList.remove('hidden');var r=target.getBoundingClientRect(),d=window.devicePixelRatio||1;
        target.width=Math.max(1,Math.round(r.width*d));target.height=Math.max(1,Math.round(r.height*d));
        var c=target.getContext('2d'),s=Math.min(target.width/canvas.width,target.height/canvas.height);
        c.setTransform(1,0,0,1,0,0);c.clearRect(0,0,target.width,target.height);
        c.setTransform(s,0,0,s,(target.width-canvas.width*s)/2,(target.height-canvas.height*s)/2);return c;}
        function typedInk(c,name){var size=canvas.height*0.45;c.font='italic '+size+'px Georgia,serif';
        var w=c.measureText(name).width;if(w>canvas.width*0.92){size=size*canvas.width*0.92/w;c.font='italic '+size+'px Georgia,serif';}
        c.fillStyle='#0a2a8a';c.textAlign='center';c.textBaseline='middle';c.fillText(name,canvas.width/2,canvas.height/2);}
        canvas.addEventListener('pointerdown',function(e){e.preventDefault();canvas.setPointerCapture(e.pointerId);drawing=true;stroke+=1;pointerType=e.pointerType||'mouse';add(e);redrawPad();});
        canvas.addEventListener('pointermove',function(e){if(!drawing)return;var list=e.getCoalescedEvents?e.getCoalescedEvents():[];if(!list.length)list=[e];list.forEach(add);redrawPad();
        info.textContent=points.length+' points · '+pointerType+(pointerType==='pen'?' · pressure '+(e.pressure||0).toFixed(2):'');});
        function end(){drawing=false;}canvas.addEventListener('pointerup',end);canvas.addEventListener('pointercancel',end);
        function reset(){points=[];stroke=-1;redrawPad();info.textContent='';}
        document.querySelectorAll('.sign-tab').forEach(function(button){button.addEventListener('click',function(){
        current=button.getAttribute('data-index');opener=button;reset();typed.value='';pad.showModal();});});
        pad.addEventListener('close',function(){if(opener)opener.focus();});
        document.getElementById('pad-clear').addEventListener('click',function(){reset();typed.value='';});
        document.getElementById('pad-cancel').addEventListener('click',function(){pad.close();});
        document.getElementById('pad-adopt').addEventListener('click',function(){var name=typed.value.trim(),value,ink;
        if(points.length>=2){value={pointerType:pointerType,width:canvas.width,height:canvas.height,points:points.slice()};
        ink=function(c){strokes(c,value.points);};}
        else if(name){value={typed:name};ink=function(c){typedInk(c,name);};}
        else{info.textContent=text.drawFirst;typed.focus();return;}
        document.getElementById('sig-'+current).value=JSON.stringify(value);
        opener.parentNode.classList.add('signed');opener.setAttribute('aria-label',text.signedAgain);
        var preview=document.getElementById('preview-'+current);ink(fitted(preview));pad.close();
        if((errorKind==='sign'||errorKind==='server')&&!missingSignature())hideError();});
        document.getElementById('decline-reason').addEventListener('input',function(e){if(errorKind==='reason'&&e.target.value.trim())hideError();});
        form.addEventListener('submit',function(e){var action=e.submitter?e.submitter.value:'finish';
        if(action==='finish'){var t=missingSignature();if(t){e.preventDefault();showError('sign',text.signFirst);document.getElementById('sign-'+t.index).focus();return;}}
        if(action==='decline'&&!document.getElementById('decline-reason').value.trim()){e.preventDefault();showError('reason',text.reasonFirst);}});
        })();
        """
}

/// The page's words in a few languages (by the locale's language; English otherwise).
struct SigningPageStrings {
    var title = "Review and sign"
    var signingAs = "Signing as"
    var page = "page"
    var openPDF = "Open the PDF"
    var signHere = "Sign here"
    var initialHere = "Initial here"
    var dateSigned = "(date of signing)"
    var finish = "Finish"
    var finishLater = "Finish Later"
    var decline = "Decline"
    var reason = "Why do you decline?"
    var confirmDecline = "Decline to sign"
    var drawHere = "Draw your signature with a mouse, pen or finger."
    var clear = "Clear"
    var cancel = "Cancel"
    var adopt = "Adopt and sign"
    var signFirst = "Sign every signature field before finishing."
    var reasonFirst = "Give a reason for declining."
    var drawFirst = "Draw or type your signature first."
    var notDrawn = "This page could not be drawn here; open the PDF to read it."
    var checkbox = "Checkbox"
    var option = "Option"
    var textField = "Text"
    var company = "Company"
    var jobTitle = "Title"
    var adoptTitle = "Adopt your signature"
    var padName = "Signature pad"
    var typeInstead = "Or type your name:"
    var signedAgain = "Signed; press to sign again"

    init(locale: String?) {
        switch locale?.split(separator: "-").first?.lowercased() {
        case "de":
            title = "Prüfen und unterschreiben"; signingAs = "Unterschrift von"; page = "Seite"; openPDF = "PDF öffnen"
            signHere = "Hier unterschreiben"; initialHere = "Hier paraphieren"; dateSigned = "(Datum der Unterschrift)"
            finish = "Fertigstellen"; finishLater = "Später fertigstellen"; decline = "Ablehnen"; reason = "Warum lehnen Sie ab?"
            confirmDecline = "Unterschrift ablehnen"; drawHere = "Unterschreiben Sie mit Maus, Stift oder Finger."
            clear = "Löschen"; cancel = "Abbrechen"; adopt = "Übernehmen"; signFirst = "Bitte alle Unterschriftsfelder ausfüllen."
            reasonFirst = "Bitte einen Grund angeben."; drawFirst = "Bitte zuerst zeichnen oder Namen eingeben."
            notDrawn = "Diese Seite kann hier nicht angezeigt werden; öffnen Sie das PDF."; checkbox = "Kontrollkästchen"
            option = "Option"; textField = "Text"; company = "Firma"; jobTitle = "Titel"; adoptTitle = "Unterschrift übernehmen"
            padName = "Unterschriftenfeld"; typeInstead = "Oder Namen eingeben:"; signedAgain = "Unterschrieben; erneut unterschreiben"
        case "fr":
            title = "Vérifier et signer"; signingAs = "Signataire"; page = "page"; openPDF = "Ouvrir le PDF"
            signHere = "Signer ici"; initialHere = "Parapher ici"; dateSigned = "(date de signature)"; finish = "Terminer"
            finishLater = "Terminer plus tard"; decline = "Refuser"; reason = "Pourquoi refusez-vous ?"; confirmDecline = "Refuser de signer"
            drawHere = "Signez avec la souris, un stylet ou le doigt."; clear = "Effacer"; cancel = "Annuler"; adopt = "Adopter et signer"
            signFirst = "Signez chaque champ de signature."; reasonFirst = "Indiquez un motif de refus."
            drawFirst = "Dessinez ou tapez d’abord votre signature."; notDrawn = "Cette page ne peut pas être affichée ici ; ouvrez le PDF."
            checkbox = "Case à cocher"; option = "Option"; textField = "Texte"; company = "Société"; jobTitle = "Fonction"
            adoptTitle = "Adopter votre signature"; padName = "Zone de signature"; typeInstead = "Ou tapez votre nom :"
            signedAgain = "Signé ; appuyer pour signer à nouveau"
        case "es":
            title = "Revisar y firmar"; signingAs = "Firmante"; page = "página"; openPDF = "Abrir el PDF"; signHere = "Firme aquí"
            initialHere = "Iniciales aquí"; dateSigned = "(fecha de firma)"; finish = "Finalizar"; finishLater = "Finalizar más tarde"
            decline = "Rechazar"; reason = "¿Por qué rechaza?"; confirmDecline = "Rechazar la firma"
            drawHere = "Firme con el ratón, un lápiz o el dedo."; clear = "Borrar"; cancel = "Cancelar"; adopt = "Adoptar y firmar"
            signFirst = "Firme todos los campos de firma."; reasonFirst = "Indique un motivo."
            drawFirst = "Dibuje o escriba primero su firma."; notDrawn = "Esta página no se puede mostrar aquí; abra el PDF."
            checkbox = "Casilla"; option = "Opción"; textField = "Texto"; company = "Empresa"; jobTitle = "Cargo"
            adoptTitle = "Adoptar su firma"; padName = "Área de firma"; typeInstead = "O escriba su nombre:"
            signedAgain = "Firmado; pulse para firmar de nuevo"
        default:
            break
        }
    }
}
