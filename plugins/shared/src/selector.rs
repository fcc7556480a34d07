//! Label selectors in the string syntax of `kubectl get -l` (the
//! apimachinery `labels.Parse` grammar, without `>`/`<`):
//!
//! ```text
//! selector    := requirement ( "," requirement )*
//! requirement := key                          (exists)
//!              | "!" key                      (does not exist)
//!              | key ( "=" | "==" ) value     (equals; value may be empty)
//!              | key "!=" value               (not equals; true when the label is absent)
//!              | key "in" "(" values ")"
//!              | key "notin" "(" values ")"   (true when the label is absent)
//! values      := value ( "," value )*
//! ```
//!
//! Whitespace around tokens is ignored. Keys and values are validated as
//! Kubernetes label keys (`[prefix/]name`) and values.

use std::collections::BTreeMap;
use std::fmt;

/// Read access to a label (or annotation) set: a `BTreeMap` or the
/// contract's sorted `(key, value)` list.
pub trait LabelLookup {
    fn lookup(&self, key: &str) -> Option<&str>;
}

impl LabelLookup for BTreeMap<String, String> {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelLookup for [(String, String)] {
    fn lookup(&self, key: &str) -> Option<&str> {
        match self.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
            Ok(i) => Some(self[i].1.as_str()),
            // Hand-built lists may not be sorted: fall back to a scan.
            Err(_) => self.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()),
        }
    }
}

impl LabelLookup for Vec<(String, String)> {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.as_slice().lookup(key)
    }
}

impl<T: LabelLookup + ?Sized> LabelLookup for &T {
    fn lookup(&self, key: &str) -> Option<&str> {
        (**self).lookup(key)
    }
}

/// A requirement operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `k=v`, `k==v`, `k in (a,b)`.
    In,
    /// `k!=v`, `k notin (a,b)`: also true when the label is absent.
    NotIn,
    /// `k`.
    Exists,
    /// `!k`.
    DoesNotExist,
}

/// One `key op values` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    /// Empty for `Exists`/`DoesNotExist`, otherwise at least one value.
    pub values: Vec<String>,
}

impl Requirement {
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        let v = labels.lookup(&self.key);
        match self.op {
            Op::In => v.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Op::NotIn => v.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Op::Exists => v.is_some(),
            Op::DoesNotExist => v.is_none(),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.op, self.values.len()) {
            (Op::Exists, _) => write!(f, "{}", self.key),
            (Op::DoesNotExist, _) => write!(f, "!{}", self.key),
            (Op::In, 1) => write!(f, "{}={}", self.key, self.values[0]),
            (Op::NotIn, 1) => write!(f, "{}!={}", self.key, self.values[0]),
            (op, _) => {
                let op = if op == Op::In { "in" } else { "notin" };
                write!(f, "{} {op} ({})", self.key, self.values.join(","))
            }
        }
    }
}

/// A parsed selector: every requirement must hold. Never empty (the
/// parser rejects an empty selector, which would select every pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub requirements: Vec<Requirement>,
}

impl Selector {
    /// Parses the `kubectl -l` syntax. The error does not repeat the input.
    pub fn parse(text: &str) -> Result<Self, String> {
        Parser::new(text)?.selector()
    }

    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Comma,
    Open,
    Close,
    Eq,
    NotEq,
    Bang,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "{w:?}"),
            Tok::Comma => f.write_str("\",\""),
            Tok::Open => f.write_str("\"(\""),
            Tok::Close => f.write_str("\")\""),
            Tok::Eq => f.write_str("\"=\""),
            Tok::NotEq => f.write_str("\"!=\""),
            Tok::Bang => f.write_str("\"!\""),
        }
    }
}

fn is_special(c: char) -> bool {
    c.is_whitespace() || matches!(c, ',' | '(' | ')' | '=' | '!' | ':' | ';')
}

