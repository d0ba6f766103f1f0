import Envelopes
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
    /// Page size used to lay pages out (US Letter in PDF points; 1 pt is drawn as 1 CSS px).
    static let pageSize = (width: 612.0, height: 792.0)

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
        guard let host = components.host, !host.isEmpty,
            host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-".contains($0)) })
        else { return nil }
        return "\(scheme)://\(host)\(components.port.map { ":\($0)" } ?? "")"
    }

    /// What a headless client needs from the page (also what the page's script reads).
    struct PageData: Encodable {
        struct TabInfo: Encodable {
            var index: Int
            var type: String
            var required: Bool
            var locked: Bool
            var value: String?
            var group: String?
            var selected: Bool
        }
        var envelopeID: String
        var transactionID: String
        var recipientID: String
        var recipientName: String
        var canvas: [String: Int]
        var tabs: [TabInfo]
    }

    /// The page's HTML.
    static func render(_ model: SigningPageModel, nonce: String) -> String {
        let text = SigningPageStrings(locale: model.locale)
        let e = escape
        var css = baseCSS
        var body = ""
        for (documentIndex, document) in model.documents.enumerated() {
            body += "<section class=\"document\"><h2>\(e(document.name))</h2>"
            body += "<p class=\"doc-link\"><a href=\"/signing/\(model.token)/documents/\(e(document.id))\">\(e(text.openPDF))</a></p>"
            for page in 1...max(document.pageCount, 1) {
                body += "<div class=\"page\" data-page=\"\(page)\"><span class=\"page-label\">\(e(document.name)) · \(e(text.page)) \(page)/\(document.pageCount)</span>"
                let runs = page <= document.text.count ? document.text[page - 1] : []
                for (runIndex, run) in runs.enumerated() {
                    let name = "x-\(documentIndex)-\(page)-\(runIndex)"
                    css += ".\(name){left:\(cssPixels(run.x));top:\(cssPixels(run.top));font-size:\(cssPixels(run.size))}"
                    body += "<span class=\"pdf-text \(name)\">\(e(run.text))</span>"
                }
                for item in model.tabs where item.tab.documentId == document.id && item.tab.pageNumber == page {
                    css += tabCSS(item)
                    body += tabHTML(item, model: model, text: text)
                }
                body += "</div>"
            }
            body += "</section>"
        }
        let data = PageData(
            envelopeID: model.envelopeID, transactionID: model.transactionID, recipientID: model.recipientID,
            recipientName: model.recipientName, canvas: ["width": padSize.width, "height": padSize.height],
            tabs: model.tabs.map {
                PageData.TabInfo(
                    index: $0.index, type: $0.tab.type.rawValue, required: !$0.tab.optional && !$0.tab.locked, locked: $0.tab.locked,
                    value: $0.tab.value, group: $0.tab.groupName, selected: $0.tab.selected)
            })
        let signer = model.recipientEmail.map { "\(e(model.recipientName)) &lt;\(e($0))&gt;" } ?? e(model.recipientName)
        let error = model.error.map { "<p class=\"error\" id=\"error\" role=\"alert\">\(e($0))</p>" }
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
            <dialog id="pad">
            <p>\(e(text.drawHere))</p>
            <canvas id="pad-canvas" width="\(padSize.width)" height="\(padSize.height)"></canvas>
            <p class="pad-info" id="pad-info"></p>
            <div class="pad-buttons">
            <button type="button" id="pad-clear">\(e(text.clear))</button>
            <button type="button" id="pad-cancel">\(e(text.cancel))</button>
            <button type="button" id="pad-adopt" class="primary">\(e(text.adopt))</button>
            </div>
            </dialog>
            <script type="application/json" id="sf-data">\(scriptJSON(data))</script>
            <script type="application/json" id="sf-text">\(scriptJSON(["signFirst": text.signFirst, "reasonFirst": text.reasonFirst, "drawFirst": text.drawFirst]))</script>
            <script nonce="\(nonce)">\(script)</script>
            </body>
            </html>
            """
    }

    static func tabCSS(_ item: PageTab) -> String {
        let frame = item.tab.frame
        return ".t-\(item.index){left:\(cssPixels(frame.x));top:\(cssPixels(frame.y));width:\(cssPixels(frame.width));height:\(cssPixels(frame.height))}"
    }

    /// A length for generated CSS: clamped, one decimal, never NaN.
    static func cssPixels(_ value: Double) -> String {
        String(format: "%.1fpx", value.isFinite ? min(max(value, 0), 10_000) : 0)
    }

    static func tabHTML(_ item: PageTab, model: SigningPageModel, text: SigningPageStrings) -> String {
        let e = escape
        let tab = item.tab
        let index = item.index
        let label = e(tab.name ?? tab.label ?? "")
        let required = !tab.optional && !tab.locked
        // The tab's name as a tooltip; `label` is escaped.
        let classes = "tab t-\(index) tab-\(tab.type.rawValue)"
        let open = "<div class=\"\(classes)\" title=\"\(label)\">"
        switch tab.type {
        case .signHere, .initialHere:
            let caption = tab.type == .signHere ? text.signHere : text.initialHere
            return """
                \(open)<button type="button" class="sign-tab" id="sign-\(index)" data-index="\(index)" \
                data-required="\(required)" aria-label="\(e(caption))">\(e(caption))</button>\
                <canvas class="sig-preview hidden" id="preview-\(index)" width="\(padSize.width)" height="\(padSize.height)"></canvas>\
                <input type="hidden" name="sig-\(index)" id="sig-\(index)" value=""></div>
                """
        case .checkbox:
            return "\(open)<input type=\"checkbox\" name=\"tab-\(index)\" id=\"tab-\(index)\" value=\"on\"\(tab.selected ? " checked" : "")\(tab.locked ? " disabled" : "") aria-label=\"\(label)\"></div>"
        case .radio:
            let group = e(tab.groupName ?? "\(index)")
            return "\(open)<input type=\"radio\" name=\"radio-\(group)\" id=\"tab-\(index)\" value=\"\(index)\"\(tab.selected ? " checked" : "")\(tab.locked ? " disabled" : "") aria-label=\"\(label)\"></div>"
        case .fullName:
            return "\(open)<span class=\"filled\" id=\"tab-\(index)\">\(e(model.recipientName))</span></div>"
        case .dateSigned:
            return "\(open)<span class=\"filled\" id=\"tab-\(index)\">\(e(text.dateSigned))</span></div>"
        case .formula:
            return "\(open)<span class=\"filled\" id=\"tab-\(index)\">\(e(tab.value ?? ""))</span></div>"
        case .text, .company, .title:
            let placeholder = e(tab.name ?? tab.label ?? tab.type.rawValue)
            return "\(open)<input type=\"text\" name=\"tab-\(index)\" id=\"tab-\(index)\" maxlength=\"10000\" value=\"\(e(tab.value ?? ""))\" placeholder=\"\(placeholder)\"\(required ? " required" : "")\(tab.locked ? " readonly" : "") aria-label=\"\(label.isEmpty ? placeholder : label)\"></div>"
        }
    }

    static let baseCSS = """
        *{box-sizing:border-box}body{margin:0;font:15px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#e9edf2;color:#1d2733}\
        header{background:#1d3557;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:22px}header p{margin:2px 0}\
        .subject{font-weight:600}.message{opacity:.85}.signer{margin-top:8px;font-size:14px}\
        main{padding:8px 12px 120px}.document h2{text-align:center;font-size:17px;margin:18px 0 0}.doc-link{text-align:center;margin:4px}\
        .page{position:relative;width:612px;height:792px;margin:14px auto;background:#fff;box-shadow:0 2px 8px rgba(0,0,0,.18);\
        }\
        .page-label{position:absolute;top:10px;left:16px;font-size:12px;color:#6b7785}\
        .pdf-text{position:absolute;white-space:pre;font-family:Helvetica,Arial,sans-serif;color:#222;line-height:1}\
        .tab{position:absolute;display:flex;align-items:center;justify-content:center}\
        .sign-tab{width:100%;height:100%;border:2px dashed #e09f1f;background:#fff6df;color:#7a4f00;font-weight:700;cursor:pointer;border-radius:4px}\
        .tab.signed .sign-tab{display:none}.sig-preview{width:100%;height:100%;border-bottom:1px solid #1d3557}\
        .tab input[type=text]{width:100%;height:100%;border:1px solid #7aa7d9;background:#eef5ff;padding:2px 6px;font:inherit}\
        .tab input[type=checkbox],.tab input[type=radio]{width:80%;height:80%}\
        .filled{font-size:14px;border-bottom:1px solid #9aa5b1;width:100%}\
        footer{position:fixed;bottom:0;left:0;right:0;background:#fff;border-top:1px solid #c9d1db;padding:10px 16px;display:flex;gap:10px;align-items:flex-start;flex-wrap:wrap}\
        button{font:inherit;padding:8px 16px;border:1px solid #9aa5b1;border-radius:6px;background:#fff;cursor:pointer}\
        button.primary{background:#f5b400;border-color:#d99e00;font-weight:700}\
        details{margin:0}summary{cursor:pointer;padding:8px 16px;border:1px solid #c0392b;color:#c0392b;border-radius:6px;list-style:none;line-height:1.4}\
        details[open] textarea{display:block;width:320px;height:60px;margin:6px 0}\
        .error{background:#fdecea;color:#8a1c12;border:1px solid #f5c2bd;margin:12px auto;max-width:612px;padding:8px 12px;border-radius:6px}\
        .hidden{display:none}dialog{border:none;border-radius:10px;box-shadow:0 8px 30px rgba(0,0,0,.35);max-width:96vw}\
        #pad-canvas{display:block;border:1px solid #9aa5b1;background:#fff;touch-action:none;max-width:100%;cursor:crosshair}\
        .pad-buttons{display:flex;gap:8px;justify-content:flex-end}.pad-info{font-size:12px;color:#6b7785;min-height:1em}
        """

    /// The page's script: the signature pad on pointer events, and checks before posting.
    static let script = """
        (function(){'use strict';
        var data=JSON.parse(document.getElementById('sf-data').textContent);
        var text=JSON.parse(document.getElementById('sf-text').textContent);
        var form=document.getElementById('signing-form'),pad=document.getElementById('pad'),canvas=document.getElementById('pad-canvas');
        var ctx=canvas.getContext('2d'),info=document.getElementById('pad-info'),errorBox=document.getElementById('error');
        var points=[],stroke=-1,drawing=false,pointerType='mouse',current=null;
        function showError(m){errorBox.textContent=m;errorBox.classList.remove('hidden');errorBox.scrollIntoView({block:'center'});}
        function position(e){var r=canvas.getBoundingClientRect();return[(e.clientX-r.left)*canvas.width/r.width,(e.clientY-r.top)*canvas.height/r.height];}
        function add(e){var p=position(e);var pressure=e.pointerType==='mouse'?0.5:(e.pressure||0);
        points.push([Math.round(p[0]*100)/100,Math.round(p[1]*100)/100,Math.round(pressure*1000)/1000,Math.round(e.timeStamp*1000)/1000,stroke]);}
        function draw(target,list){var c=target.getContext('2d');c.clearRect(0,0,target.width,target.height);c.lineCap='round';c.lineJoin='round';c.strokeStyle='#0a2a8a';
        for(var i=1;i<list.length;i++){var a=list[i-1],b=list[i];if(a[4]!==b[4])continue;c.lineWidth=1+3*(a[2]+b[2]);c.beginPath();c.moveTo(a[0],a[1]);c.lineTo(b[0],b[1]);c.stroke();}}
        canvas.addEventListener('pointerdown',function(e){e.preventDefault();canvas.setPointerCapture(e.pointerId);drawing=true;stroke+=1;pointerType=e.pointerType||'mouse';add(e);draw(canvas,points);});
        canvas.addEventListener('pointermove',function(e){if(!drawing)return;var list=e.getCoalescedEvents?e.getCoalescedEvents():[];if(!list.length)list=[e];list.forEach(add);draw(canvas,points);
        info.textContent=points.length+' points · '+pointerType+(pointerType==='pen'?' · pressure '+(e.pressure||0).toFixed(2):'');});
        function end(){drawing=false;}canvas.addEventListener('pointerup',end);canvas.addEventListener('pointercancel',end);
        document.querySelectorAll('.sign-tab,.sig-preview').forEach(function(el){el.addEventListener('click',function(){
        current=el.id.replace(/^(sign|preview)-/,'');points=[];stroke=-1;draw(canvas,points);info.textContent='';pad.showModal();});});
        document.getElementById('pad-clear').addEventListener('click',function(){points=[];stroke=-1;draw(canvas,points);info.textContent='';});
        document.getElementById('pad-cancel').addEventListener('click',function(){pad.close();});
        document.getElementById('pad-adopt').addEventListener('click',function(){if(points.length<2){info.textContent=text.drawFirst;return;}
        document.getElementById('sig-'+current).value=JSON.stringify({pointerType:pointerType,width:canvas.width,height:canvas.height,points:points});
        var preview=document.getElementById('preview-'+current);draw(preview,points);preview.classList.remove('hidden');
        preview.parentNode.classList.add('signed');pad.close();});
        form.addEventListener('submit',function(e){var action=e.submitter?e.submitter.value:'finish';
        if(action==='finish'){for(var i=0;i<data.tabs.length;i++){var t=data.tabs[i];if((t.type==='signHere'||t.type==='initialHere')&&t.required&&!document.getElementById('sig-'+t.index).value){
        e.preventDefault();showError(text.signFirst);document.getElementById('sign-'+t.index).focus();return;}}}
        if(action==='decline'&&!document.getElementById('decline-reason').value.trim()){e.preventDefault();showError(text.reasonFirst);}});
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
    var drawFirst = "Draw your signature first."

    init(locale: String?) {
        switch locale?.split(separator: "-").first?.lowercased() {
        case "de":
            title = "Prüfen und unterschreiben"; signingAs = "Unterschrift von"; page = "Seite"; openPDF = "PDF öffnen"
            signHere = "Hier unterschreiben"; initialHere = "Hier paraphieren"; dateSigned = "(Datum der Unterschrift)"
            finish = "Fertigstellen"; finishLater = "Später fertigstellen"; decline = "Ablehnen"; reason = "Warum lehnen Sie ab?"
            confirmDecline = "Unterschrift ablehnen"; drawHere = "Unterschreiben Sie mit Maus, Stift oder Finger."
            clear = "Löschen"; cancel = "Abbrechen"; adopt = "Übernehmen"; signFirst = "Bitte alle Unterschriftsfelder ausfüllen."
            reasonFirst = "Bitte einen Grund angeben."; drawFirst = "Bitte zuerst unterschreiben."
        case "fr":
            title = "Vérifier et signer"; signingAs = "Signataire"; page = "page"; openPDF = "Ouvrir le PDF"
            signHere = "Signer ici"; initialHere = "Parapher ici"; dateSigned = "(date de signature)"; finish = "Terminer"
            finishLater = "Terminer plus tard"; decline = "Refuser"; reason = "Pourquoi refusez-vous ?"; confirmDecline = "Refuser de signer"
            drawHere = "Signez avec la souris, un stylet ou le doigt."; clear = "Effacer"; cancel = "Annuler"; adopt = "Adopter et signer"
            signFirst = "Signez chaque champ de signature."; reasonFirst = "Indiquez un motif de refus."; drawFirst = "Signez d’abord."
        case "es":
            title = "Revisar y firmar"; signingAs = "Firmante"; page = "página"; openPDF = "Abrir el PDF"; signHere = "Firme aquí"
            initialHere = "Iniciales aquí"; dateSigned = "(fecha de firma)"; finish = "Finalizar"; finishLater = "Finalizar más tarde"
            decline = "Rechazar"; reason = "¿Por qué rechaza?"; confirmDecline = "Rechazar la firma"
            drawHere = "Firme con el ratón, un lápiz o el dedo."; clear = "Borrar"; cancel = "Cancelar"; adopt = "Adoptar y firmar"
            signFirst = "Firme todos los campos de firma."; reasonFirst = "Indique un motivo."; drawFirst = "Firme primero."
        default:
            break
        }
    }
}
