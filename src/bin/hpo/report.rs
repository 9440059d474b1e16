//! `hpo report`: one self-contained HTML page (summary, best trial, every
//! plot inline as SVG, the trials table) to send to a colleague.
//!
//! Study data is untrusted: every name, parameter, value and attribute goes
//! through [`escape`]; plot text is escaped by plotters' SVG backend. The
//! page carries a Content-Security-Policy that forbids scripts altogether,
//! so even a missed escape could not run code.

use crate::error::{CliError, Result};
use crate::open::StudyData;
use crate::plot::{self, Kind};
use crate::show;
use crate::study::{self, num, STATES};
use std::fmt::Write as _;

/// HTML-escapes text for element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1200px;color:#222}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}\
th{background:#f3f3f3}figure{margin:1.5em 0}figcaption{color:#555;font-size:13px}\
.note{color:#777;font-style:italic}svg{max-width:100%;height:auto}code{background:#f3f3f3}";

/// The report page for one study.
pub fn render(data: &StudyData) -> Result<String> {
    let mut h = String::new();
    let title = format!("hpo study report: {}", data.name);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(&title)
    );
    let _ = writeln!(h, "<h1>{}</h1>", escape(&title));

    // Summary.
    let dirs: Vec<String> = data
        .directions
        .iter()
        .map(|d| format!("{d:?}").to_lowercase())
        .collect();
    let _ = writeln!(h, "<h2>Summary</h2><table>");
    let _ = writeln!(
        h,
        "<tr><th>directions</th><td>{}</td></tr><tr><th>trials</th><td>{}</td></tr>",
        escape(&dirs.join(", ")),
        data.trials.len()
    );
    for st in STATES {
        let _ = writeln!(
            h,
            "<tr><th>{}</th><td>{}</td></tr>",
            st.as_str().to_lowercase(),
            show::count(data, st)
        );
    }
    for (k, v) in &data.user_attrs {
        let _ = writeln!(
            h,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(k),
            escape(&v.to_string())
        );
    }
    let _ = writeln!(h, "</table>");

    // Best.
    let _ = writeln!(h, "<h2>Best</h2>");
    // Each best trial's value and parameters as a table of name and value,
    // 4 significant digits shown, every digit in the cell's title.
    let front = study::best_trials(data);
    if front.is_empty() {
        let _ = writeln!(h, "<p class=\"note\">no complete trial yet</p>");
    }
    for t in &front {
        let _ = writeln!(
            h,
            "<table class=\"best\"><tr><th>trial</th><td>{}</td></tr>\
             <tr><th>value</th><td title=\"{}\">{}</td></tr>",
            t.number,
            escape(&study::values_text(t, num)),
            escape(&study::values_text(t, study::short))
        );
        for (name, v) in t.params() {
            let _ = writeln!(
                h,
                "<tr><th>{}</th><td title=\"{}\">{}</td></tr>",
                escape(&name),
                escape(&study::param_cell(&v)),
                escape(&study::param_short(&v))
            );
        }
        let _ = writeln!(h, "</table>");
    }

    // Plots.
    let _ = writeln!(h, "<h2>Plots</h2>");
    for kind in Kind::ALL {
        let _ = writeln!(h, "<figure id=\"{}\">", kind.name());
        match plot::draw(data, kind) {
            Ok(svg) => h.push_str(strip_xml_decl(&svg)),
            Err(CliError::Plot { reason, .. }) => {
                let _ = write!(h, "<p class=\"note\">{}</p>", escape(&reason));
            }
            Err(e) => return Err(e),
        }
        let _ = writeln!(h, "<figcaption>{}</figcaption></figure>", kind.name());
    }

    // Trials.
    let _ = writeln!(h, "<h2>Trials</h2><table>");
    let names = study::param_names(data);
    let _ = write!(
        h,
        "<tr><th>#</th><th>state</th><th>value</th><th>duration (s)</th>"
    );
    for n in &names {
        let _ = write!(h, "<th>{}</th>", escape(n));
    }
    let _ = writeln!(h, "<th>failure</th></tr>");
    for t in &data.trials {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            t.number,
            t.state.as_str(),
            escape(&study::values_text(t, study::short)),
            t.duration()
                .map(|d| format!("{:.3}", d.as_secs_f64()))
                .unwrap_or_default()
        );
        for n in &names {
            let _ = write!(
                h,
                "<td>{}</td>",
                escape(
                    &t.param(n)
                        .map(|v| study::param_short(&v))
                        .unwrap_or_default()
                )
            );
        }
        let _ = writeln!(
            h,
            "<td>{}</td></tr>",
            escape(&study::failure(t).unwrap_or_default())
        );
    }
    let _ = writeln!(h, "</table>\n</body></html>");
    Ok(h)
}

/// Inline SVG in HTML takes no XML declaration.
fn strip_xml_decl(svg: &str) -> &str {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest
            .find("?>")
            .map(|i| rest[i + 2..].trim_start())
            .unwrap_or(svg),
        None => svg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralises_markup() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn xml_declaration_is_dropped() {
        assert_eq!(strip_xml_decl("<?xml version=\"1.0\"?>\n<svg/>"), "<svg/>");
        assert_eq!(strip_xml_decl("<svg/>"), "<svg/>");
    }
}
