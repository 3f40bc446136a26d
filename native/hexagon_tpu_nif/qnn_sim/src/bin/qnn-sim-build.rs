//! `qnn-sim-build`: writes a qnn_sim context binary from a JSON spec.
//!
//! ```text
//! qnn-sim-build SPEC.json -o MODEL.bin     build (SPEC "-" reads stdin)
//! qnn-sim-build --check SPEC.json          validate only
//! qnn-sim-build --describe MODEL.bin       print a binary's graphs and tensors
//! ```
//! Exit status: 0 success, 1 invalid spec or binary, 2 usage or I/O error.

use std::io::Read;
use std::process::ExitCode;

const USAGE: &str =
    "usage: qnn-sim-build SPEC.json -o MODEL.bin | --check SPEC.json | --describe MODEL.bin";

fn read_input(path: &str) -> Result<Vec<u8>, String> {
    if path == "-" {
        let mut v = Vec::new();
        std::io::stdin()
            .read_to_end(&mut v)
            .map_err(|e| format!("reading stdin: {e}"))?;
        Ok(v)
    } else {
        std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))
    }
}

fn describe(bytes: &[u8]) -> Result<String, String> {
    let m = qnn_sim::format::decode(bytes).map_err(|e| e.to_string())?;
    let mut s = format!("soc_version: {}\n", m.soc_version);
    for g in &m.graphs {
        s += &format!("graph {:?}: {} nodes\n", g.name, g.nodes.len());
        for (what, list) in [("input", &g.inputs), ("output", &g.outputs)] {
            for &i in list {
                let t = g.tensor(i);
                s += &format!(
                    "  {what} {:?} id={} {} {:?} {:?}\n",
                    t.name, t.id, t.spec.dtype, t.spec.dims, t.spec.quant
                );
            }
        }
    }
    s += &format!("behaviour: {:?}\n", m.behaviour);
    Ok(s)
}

fn run(args: &[String]) -> Result<(), (u8, String)> {
    let usage = || (2u8, USAGE.to_string());
    match args {
        [flag, path] if flag == "--describe" => {
            let bytes = read_input(path).map_err(|e| (2, e))?;
            print!("{}", describe(&bytes).map_err(|e| (1, e))?);
            Ok(())
        }
        [flag, path] if flag == "--check" => {
            let text = read_input(path).map_err(|e| (2, e))?;
            let text = String::from_utf8(text).map_err(|_| (1, "spec is not UTF-8".to_string()))?;
            qnn_sim::spec::build_from_json(&text).map_err(|e| (1, e))?;
            Ok(())
        }
        [spec, o, out] | [o, out, spec] if o == "-o" || o == "--output" => {
            let text = read_input(spec).map_err(|e| (2, e))?;
            let text = String::from_utf8(text).map_err(|_| (1, "spec is not UTF-8".to_string()))?;
            let bytes = qnn_sim::spec::build_from_json(&text).map_err(|e| (1, e))?;
            std::fs::write(out, bytes).map_err(|e| (2, format!("writing {out}: {e}")))?;
            Ok(())
        }
        [h] if h == "-h" || h == "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(usage()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("qnn-sim-build: {msg}");
            ExitCode::from(code)
        }
    }
}
