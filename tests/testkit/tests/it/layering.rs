//! No import circles inside any crate of the workspace, kept that way.
//!
//! Reads every crate's module tree from `src/lib.rs` (or `src/main.rs`) through its `mod`
//! declarations, collects each file's references to other files of the same crate — `use` items
//! and paths written inline (`crate::metrics::metrics()`), relative to `crate`, `super`, `self`
//! or a child module — and fails naming the files of every cycle (a strongly connected set of
//! two or more files). A file's references to its own ancestors (`super::Error`, the crate
//! root's items) are not counted: a parent module is the namespace its children are part of.
//! Test-only modules (`#[cfg(test)]`) are left out: they are not the product's structure.
//!
//! Written by hand over `syn`: the crates that draw module graphs (cargo-modules) are programs,
//! not libraries a test can call, and they need a whole rust-analyzer build.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One file of a crate's module tree.
struct File {
    /// Its module path from the crate root (`["app", "rollout"]`).
    module: Vec<String>,
    /// Module paths (absolute) it refers to.
    references: BTreeSet<Vec<String>>,
}

/// The crate's files by path, and which file holds each module path.
#[derive(Default)]
struct Tree {
    files: BTreeMap<PathBuf, File>,
    modules: BTreeMap<Vec<String>, PathBuf>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// The explicit `#[path = "…"]` of a `mod` item, if any.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Collects the references of one file; `module` is the module the visitor is in (an inline
/// `mod` pushes onto it), `children` the modules declared in each module of this file.
struct References<'a> {
    module: Vec<String>,
    children: &'a BTreeMap<Vec<String>, BTreeSet<String>>,
    found: BTreeSet<Vec<String>>,
}

