//! The `qnn-sim-build` command-line tool and its JSON spec.

mod models;

use std::process::Command;

use qnn_sim::model::*;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qnn-sim-build"))
}

fn spec_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/classifier.json")
}

#[test]
fn builds_the_readme_classifier() {
    let out = std::env::temp_dir().join(format!("qnn_sim_cli_{}.bin", std::process::id()));
    let st = bin().arg(spec_path()).arg("-o").arg(&out).status().unwrap();
    assert!(st.success());
    let bytes = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let m = qnn_sim::format::decode(&bytes).unwrap();
    let reference = models::classifier().build_model().unwrap();
    let (g, r) = (
        m.graph("classifier").unwrap(),
        reference.graph("classifier").unwrap(),
    );
    for x in [[0u8, 0, 0, 0], [255, 128, 3, 77], [10, 200, 90, 255]] {
        let a = models::f32_from(&qnn_sim::numerics::run_graph(g, &[&x])[0]);
        let b = models::f32_from(&qnn_sim::numerics::run_graph(r, &[&x])[0]);
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }
    let d = bin()
        .arg("--describe")
        .arg("-")
        .stdin(std::fs::File::open(spec_path()).unwrap())
        .output()
        .unwrap();
    assert_eq!(d.status.code(), Some(1), "a spec is not a binary");
}

#[test]
fn errors_exit_nonzero_with_a_message() {
    let run = |json: &str| {
        let mut c = bin()
            .args(["--check", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin.take().unwrap().write_all(json.as_bytes()).unwrap();
        let o = c.wait_with_output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (c, e) = run("{");
    assert_eq!(c, Some(1));
    assert!(e.contains("invalid spec JSON"), "{e}");
    let (c, e) = run(
        r#"{"graphs":[{"name":"g","inputs":[{"name":"x","dtype":"q9","shape":[1]}],"nodes":[],"outputs":[]}]}"#,
    );
    assert_eq!(c, Some(1));
    assert!(e.contains("unknown dtype"), "{e}");
    let (c, _) = run(
        r#"{"graphs":[{"name":"g","inputs":[{"name":"x","dtype":"f32","shape":[1]}],"nodes":[{"op":"relu","inputs":["x"],"output":{"name":"y"}}],"outputs":["y"]}]}"#,
    );
    assert_eq!(c, Some(0));
    assert_eq!(bin().status().unwrap().code(), Some(2));
}

#[test]
fn spec_behaviour_and_quant_forms() {
    let json = r#"{
      "format_version": 1,
      "graphs": [{
        "name": "g",
        "inputs": [{"name": "x", "dtype": "u8", "shape": [2], "quant": {"scale": 0.5, "zero_point": 128}},
                   {"name": "z", "dtype": "sfixed_point_8", "shape": [2, 2], "quant": {"axis": 1, "scales": [1, 2], "zero_points": [0, 3], "bitwidth": 4}}],
        "constants": [{"name": "k", "dtype": "u8", "shape": [1], "raw": [7]}],
        "nodes": [{"op": "add", "inputs": ["x", "k"], "output": {"name": "y", "dtype": "f16", "shape": [2]}},
                  {"op": "relu", "inputs": ["z"], "output": {"name": "r"}}],
        "outputs": ["y", "r"]
      }],
      "behaviour": {
        "binary_info_version": 2, "graph_info_version": 1, "tensor_version": 1, "sleep_ms": 5,
        "fail_execute": {"code": "QNN_GRAPH_ERROR_TIMED_OUT", "after": 2, "scope": "context"},
        "fail_context_create": {"code": 1007, "mode": "once"},
        "adversarial": ["null_dims", {"kind": "zero_dim", "tensor": "y"}]
      }
    }"#;
    let m = qnn_sim::format::decode(&qnn_sim::spec::build_from_json(json).unwrap()).unwrap();
    let g = m.graph("g").unwrap();
    let x = g.input_defs().next().unwrap();
    assert_eq!(
        (x.spec.dtype, &x.spec.quant),
        (DType::UFixed8, &Quant::per_tensor(0.5, -128))
    );
    let z = g.input_defs().nth(1).unwrap();
    assert_eq!(
        z.spec.quant,
        Quant::per_axis(1, vec![1.0, 2.0], vec![0, -3]).with_bitwidth(4)
    );
    let r = g.output_defs().nth(1).unwrap();
    assert_eq!(r.spec, z.spec, "relu output inherits the input's type");
    assert_eq!(
        g.tensors.iter().find(|t| t.name == "k").unwrap().spec.dtype,
        DType::UInt8
    );
    let b = &m.behaviour;
    assert_eq!(
        (
            b.binary_info_version,
            b.graph_info_version,
            b.tensor_version,
            b.sleep_ms
        ),
        (2, 1, 1, 5)
    );
    assert_eq!(
        b.fail_execute,
        Some(Fault {
            code: 6033,
            after: 2,
            times: None,
            scope: FaultScope::Context,
            graph: None
        })
    );
    assert_eq!(b.fail_context_create, Some(Fault::once(1007)));
    assert_eq!(b.adversarial.len(), 2);
    assert!(
        qnn_sim::spec::build_from_json(r#"{"graphs": [], "bogus": 1}"#)
            .unwrap_err()
            .contains("bogus")
    );
}