fn tokenize(text: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            ',' => {
                chars.next();
                out.push(Tok::Comma);
            }
            '(' => {
                chars.next();
                out.push(Tok::Open);
            }
            ')' => {
                chars.next();
                out.push(Tok::Close);
            }
            '=' => {
                chars.next();
                if chars.peek().is_some_and(|&(_, c)| c == '=') {
                    chars.next();
                }
                out.push(Tok::Eq);
            }
            '!' => {
                chars.next();
                if chars.peek().is_some_and(|&(_, c)| c == '=') {
                    chars.next();
                    out.push(Tok::NotEq);
                } else {
                    out.push(Tok::Bang);
                }
            }
            ':' | ';' => return Err(format!("unexpected {c:?}")),
            _ => {
                let mut end = text.len();
                while let Some(&(i, c)) = chars.peek() {
                    if is_special(c) {
                        end = i;
                        break;
                    }
                    chars.next();
                }
                out.push(Tok::Word(text[start..end].to_string()));
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn new(text: &str) -> Result<Self, String> {
        Ok(Self {
            toks: tokenize(text)?,
            pos: 0,
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn selector(&mut self) -> Result<Selector, String> {
        if self.toks.is_empty() {
            return Err("empty selector".to_string());
        }
        let mut requirements = Vec::new();
        loop {
            requirements.push(self.requirement()?);
            match self.next() {
                None => break,
                Some(Tok::Comma) => {
                    if self.peek().is_none() {
                        return Err("trailing \",\"".to_string());
                    }
                }
                Some(Tok::Close) => return Err("unexpected \")\"".to_string()),
                Some(t) => {
                    return Err(format!(
                        "unexpected {t}; requirements are separated by \",\""
                    ))
                }
            }
        }
        Ok(Selector { requirements })
    }

    fn key(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Tok::Word(w)) => {
                validate_key(&w)?;
                Ok(w)
            }
            Some(Tok::Comma) | None => Err("missing label key".to_string()),
            Some(t) => Err(format!("expected a label key, got {t}")),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        if self.peek() == Some(&Tok::Bang) {
            self.next();
            let key = self.key()?;
            if let Some(t @ (Tok::Eq | Tok::NotEq | Tok::Open)) = self.peek() {
                return Err(format!("unexpected {t} after \"!{key}\""));
            }
            return Ok(Requirement {
                key,
                op: Op::DoesNotExist,
                values: Vec::new(),
            });
        }
        let key = self.key()?;
        let op = match self.peek() {
            None | Some(Tok::Comma) | Some(Tok::Close) => {
                return Ok(Requirement {
                    key,
                    op: Op::Exists,
                    values: Vec::new(),
                })
            }
            Some(Tok::Eq) => Op::In,
            Some(Tok::NotEq) => Op::NotIn,
            Some(Tok::Word(w)) if w == "in" => Op::In,
            Some(Tok::Word(w)) if w == "notin" => Op::NotIn,
            Some(t) => {
                return Err(format!(
                    "expected \"=\", \"!=\", \"in\" or \"notin\" after {key:?}, got {t}"
                ))
            }
        };
        let set = matches!(self.next(), Some(Tok::Word(_)));
        let values = if set {
            self.value_set()?
        } else {
            vec![self.single_value()?]
        };
        Ok(Requirement { key, op, values })
    }

    /// The value after `=`/`!=`: a word, or empty when the requirement
    /// ends there (`k=` selects an empty label value, as upstream).
    fn single_value(&mut self) -> Result<String, String> {
        match self.peek() {
            None | Some(Tok::Comma) => Ok(String::new()),
            Some(Tok::Word(_)) => {
                let Some(Tok::Word(w)) = self.next() else {
                    unreachable!()
                };
                validate_value(&w)?;
                Ok(w)
            }
            Some(t) => Err(format!("expected a label value, got {t}")),
        }
    }

    fn value_set(&mut self) -> Result<Vec<String>, String> {
        match self.next() {
            Some(Tok::Open) => {}
            Some(t) => return Err(format!("expected \"(\" after \"in\"/\"notin\", got {t}")),
            None => return Err("expected \"(\" after \"in\"/\"notin\"".to_string()),
        }
        let mut values = Vec::new();
        loop {
            match self.next() {
                Some(Tok::Word(w)) => {
                    validate_value(&w)?;
                    values.push(w);
                }
                Some(Tok::Close) if values.is_empty() => {
                    return Err("empty value list \"()\"".to_string())
                }
                None => return Err("unclosed parenthesis".to_string()),
                Some(t) => return Err(format!("expected a value in the list, got {t}")),
            }
            match self.next() {
                Some(Tok::Comma) => {}
                Some(Tok::Close) => return Ok(values),
                None => return Err("unclosed parenthesis".to_string()),
                Some(t) => {
                    return Err(format!(
                        "expected \",\" or \")\" in the value list, got {t}"
                    ))
                }
            }
        }
    }
}

/// A label name or value segment: at most 63 characters, alphanumeric at
/// both ends, `-`, `_`, `.` inside.
fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS-1123 subdomain (a label key prefix).
fn valid_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

fn validate_key(key: &str) -> Result<(), String> {
    let ok = match key.split_once('/') {
        Some((prefix, name)) => valid_subdomain(prefix) && valid_name(name),
        None => valid_name(key),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || valid_name(value) {
        Ok(())
    } else {
        Err(format!("invalid label value {value:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: Op, values: &[&str]) -> Requirement {
        Requirement {
            key: key.to_string(),
            op,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn parses_every_requirement_form() {
        let table: Vec<(&str, Vec<Requirement>)> = vec![
            ("app=db", vec![req("app", Op::In, &["db"])]),
            ("app==db", vec![req("app", Op::In, &["db"])]),
            (" app = db ", vec![req("app", Op::In, &["db"])]),
            ("app!=db", vec![req("app", Op::NotIn, &["db"])]),
            ("app=", vec![req("app", Op::In, &[""])]),
            (
                "app in (cache,queue)",
                vec![req("app", Op::In, &["cache", "queue"])],
            ),
            (
                "app in ( cache , queue )",
                vec![req("app", Op::In, &["cache", "queue"])],
            ),
            ("app notin (a)", vec![req("app", Op::NotIn, &["a"])]),
            ("app", vec![req("app", Op::Exists, &[])]),
            ("!app", vec![req("app", Op::DoesNotExist, &[])]),
            ("! app", vec![req("app", Op::DoesNotExist, &[])]),
            (
                "app.kubernetes.io/name=db,tier in (backend, data),!canary,env!=dev,team",
                vec![
                    req("app.kubernetes.io/name", Op::In, &["db"]),
                    req("tier", Op::In, &["backend", "data"]),
                    req("canary", Op::DoesNotExist, &[]),
                    req("env", Op::NotIn, &["dev"]),
                    req("team", Op::Exists, &[]),
                ],
            ),
            // A key named like a keyword is still a key.
            ("in=x", vec![req("in", Op::In, &["x"])]),
            ("app=v1.2_3-x", vec![req("app", Op::In, &["v1.2_3-x"])]),
        ];
        for (text, want) in table {
            let got = Selector::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(got.requirements, want, "{text:?}");
        }
    }

    #[test]
    fn rejects_malformed_selectors() {
        let table = [
            ("", "empty selector"),
            ("   ", "empty selector"),
            ("app in (a", "unclosed parenthesis"),
            ("app in (a,", "unclosed parenthesis"),
            ("app in ()", "empty value list \"()\""),
            (
                "app in a",
                "expected \"(\" after \"in\"/\"notin\", got \"a\"",
            ),
            ("app in", "expected \"(\" after \"in\"/\"notin\""),
            (
                "app db",
                "expected \"=\", \"!=\", \"in\" or \"notin\" after \"app\", got \"db\"",
            ),
            (
                "app=db x",
                "unexpected \"x\"; requirements are separated by \",\"",
            ),
            ("app=db,", "trailing \",\""),
            (",app=db", "missing label key"),
            ("=db", "expected a label key, got \"=\""),
            ("app=db)", "unexpected \")\""),
            ("!app=db", "unexpected \"=\" after \"!app\""),
            ("-app=db", "invalid label key \"-app\""),
            ("Bad_Prefix/app=db", "invalid label key \"Bad_Prefix/app\""),
            ("app=-db", "invalid label value \"-db\""),
            ("app=db:1", "unexpected ':'"),
            ("app=a;b", "unexpected ';'"),
            ("app=(x)", "expected a label value, got \"(\""),
        ];
        for (text, want) in table {
            assert_eq!(Selector::parse(text).unwrap_err(), want, "{text:?}");
        }
    }

    #[test]
    fn matches_like_kubectl() {
        let labels: BTreeMap<String, String> = [("app", "db"), ("tier", "backend"), ("empty", "")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let table = [
            ("app=db", true),
            ("app=web", false),
            ("app!=web", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app notin (web,db)", false),
            ("missing notin (a)", true),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("empty=", true),
            ("app=db,tier=backend", true),
            ("app=db,tier=frontend", false),
        ];
        for (text, want) in table {
            assert_eq!(
                Selector::parse(text).unwrap().matches(&labels),
                want,
                "{text:?}"
            );
        }
        let list = vec![("app".to_string(), "db".to_string())];
        assert!(Selector::parse("app=db").unwrap().matches(&list));
    }

    #[test]
    fn displays_canonically() {
        let s = Selector::parse("app == db , tier in (a, b),!x,y,z!=w").unwrap();
        assert_eq!(s.to_string(), "app=db,tier in (a,b),!x,y,z!=w");
        assert_eq!(Selector::parse(&s.to_string()).unwrap(), s);
    }
}