impl References<'_> {
    /// Resolves a path's leading segments (`crate`, `super`, `self`, a child module) to an
    /// absolute module path; `None` for paths into other crates or the prelude.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.clone(),
            "super" => {
                let mut base = self.module.clone();
                base.pop();
                let mut rest = rest;
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name if self
                .children
                .get(&self.module)
                .is_some_and(|children| children.contains(name)) =>
            {
                let mut base = self.module.clone();
                base.push(name.to_string());
                base
            }
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn add(&mut self, segments: &[String]) {
        if let Some(path) = self.absolute(segments) {
            self.found.insert(path);
        }
    }

    /// Every path a `use` tree names, flattened.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name == "self" {
                    let whole = prefix.clone();
                    self.add(&whole);
                } else {
                    prefix.push(name);
                    let whole = prefix.clone();
                    self.add(&whole);
                    prefix.pop();
                }
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                let whole = prefix.clone();
                self.add(&whole);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => {
                let whole = prefix.clone();
                self.add(&whole);
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for References<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if !is_test_only(&item.attrs) {
            self.use_tree(&mut Vec::new(), &item.tree);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if is_test_only(&item.attrs) {
            return;
        }
        if let Some((_, items)) = &item.content {
            self.module.push(item.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.module.pop();
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.add(&segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Paths inside macro calls (`tracing::info!`, `format!`) are tokens, not syntax; the
        // common ones that name crate items are expressions, so try reading them as such.
        if let Ok(args) = mac.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) {
            for expr in &args {
                self.visit_expr(expr);
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// The modules each module of a file declares (`mod x;` or inline), keyed by module path.
fn declared(
    module: &[String],
    items: &[syn::Item],
    into: &mut BTreeMap<Vec<String>, BTreeSet<String>>,
) {
    for item in items {
        if let syn::Item::Mod(m) = item {
            if is_test_only(&m.attrs) {
                continue;
            }
            into.entry(module.to_vec())
                .or_default()
                .insert(m.ident.to_string());
            if let Some((_, inner)) = &m.content {
                let mut child = module.to_vec();
                child.push(m.ident.to_string());
                declared(&child, inner, into);
            }
        }
    }
}

/// Reads the file at `path` as module `module`, then the files of the modules it declares;
/// `dir` is where its child modules' files live.
fn read(tree: &mut Tree, path: &Path, module: Vec<String>, dir: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut children = BTreeMap::new();
    declared(&module, &syntax.items, &mut children);
    let mut references = References {
        module: module.clone(),
        children: &children,
        found: BTreeSet::new(),
    };
    references.visit_file(&syntax);
    tree.modules.insert(module.clone(), path.to_path_buf());
    tree.files.insert(
        path.to_path_buf(),
        File {
            module: module.clone(),
            references: references.found,
        },
    );
    // Out-of-line modules declared at the top of this file (inline ones stay in it).
    for item in &syntax.items {
        let syn::Item::Mod(m) = item else { continue };
        if m.content.is_some() || is_test_only(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let mut child = module.clone();
        child.push(name.clone());
        let (file, child_dir) = match path_attribute(&m.attrs) {
            Some(explicit) => {
                let file = dir.join(explicit);
                let child_dir = file.parent().unwrap().join(&name);
                (file, child_dir)
            }
            None => {
                let flat = dir.join(format!("{name}.rs"));
                if flat.exists() {
                    (flat, dir.join(&name))
                } else {
                    (dir.join(&name).join("mod.rs"), dir.join(&name))
                }
            }
        };
        read(tree, &file, child, &child_dir);
    }
}

/// The file that holds `module`: the longest prefix of it that is a file of the tree.
fn holder<'a>(tree: &'a Tree, module: &[String]) -> Option<&'a PathBuf> {
    (0..=module.len())
        .rev()
        .find_map(|n| tree.modules.get(&module[..n]))
}

/// The crate's file graph: each file and the other files it refers to.
fn graph(root: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut tree = Tree::default();
    read(&mut tree, root, Vec::new(), root.parent().unwrap());
    tree.files
        .iter()
        .map(|(path, file)| {
            let targets = file
                .references
                .iter()
                .filter_map(|module| holder(&tree, module))
                .filter(|target| *target != path)
                // A module naming its own ancestor's items (`super::Error`, `crate::Error`) is
                // the shape of every module tree — the ancestor is the namespace the module is
                // part of, and re-exports what it declares — not a dependency between peers.
                .filter(|target| !file.module.starts_with(&tree.files[*target].module))
                .cloned()
                .collect();
            (path.clone(), targets)
        })
        .collect()
}

/// Every strongly connected set of two or more files (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'g>(s: &mut State<'g>, node: &'g PathBuf) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for next in &s.graph[node] {
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// The roots of every crate's module trees: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`.
fn roots() -> Vec<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest: toml_like::Members = toml_like::members(&workspace.join("Cargo.toml"));
    let mut roots = Vec::new();
    for member in manifest {
        let src = workspace.join(&member).join("src");
        for name in ["lib.rs", "main.rs"] {
            if src.join(name).exists() {
                roots.push(src.join(name));
            }
        }
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            for bin in bins.flatten() {
                if bin.path().extension().is_some_and(|e| e == "rs") {
                    roots.push(bin.path());
                }
            }
        }
    }
    assert!(roots.len() > 10, "found only {roots:?}");
    roots
}

/// The workspace's member list, read from its manifest's `members = [ … ]`.
mod toml_like {
    pub type Members = Vec<String>;

    pub fn members(manifest: &std::path::Path) -> Members {
        let text = std::fs::read_to_string(manifest).unwrap();
        let start = text
            .find("members = [")
            .expect("a [workspace] members list");
        let list = &text[start..text[start..].find(']').unwrap() + start];
        list.split('"')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect()
    }
}

#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    let mut found = Vec::new();
    for root in roots() {
        for cycle in cycles(&graph(&root)) {
            let names: Vec<String> = cycle.iter().map(|p| p.display().to_string()).collect();
            found.push(names.join(" ↔ "));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_circle_check_finds_a_circle_through_a_use_an_inline_path_and_super() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("app")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod app;\nmod metrics;\nmod plain;\n").unwrap();
    std::fs::write(
        src.join("app/mod.rs"),
        "mod rollout;\npub struct Error;\nfn f() { rollout::go(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("app/rollout.rs"),
        "pub fn go() { crate::metrics::count(); }\n#[cfg(test)]\nmod tests { use crate::plain::X; }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("metrics.rs"),
        "use crate::app::{self, Error};\npub fn count() {}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("plain.rs"),
        "use super::metrics::count;\npub struct X;\n",
    )
    .unwrap();
    let graph = graph(&src.join("lib.rs"));
    let found = cycles(&graph);
    let name = |p: &str| src.join(p);
    assert_eq!(
        found,
        vec![vec![
            name("app/mod.rs"),
            name("app/rollout.rs"),
            name("metrics.rs")
        ]],
        "{graph:#?}"
    );
    // The child naming its parent's items is no circle on its own.
    assert!(graph[&name("app/rollout.rs")].contains(&name("metrics.rs")));
    assert!(!graph[&name("plain.rs")].contains(&name("app/mod.rs")));
}
