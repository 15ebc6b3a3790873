//! A minimal JSON writer, enough for profgen's reports (`--report`, `profgen-ab --json`); no
//! dependency for it.

use std::fmt::Write;

/// A JSON value. Object keys are static: reports have fixed schemas.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// An exact integer (counts go past the 2^53 a double holds exactly).
    Int(u64),
    /// A number; NaN and infinities are written as `null`.
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    /// Appends the value to `s` on one line.
    pub fn write(&self, s: &mut String) {
        self.write_indented(s, None);
    }

    /// The value with two-space indentation, one member or element per line, and a final
    /// newline.
    pub fn pretty(&self) -> String {
        let mut s = String::new();
        self.write_indented(&mut s, Some(0));
        s.push('\n');
        s
    }

    fn write_indented(&self, s: &mut String, indent: Option<usize>) {
        // Before each member or element: a newline and the indentation, when pretty.
        let open = |s: &mut String, depth: Option<usize>| {
            if let Some(d) = depth {
                s.push('\n');
                s.extend(std::iter::repeat_n("  ", d));
            }
        };
        let inner = indent.map(|d| d + 1);
        match self {
            Json::Null => s.push_str("null"),
            Json::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
            Json::Int(n) => {
                let _ = write!(s, "{n}");
            }
            Json::Num(x) if x.is_finite() => {
                let _ = write!(s, "{x}");
            }
            Json::Num(_) => s.push_str("null"),
            Json::Str(t) => write_string(s, t),
            Json::Arr(v) => {
                s.push('[');
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    open(s, inner);
                    x.write_indented(s, inner);
                }
                if !v.is_empty() {
                    open(s, indent);
                }
                s.push(']');
            }
            Json::Obj(v) => {
                s.push('{');
                for (i, (k, x)) in v.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    open(s, inner);
                    write_string(s, k);
                    s.push(':');
                    if indent.is_some() {
                        s.push(' ');
                    }
                    x.write_indented(s, inner);
                }
                if !v.is_empty() {
                    open(s, indent);
                }
                s.push('}');
            }
        }
    }
}

fn write_string(s: &mut String, t: &str) {
    s.push('"');
    for ch in t.chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_and_pretty_forms() {
        let v = Json::Obj(vec![
            ("a", Json::Arr(vec![Json::Int(u64::MAX), Json::Num(0.5), Json::Num(f64::NAN)])),
            ("b", Json::Str("q\"\\\n\u{1}é".into())),
            ("c", Json::Obj(vec![])),
            ("d", Json::Arr(vec![])),
            ("e", Json::Bool(false)),
            ("f", Json::Null),
        ]);
        let mut compact = String::new();
        v.write(&mut compact);
        assert_eq!(
            compact,
            r#"{"a":[18446744073709551615,0.5,null],"b":"q\"\\\n\u0001é","c":{},"d":[],"e":false,"f":null}"#
        );
        assert_eq!(
            v.pretty(),
            "{\n  \"a\": [\n    18446744073709551615,\n    0.5,\n    null\n  ],\n  \"b\": \"q\\\"\\\\\\n\\u0001é\",\n  \"c\": {},\n  \"d\": [],\n  \"e\": false,\n  \"f\": null\n}\n"
        );
    }
}
