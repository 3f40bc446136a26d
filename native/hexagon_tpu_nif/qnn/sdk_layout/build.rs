//! Runs bindgen over `$QNN_SDK_ROOT/include/QNN` and generates, for every entry of
//! `qnn_sys::DECLARED`, the matching size, alignment and field offsets as bindgen lays them out
//! for the target being built (`$OUT_DIR/headers.rs`). Nothing generated leaves `$OUT_DIR`.

use std::collections::HashMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use qnn_sys::{DECLARED, StructLayout};

fn main() {
    println!("cargo::rerun-if-env-changed=QNN_SDK_ROOT");
    println!("cargo::rerun-if-env-changed=QNN_LAYOUT_REPORT_ALL");
    println!("cargo::rerun-if-changed=wrapper.h");
    println!("cargo::rustc-check-cfg=cfg(qnn_layout_report_all)");

    let include = sdk_include_dir();
    println!("cargo::rerun-if-changed={}", include.display());
    if env::var_os("QNN_LAYOUT_REPORT_ALL").is_some_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=qnn_layout_report_all");
    }

    let target = env::var("TARGET").expect("cargo sets TARGET");
    let host = env::var("HOST").expect("cargo sets HOST");
    // bindgen passes clang `--target=$TARGET` itself. A cross target has no C library headers
    // here, so use clang's own <stdint.h>/<stddef.h>/<stdbool.h>/<limits.h>.
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(["-x", "c", "-std=c11"])
        .clang_arg(format!("-I{}", include.display()))
        .allowlist_type("Qnn.*")
        .generate_comments(false)
        .layout_tests(true);
    if target != host {
        builder = builder.clang_arg("-ffreestanding");
    }
    let bindings = builder
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen failed on {}: {e}", include.display())))
        .to_string();

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out.join("bindings.rs"), &bindings).expect("write bindings.rs");
    let index = Index::new(&bindings);
    let mut code = String::new();
    writeln!(
        code,
        "pub const SDK_INCLUDE: &str = {:?};",
        include.display().to_string()
    )
    .unwrap();
    writeln!(code, "pub const TARGET: &str = {target:?};").unwrap();
    writeln!(
        code,
        "pub const CLANG: &str = {:?};",
        bindgen::clang_version().full
    )
    .unwrap();
    code.push_str("pub const HEADERS: &[Header] = &[\n");
    for declared in DECLARED {
        code.push_str(&header_entry(declared, &index));
    }
    code.push_str("];\n");
    fs::write(out.join("headers.rs"), code).expect("write headers.rs");
}

fn sdk_include_dir() -> PathBuf {
    let Some(root) = env::var_os("QNN_SDK_ROOT").filter(|r| !r.is_empty()) else {
        fail(
            "QNN_SDK_ROOT is not set. Point it at a QAIRT/QNN SDK root, the directory that holds \
             include/QNN/QnnInterface.h (see qnn/README.md, \"ABI layout check\").",
        )
    };
    let include = Path::new(&root).join("include").join("QNN");
    if !include.join("QnnInterface.h").is_file() {
        fail(&format!(
            "QNN_SDK_ROOT={} has no include/QNN/QnnInterface.h; it must be the SDK root, with the \
             headers in include/QNN/.",
            Path::new(&root).display()
        ));
    }
    include
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}

/// Structs, unions and type aliases of the generated bindings, with field names and the type
/// each field names.
struct Index {
    records: HashMap<String, Vec<(String, String)>>,
    aliases: HashMap<String, String>,
}

impl Index {
    fn new(bindings: &str) -> Self {
        let file = syn::parse_file(bindings).expect("bindgen output parses");
        let mut records = HashMap::new();
        let mut aliases = HashMap::new();
        let fields_of = |fields: &mut dyn Iterator<Item = &syn::Field>| -> Vec<(String, String)> {
            fields
                .filter_map(|f| Some((f.ident.as_ref()?.to_string(), type_name(&f.ty))))
                .collect()
        };
        for item in &file.items {
            match item {
                syn::Item::Struct(s) => {
                    records.insert(s.ident.to_string(), fields_of(&mut s.fields.iter()));
                }
                syn::Item::Union(u) => {
                    records.insert(u.ident.to_string(), fields_of(&mut u.fields.named.iter()));
                }
                syn::Item::Type(t) => {
                    aliases.insert(t.ident.to_string(), type_name(&t.ty));
                }
                _ => {}
            }
        }
        Self { records, aliases }
    }

