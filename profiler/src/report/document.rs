//! A report as a value: parts (a scenario each), sections (a titled table and the notes under
//! it). Built once from the measurements and rendered as the terminal's text, as Markdown, as
//! HTML, and serialized into the JSON export, so every format has every section.

use std::fmt::Write as _;

use serde::Serialize;

use super::table::{Table, escape_html};

/// A whole report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Document {
    /// In order.
    pub parts: Vec<Part>,
}

/// One part: a scenario of `profiler run`, or everything `attach` measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Part {
    /// "10000 requests, serial short-connection echo (concurrency 1, 3 runs)".
    pub heading: String,
    /// Lines under the heading (a variant that failed).
    pub notes: Vec<String>,
    /// Its sections, in order.
    pub sections: Vec<Section>,
}

/// One section: a title, a table (when there is one) and the lines under it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Section {
    /// "Side by side", "Server CPU (...)".
    pub title: String,
    /// The table, if any.
    pub table: Option<Table>,
    /// Lines under the table: events per call, drops, warnings, how a figure was computed.
    pub notes: Vec<String>,
    /// The terminal's form of the table, where a table of it would be too wide to read (stacks
    /// a frame per line); the other formats show the table.
    #[serde(skip)]
    pub text: Option<String>,
}

impl Section {
    /// A section with a table and no notes yet.
    #[must_use]
    pub fn new(title: impl Into<String>, table: Table) -> Self {
        Self {
            title: title.into(),
            table: Some(table),
            notes: Vec::new(),
            text: None,
        }
    }

    /// The terminal's form: a blank line, "title:", the table, the notes.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = format!("\n{}:\n", self.title);
        if let Some(text) = &self.text {
            out.push_str(text);
        } else if let Some(t) = &self.table {
            out.push_str(&t.render());
        }
        for n in &self.notes {
            let _ = writeln!(out, "{n}");
        }
        out
    }
}

impl Document {
    /// Every section's title, in order (what a reader of any format will find).
    #[must_use]
    pub fn section_titles(&self) -> Vec<&str> {
        self.parts
            .iter()
            .flat_map(|p| &p.sections)
            .map(|s| s.title.as_str())
            .collect()
    }

    /// The terminal's text.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if !part.heading.is_empty() {
                let _ = writeln!(out, "\n== {} ==", part.heading);
            }
            for n in &part.notes {
                let _ = writeln!(out, "!! {n}");
            }
            for s in &part.sections {
                out.push_str(&s.to_text());
            }
        }
        out
    }

    /// Markdown, parts as `##` and sections as `###` headings.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if !part.heading.is_empty() {
                let _ = writeln!(out, "## {}\n", part.heading);
            }
            for n in &part.notes {
                let _ = writeln!(out, "> **{}**\n", n.replace('\n', " "));
            }
            for s in &part.sections {
                let _ = writeln!(out, "### {}\n", s.title);
                if let Some(t) = &s.table {
                    out.push_str(&t.to_markdown());
                    out.push('\n');
                }
                for n in &s.notes {
                    let _ = writeln!(out, "{}\n", n.replace('\n', " "));
                }
            }
        }
        out
    }

    /// HTML, parts as `<h2>` and sections as `<h3>`.
    #[must_use]
    pub fn to_html(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if !part.heading.is_empty() {
                let _ = writeln!(out, "<h2>{}</h2>", escape_html(&part.heading));
            }
            for n in &part.notes {
                let _ = writeln!(out, "<p class=\"partial\">{}</p>", escape_html(n));
            }
            for s in &part.sections {
                let _ = writeln!(out, "<h3>{}</h3>", escape_html(&s.title));
                if let Some(t) = &s.table {
                    out.push_str(&t.to_html());
                }
                for n in &s.notes {
                    let _ = writeln!(out, "<p class=\"note\">{}</p>", escape_html(n));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document() -> Document {
        let mut t = Table::new(["variant", "QPS"]);
        t.row(["lt", "100"]);
        t.row(["a|b", "<5>"]);
        let mut s = Section::new("Side by side", t);
        s.notes.push("dropped: 0".into());
        Document {
            parts: vec![Part {
                heading: "serial".into(),
                notes: vec!["et: failed".into()],
                sections: vec![s],
            }],
        }
    }

    #[test]
    fn every_format_has_every_heading_table_and_note() {
        let d = document();
        let text = d.to_text();
        assert!(text.contains(
            "== serial ==\n!! et: failed\n\nSide by side:\nvariant  QPS\nlt       100\n"
        ));
        assert!(text.ends_with("dropped: 0\n"));
        let md = d.to_markdown();
        assert!(md.contains("## serial") && md.contains("### Side by side"));
        assert!(md.contains("| a\\|b | <5> |") && md.contains("dropped: 0"));
        let html = d.to_html();
        assert!(html.contains("<h3>Side by side</h3>") && html.contains("<td>&lt;5&gt;</td>"));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json["parts"][0]["sections"][0]["table"]["columns"][1],
            "QPS"
        );
        assert_eq!(
            json["parts"][0]["sections"][0]["table"]["rows"][0][1],
            "100"
        );
        assert_eq!(d.section_titles(), ["Side by side"]);
    }
}
