//! The layers of each crate: which module imports which (`crate::`, `super::` and `self::`
//! paths in the code, not in comments or unit tests), and the import circles among them.
//!
//! A circle means a room cannot be read bottom-up. Each crate lists the circles it still
//! has, with the reason, in [`ALLOWED`]; the test fails when a new circle appears or an
//! existing one takes in another module, so the structure stays what ARCHITECTURE.md says.
//! `cargo test -p rnic-tests --test layers -- --nocapture` prints the map.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The circles each crate may still have (module paths, `crate::` left out), each a set of
/// modules that may import each other.
const ALLOWED: &[(&str, &[&[&str]])] = &[
    ("hw-regs", &[]),
    (
        "emulator",
        &[
            // The host-side bus handle posts BAR writes into the device's shared state, and a
            // deterministic device's doorbell write steps the device before it returns.
            &["bus", "device"],
            // Genuinely mutual, as in rxe: the requester hands WQEs that need no ACK (UD, UC)
            // to the completer's `complete_head`, and the completer runs the requester again
            // once an ACK or response retired WQEs and opened the window.
            &["transport::completer", "transport::requester"],
        ],
    ),
    ("driver", &[]),
    ("verbs-api", &[]),
    (
        "cm",
        &[
            // An event carries the id it concerns and ids queue events on their channel; the
            // agent hands the endpoint's events to the ids, which reach their agent's state.
            &["rdma_cm::agent", "rdma_cm::channel", "rdma_cm::id"],
        ],
    ),
    ("tools", &[]),
];

/// The source of a module with comment lines and the unit-test module left out.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable source");
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `.rs` file below `src`, by module path (`a::b` for `src/a/b.rs` or `src/a/b/mod.rs`;
/// `""` for the crate root).
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("readable src") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut mods = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).expect("below src").with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        mods.insert(parts.join("::"), f);
    }
    mods
}

/// The paths a use-tree or expression names, starting at byte `i` of `code` just after a
/// `crate`, `super` or `self` keyword whose path so far is `prefix`: `a::b`, `a::{b, c::d}`.
fn paths_at(code: &[u8], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    loop {
        if !code[i..].starts_with(b"::") {
            out.push(path);
            return i;
        }
        i += 2;
        if code.get(i) == Some(&b'{') {
            i += 1;
            loop {
                while code
                    .get(i)
                    .is_some_and(|c| c.is_ascii_whitespace() || *c == b',')
                {
                    i += 1;
                }
                match code.get(i) {
                    None => return i,
                    Some(b'}') => return i + 1,
                    _ => {}
                }
                let start = i;
                while code
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    i += 1;
                }
                let seg = String::from_utf8_lossy(&code[start..i]).into_owned();
                let mut p = path.clone();
                if seg != "self" && !seg.is_empty() {
                    p.push(seg);
                }
                i = paths_at(code, i, p, out);
                // Skip `as name` and anything else up to the next item of the group.
                while code.get(i).is_some_and(|c| *c != b',' && *c != b'}') {
                    i += 1;
                }
            }
        }
        let start = i;
        while code
            .get(i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            i += 1;
        }
        if start == i {
            out.push(path);
            return i;
        }
        let seg = String::from_utf8_lossy(&code[start..i]).into_owned();
        if seg == "super" {
            path.pop();
        } else {
            path.push(seg);
        }
    }
}

/// The modules `module`'s code imports, resolved against the crate's module list (the
/// longest module prefix of each path); its own submodules and ancestors are left out.
fn imports(module: &str, code: &str, mods: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    let here: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    let mut found = Vec::new();
    for kw in ["crate", "super", "self"] {
        let mut from = 0;
        while let Some(off) = code[from..].find(kw) {
            let at = from + off;
            from = at + kw.len();
            let word_before = at > 0 && {
                let c = bytes[at - 1];
                c.is_ascii_alphanumeric() || c == b'_' || c == b':'
            };
            if word_before || !code[from..].starts_with("::") {
                continue;
            }
            let base = match kw {
                "crate" => Vec::new(),
                "super" => here[..here.len().saturating_sub(1)].to_vec(),
                _ => here.clone(),
            };
            paths_at(bytes, from, base, &mut found);
        }
    }
    let mut out = BTreeSet::new();
    for path in found {
        let best = (0..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find(|m| mods.contains_key(m));
        if let Some(m) = best {
            let related = m == module
                || m.is_empty()
                || module.starts_with(&format!("{m}::"))
                || m.starts_with(&format!("{module}::"));
            if !related {
                out.insert(m);
            }
        }
    }
    out
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in &self.edges[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut c = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    c.insert(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if c.len() > 1 {
                    self.out.push(c);
                }
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

/// The import map of crate folder `dir`: module -> modules it imports.
fn import_map(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
        .join("src");
    let mods = modules(&src);
    mods.iter()
        .map(|(m, p)| (m.clone(), imports(m, &code_of(p), &mods)))
        .collect()
}

#[test]
fn no_import_circles_beyond_the_listed_ones() {
    let mut unexpected = Vec::new();
    for (dir, allowed) in ALLOWED {
        let map = import_map(dir);
        println!("== {dir}");
        for (m, to) in &map {
            if !to.is_empty() {
                let name = if m.is_empty() { "(root)" } else { m };
                let list: Vec<&str> = to.iter().map(String::as_str).collect();
                println!("{name} -> {}", list.join(", "));
            }
        }
        for c in circles(&map) {
            let fits = allowed
                .iter()
                .any(|a| c.iter().all(|m| a.contains(&m.as_str())));
            let list: Vec<&str> = c.iter().map(String::as_str).collect();
            println!("circle: {}", list.join(" "));
            if !fits {
                unexpected.push(format!("{dir}: {}", list.join(" ")));
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "import circles not in ALLOWED (break them, or list them with the reason): {unexpected:#?}"
    );
}

#[test]
fn the_parser_sees_groups_super_and_nested_paths() {
    let mut mods = BTreeMap::new();
    for m in ["", "a", "b", "b::c", "d", "e"] {
        mods.insert(m.to_owned(), PathBuf::new());
    }
    let code =
        "use crate::{a::X, b::c::{Y, Z as W}};\nuse super::super::d;\nfn f() { self::e::g(); }";
    let got = imports("b::c", code, &mods);
    // b (an ancestor of b::c) is left out; b::c is itself.
    assert_eq!(got, BTreeSet::from(["a".to_owned(), "d".to_owned()]));
    let got = imports("", "use crate::e::Q;", &mods);
    assert_eq!(got, BTreeSet::from(["e".to_owned()]));
}

#[test]
fn a_circle_is_found_and_a_chain_is_not() {
    let mut edges = BTreeMap::new();
    edges.insert("x".to_owned(), BTreeSet::from(["y".to_owned()]));
    edges.insert("y".to_owned(), BTreeSet::from(["z".to_owned()]));
    edges.insert("z".to_owned(), BTreeSet::from(["x".to_owned()]));
    edges.insert("w".to_owned(), BTreeSet::from(["x".to_owned()]));
    let c = circles(&edges);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].len(), 3);
    edges.insert("z".to_owned(), BTreeSet::new());
    assert!(circles(&edges).is_empty());
}