    fn record(&self, name: &str) -> Option<&[(String, String)]> {
        let mut name = name;
        for _ in 0..8 {
            if let Some(fields) = self.records.get(name) {
                return Some(fields);
            }
            name = self.aliases.get(name)?;
        }
        None
    }

    fn field_type(&self, record: &str, field: &str) -> Option<&str> {
        let fields = self.record(record)?;
        fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, t)| t.as_str())
    }

    /// Types with the same name up to a trailing version (`..._ImplementationV2_30_t` for
    /// `..._ImplementationV2_32_t`), to say what the headers have instead.
    fn similar(&self, name: &str) -> Vec<&str> {
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_' || c == 't');
        let mut found: Vec<&str> = (self.records.keys().chain(self.aliases.keys()))
            .map(String::as_str)
            .filter(|n| *n != name && n.starts_with(stem) && n.len() > stem.len())
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }
}

fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// bindgen appends `_` to C names that are Rust keywords (`type` becomes `type_`).
fn rust_ident(c_name: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "as", "box", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
        "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
        "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true",
        "type", "unsafe", "use", "where", "while", "abstract", "become", "do", "final", "macro",
        "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "async", "await",
        "gen",
    ];
    if KEYWORDS.contains(&c_name) {
        format!("{c_name}_")
    } else {
        c_name.to_owned()
    }
}

/// One `Header` expression for `declared`. A type or member the headers lack becomes
/// `Missing` with a reason, so the check reports it instead of failing to compile.
fn header_entry(declared: &StructLayout, index: &Index) -> String {
    // `Outer.member` names an anonymous C union by the member that holds it.
    let (outer, base) = match declared.name.split_once('.') {
        Some((outer, member)) => (outer, Some(rust_ident(member))),
        None => (declared.name, None),
    };
    let missing = |why: String| format!("    Header::Missing({why:?}),\n");
    if index.record(outer).is_none() {
        let similar = index.similar(outer);
        return missing(if similar.is_empty() {
            format!("C type {outer} is not declared by these headers")
        } else {
            format!(
                "C type {outer} is not declared by these headers (they declare {})",
                similar.join(", ")
            )
        });
    }
    let ty = format!("bindings::{outer}");
    let (record, size, align, base_offset) = match &base {
        None => (
            outer.to_owned(),
            format!("size_of::<{ty}>()"),
            format!("align_of::<{ty}>()"),
            String::new(),
        ),
        Some(member) => {
            let Some(inner) = index.field_type(outer, member) else {
                return missing(format!("C type {outer} has no member {member}"));
            };
            (
                inner.to_owned(),
                format!("field_size!({ty}, {member})"),
                format!("field_align!({ty}, {member})"),
                format!(" - offset_of!({ty}, {member})"),
            )
        }
    };
    let mut fields = String::new();
    for field in declared.fields {
        // A C member name, or a path through anonymous unions (`__bindgen_anon_1.hybridCoo`).
        let members: Vec<String> = field.name.split('.').map(rust_ident).collect();
        let mut holder = record.clone();
        let mut resolved = true;
        for member in &members {
            match index.field_type(&holder, member) {
                Some(next) => holder = next.to_owned(),
                None => {
                    resolved = false;
                    break;
                }
            }
        }
        let member = members.join(".");
        if !resolved {
            let what = base
                .as_deref()
                .map_or(outer.to_owned(), |b| format!("{outer}.{b}"));
            writeln!(
                fields,
                "        Field::Missing(\"{what} has no member {member}\"),"
            )
            .unwrap();
            continue;
        }
        let path = base
            .as_deref()
            .map_or(member.clone(), |b| format!("{b}.{member}"));
        writeln!(
            fields,
            "        Field::Found {{ offset: offset_of!({ty}, {path}){base_offset}, \
             size: field_size!({ty}, {path}) }},"
        )
        .unwrap();
    }
    format!(
        "    // {name} (qnn_sys::{rust})\n    Header::Found {{ size: {size}, align: {align}, \
         fields: &[\n{fields}    ] }},\n",
        name = declared.name,
        rust = declared.rust_name,
    )
}
